"""What the framework stores give an application (issue 95): hybrid search from each store class over an index
made with bm25=True (its first, empty BM25 index failed in bm25s), ingestion progress where show_progress asks, and
LlamaIndex as its docs teach it (no embed_model) answered by one line naming embed_model=store.embed_model."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

TEXTS = ["The cat sat on the mat.", "Economic growth slowed in the third quarter.",
         "The football team won the championship after a dramatic final match."]


def test_hybrid_search_from_every_store_class(tmp_path, hmde_dir):
    """Each store made with bm25=True searches hybrid: the dense ranking with BM25's best document in the query's
    language (all are English here) 0.05 higher, every other score as it was."""
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document
    from llama_index.core import Document as LlamaDocument, StorageContext, VectorStoreIndex
    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

    from hmde.index.lexical_bonus import LEXICAL_WEIGHT
    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    def lifted(dense: dict, hybrid: dict, text: str) -> bool:
        return hybrid[text] == pytest.approx(dense[text] + LEXICAL_WEIGHT, abs=2e-5) and all(
            hybrid[t] == pytest.approx(dense[t], abs=2e-5) for t in dense if t != text)

    store = lc.HmdeVectorStore(index=str(tmp_path / "lc"), model=str(hmde_dir), bm25=True)
    store.add_documents([Document(page_content=t) for t in TEXTS])
    query = "football championship final"
    dense = {d.page_content: s for d, s in store.similarity_search_with_score(query, k=3)}
    hybrid = {d.page_content: s for d, s in store.similarity_search_with_score(query, k=3, hybrid=True)}
    assert lifted(dense, hybrid, TEXTS[2])

    llama = li.HmdeVectorStore(index=str(tmp_path / "li"), model=str(hmde_dir), bm25=True, scores="hmde")
    VectorStoreIndex.from_documents([LlamaDocument(text=t) for t in TEXTS], embed_model=llama.embed_model,
                                    storage_context=StorageContext.from_defaults(vector_store=llama))

    def llama_scores(mode):
        found = llama.query(VectorStoreQuery(query_str="economic growth", similarity_top_k=3, mode=mode))
        return {n.get_content(): s for n, s in zip(found.nodes, found.similarities)}

    assert lifted(llama_scores(VectorStoreQueryMode.DEFAULT), llama_scores(VectorStoreQueryMode.HYBRID), TEXTS[1])

    haystack = hs.HmdeDocumentStore(index=str(tmp_path / "hs"), model=str(hmde_dir), bm25=True)
    haystack.write_documents([HaystackDocument(content=t) for t in TEXTS])
    dense = {d.content: d.score for d in haystack.search("cat mat", top_k=3)}
    assert lifted(dense, {d.content: d.score for d in haystack.search("cat mat", top_k=3, hybrid=True)}, TEXTS[0])


def test_show_progress_shows_the_documents_embedded_on_every_store_class(tmp_path, hmde_dir, capfd):
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document
    from llama_index.core.schema import TextNode

    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    fills = {"lc": lambda store: store.add_documents([Document(page_content=t) for t in TEXTS]),
             "li": lambda store: store.add([TextNode(text=t) for t in TEXTS]),
             "hs": lambda store: store.write_documents([HaystackDocument(content=t) for t in TEXTS])}
    classes = {"lc": lc.HmdeVectorStore, "li": li.HmdeVectorStore, "hs": hs.HmdeDocumentStore}
    for name, fill in fills.items():
        for shown in (True, False):
            capfd.readouterr()
            fill(classes[name](index=str(tmp_path / f"{name}-{shown}"), model=str(hmde_dir), show_progress=shown))
            err = capfd.readouterr().err
            if shown:
                assert "hmde: documents embedded: 100%" in err and "3/3" in err, (name, err)
            else:
                assert "documents embedded" not in err, (name, err)


def test_llama_index_without_an_embed_model_says_what_to_pass(tmp_path, hmde_dir):
    from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex

    from hmde.errors import HmdeError
    from hmde.integrations.llama_index import NO_EMBED_MODEL, HmdeVectorStore

    try:
        import llama_index.embeddings.openai  # noqa: F401
        pytest.skip("llama-index-embeddings-openai is installed: LlamaIndex's default embed model loads")
    except ImportError:
        pass
    saved = Settings._embed_model
    Settings._embed_model = None
    try:
        store = HmdeVectorStore(index=str(tmp_path / "li"), model=str(hmde_dir))
        with pytest.raises(HmdeError) as caught:
            VectorStoreIndex.from_documents([Document(text=TEXTS[0])],
                                            storage_context=StorageContext.from_defaults(vector_store=store))
        assert str(caught.value) == NO_EMBED_MODEL and "embed_model=store.embed_model" in NO_EMBED_MODEL
        Settings.embed_model = store.embed_model  # a model set by the user is left as it is
        HmdeVectorStore(index=str(tmp_path / "li2"), model=str(hmde_dir))
        assert type(Settings._embed_model).__name__ == "NoVectors"
    finally:
        Settings._embed_model = saved


def one_each(grouped: list, ungrouped: list) -> bool:
    return sorted(grouped) == ["a", "b"] and grouped[0] == ungrouped[0]


def test_one_hit_per_source_from_every_store_class_and_hmde_search(tmp_path, hmde_dir, capsys):
    """Source a: five chunks, source b: one. Ungrouped, a top three holds a source twice at least; grouped by the
    framework's own source field, each source once, the first the ungrouped ranking's first (its best chunk)."""
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from hmde.cli.main import main
    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    query, other = TEXTS[0], TEXTS[1]
    chunks = [(f"a{i}", query, "a") for i in range(5)] + [("b0", other, "b")]

    store = lc.HmdeVectorStore(index=str(tmp_path / "lc"), model=str(hmde_dir))
    store.add_documents([Document(page_content=t, metadata={"source": s}, id=i) for i, t, s in chunks])
    plain = [d.metadata["source"] for d in store.similarity_search(query, k=3)]
    assert len(set(plain)) < len(plain)
    assert one_each([d.metadata["source"] for d in store.similarity_search(query, k=3, group_by="source")], plain)
    grouped = lc.HmdeVectorStore(index=str(tmp_path / "lc"), model=str(hmde_dir), group_by_source=True)
    assert one_each([d.metadata["source"] for d in grouped.similarity_search(query, k=2)], plain)

    llama = li.HmdeVectorStore(index=str(tmp_path / "li"), model=str(hmde_dir), group_by_source=True)
    llama.add([TextNode(text=t, id_=i, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=s)})
               for i, t, s in chunks])
    from llama_index.core.vector_stores.types import VectorStoreQuery

    found = llama.query(VectorStoreQuery(query_str=query, similarity_top_k=3))
    assert sorted(n.ref_doc_id for n in found.nodes) == ["a", "b"]

    haystack = hs.HmdeDocumentStore(index=str(tmp_path / "hs"), model=str(hmde_dir), group_by_source=True)
    haystack.write_documents([HaystackDocument(id=i, content=t, meta={"file_path": f"{s}.pdf"}) for i, t, s in chunks])
    assert sorted(d.meta["file_path"] for d in haystack.search(query, top_k=3)) == ["a.pdf", "b.pdf"]
    assert hs.HmdeDocumentStore.from_dict(haystack.to_dict()).group_by_source is True

    capsys.readouterr()
    assert main(["search", str(tmp_path / "lc"), query, "--group-by", "source", "--top-k", "3", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert one_each([h["metadata"]["source"] for h in hits], plain) and hits[0]["evidence"]
