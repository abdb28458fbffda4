"""Documents ingested the way each framework teaches (its store's own write calls) and searched through it return
exactly ``hmde search``'s ids, in its order, on the index folder they wrote, and each framework's native filter
selects what the same ``--filter`` selects (issue 76); on the bundled hmde-e5, locally and over a served index."""

from __future__ import annotations

import json

import pytest

from hmde.cli.main import main

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

DOCS = [("final-deu", "Die Mannschaft hat am Sonntag das Finale gewonnen. Die Fans feierten bis in die Nacht.",
         {"section": "sport", "year": 2024}),
        ("final-ita", "La nostra squadra ha vinto la finale domenica. I tifosi hanno festeggiato.",
         {"section": "sport", "year": 2023}),
        ("volcano-eng", "The volcano erupted last night. Ash covered the villages on the slopes.",
         {"section": "science", "year": 2023}),
        ("volcano-fra", "Le volcan est entré en éruption hier soir. Les cendres ont couvert les villages.",
         {"section": "science", "year": 2022}),
        ("budget-spa", "El gobierno presentó el presupuesto. La oposición lo criticó con dureza.",
         {"section": "politics", "year": 2024}),
        ("budget-zho", "政府公布了预算。反对派对此提出了严厉批评。", {"section": "politics", "year": 2021})]
QUERIES = ["who won the final?", "ash over the villages", "the government's budget"]
# one filter in hmde's syntax and in each framework's own form
HMDE_FILTER = 'section != "politics" and year >= 2023'
LANGCHAIN_FILTER = {"section": {"$ne": "politics"}, "year": {"$gte": 2023}}
HAYSTACK_FILTER = {"operator": "AND", "conditions": [{"field": "meta.section", "operator": "!=", "value": "politics"},
                                                     {"field": "meta.year", "operator": ">=", "value": 2023}]}


def llama_filter():
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    return MetadataFilters(filters=[MetadataFilter(key="section", operator="!=", value="politics"),
                                    MetadataFilter(key="year", operator=">=", value=2023)])


def hmde_search(folder, filter, capsys) -> dict[str, list[str]]:
    """``hmde search FOLDER --queries QUERIES --json --top-k 10 [--filter F]``: each query's ids, in order."""
    queries = folder.parent / "queries.tsv"
    queries.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(QUERIES)), encoding="utf-8")
    capsys.readouterr()
    assert main(["search", str(folder), "--queries", str(queries), "--json", "--top-k", "10",
                 *(["--filter", filter] if filter else [])]) == 0
    found = {q: [] for q in QUERIES}
    for line in capsys.readouterr().out.splitlines():
        hit = json.loads(line)
        found[hit["query"]].append(hit["doc_id"])
    return found


def test_each_frameworks_store_ranks_as_hmde_search_on_the_folder_it_wrote(tmp_path, capsys):
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from hmde.integrations.haystack import HmdeDocumentStore, HmdeRetriever
    from hmde.integrations.langchain import HmdeVectorStore as LangChainStore
    from hmde.integrations.llama_index import HmdeVectorStore as LlamaStore

    langchain = LangChainStore(index=str(tmp_path / "langchain"))
    langchain.add_documents([LangChainDocument(page_content=t, metadata=m, id=x) for x, t, m in DOCS])
    haystack = HmdeDocumentStore(index=str(tmp_path / "haystack"))
    haystack.write_documents([HaystackDocument(id=x, content=t, meta=m) for x, t, m in DOCS])
    llama = LlamaStore(index=str(tmp_path / "llama"))
    llama.add([TextNode(id_=x, text=t, metadata=m) for x, t, m in DOCS])
    retriever = HmdeRetriever(document_store=haystack, top_k=10)
    for filter_forms in ((None, None, None, None), (HMDE_FILTER, LANGCHAIN_FILTER, HAYSTACK_FILTER, llama_filter())):
        hmde_filter, lc_filter, hs_filter, li_filter = filter_forms
        searched = [hmde_search(tmp_path / name, hmde_filter, capsys) for name in ("langchain", "haystack", "llama")]
        assert searched[0] == searched[1] == searched[2]
        for query in QUERIES:
            want = searched[0][query]
            assert want
            assert [d.id for d in langchain.similarity_search(query, k=10, filter=lc_filter)] == want
            assert [d.id for d in langchain.as_retriever(search_kwargs={"k": 10, "filter": lc_filter}).invoke(
                query)] == want
            assert [d.id for d in retriever.run(query, filters=hs_filter)["documents"]] == want
            assert llama.query(VectorStoreQuery(query_str=query, similarity_top_k=10, filters=li_filter)).ids == want
            if hmde_filter:
                assert set(want) == {"final-deu", "final-ita", "volcano-eng"}
    for store in (langchain, haystack, llama):
        store.client.close()


def test_a_served_index_through_the_store_classes(tmp_path, capsys):
    """The same store classes over ``hmde serve --writable`` (url=, index=NAME): writes, reads and searches go
    through the server's routes, and answer as the local folder does."""
    pytest.importorskip("fastapi")
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document as LangChainDocument

    from hmde.integrations.haystack import HmdeDocumentStore
    from hmde.integrations.langchain import HmdeVectorStore as LangChainStore
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    assert main(["index", "build", "hmde-e5", str(_jsonl(tmp_path / "d.jsonl", DOCS[:1])), "-o",
                 str(tmp_path / "news"), "--no-progress"]) == 0
    with ThreadServer(load_served(None, [str(tmp_path / "news")], "cpu"),
                      ServeOptions(writable=True, api_key="k")) as server:
        langchain = LangChainStore(url=server.url, index="news", api_key="k")
        langchain.add_documents([LangChainDocument(page_content=t, metadata=m, id=x) for x, t, m in DOCS[1:]])
        assert [d.id for d in langchain.get_by_ids(["budget-zho", "final-ita", "nope"])] == ["final-ita",
                                                                                              "budget-zho"]
        searched = hmde_search(tmp_path / "news", HMDE_FILTER, capsys)
        for query in QUERIES:
            assert [d.id for d in langchain.similarity_search(query, k=10, filter=LANGCHAIN_FILTER)] == \
                searched[query]
        haystack = HmdeDocumentStore(url=server.url, index="news", api_key="k")
        assert haystack.count_documents() == len(DOCS)
        assert haystack.update_by_filter({"field": "meta.section", "operator": "==", "value": "sport"},
                                         {"checked": True}) == 2
        assert sorted(d.id for d in haystack.filter_documents({"field": "meta.checked", "operator": "==",
                                                               "value": True})) == ["final-deu", "final-ita"]
        assert haystack.delete_by_filter({"field": "meta.year", "operator": "<", "value": 2023}) == 2
        haystack.write_documents([HaystackDocument(id="new", content="Ein neuer Bericht.", meta={"year": 2025})])
        assert haystack.count_documents() == len(DOCS) - 1
        langchain.delete(["new"])
        assert haystack.count_documents() == len(DOCS) - 2


def _jsonl(path, docs):
    path.write_text("".join(json.dumps({"doc_id": x, "text": t, **m}, ensure_ascii=False) + "\n"
                            for x, t, m in docs), encoding="utf-8")
    return path
