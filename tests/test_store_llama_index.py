"""LlamaIndex has no conformance suite for vector stores; this class is ours in the same spirit (issue 76): nodes
added, read back as they were (id, text, metadata, ref_doc_id, relationships), deleted by node, by document and by
filter, queried with filters, doc_ids and node_ids, kept across a reopen, and the way LlamaIndex's docs teach it
(``VectorStoreIndex.from_documents`` with a storage context, ``insert``, ``delete_ref_doc``,
``as_retriever(filters=...)``, ``as_query_engine``), over a local index and one whose vectors live in Milvus. Every
filter operator against LlamaIndex's own evaluation: tests/store_contract.py."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (FilterCondition, MetadataFilter, MetadataFilters,  # noqa: E402
                                                  VectorStoreQuery)

from hmde.integrations.llama_index import HmdeVectorStore  # noqa: E402

TEXTS = {"final": "Die Mannschaft hat am Sonntag das Finale gewonnen.", "volcano": "The volcano erupted last night.",
         "budget": "El gobierno presentó el presupuesto.", "cat": "Le chat dort sur le tapis."}


@pytest.fixture(params=["local", "milvus"])
def settings(request, tmp_path):
    if request.param == "milvus":
        pytest.importorskip("milvus_lite", reason="the Milvus store needs the extra: pip install 'hmde[milvus]'")
        return {"index": str(tmp_path / "idx"), "store": f"milvus:{tmp_path / 'milvus.db'}"}
    return {"index": str(tmp_path / "idx")}


def nodes():
    out = []
    for i, (name, text) in enumerate(TEXTS.items()):
        out.append(TextNode(id_=f"n-{name}", text=text, metadata={"topic": name, "year": 2020 + i, "tags": ["x"]},
                            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{i % 2}")}))
    return out


def same(a, b) -> bool:
    return a.model_dump(exclude={"embedding"}) == b.model_dump(exclude={"embedding"})


def test_nodes_round_trip_delete_by_node_document_and_filter_and_survive_a_reopen(settings):
    store = HmdeVectorStore(**settings)
    written = nodes()
    assert store.add(written) == [n.node_id for n in written]
    got = store.get_nodes()
    assert len(got) == 4 and all(same(a, b) for a, b in zip(got, written))
    assert [n.ref_doc_id for n in got] == ["doc-0", "doc-1", "doc-0", "doc-1"]
    assert [n.node_id for n in store.get_nodes(node_ids=["n-cat", "n-final", "nope"])] == ["n-final", "n-cat"]
    year = MetadataFilters(filters=[MetadataFilter(key="year", operator=">=", value=2022)])
    assert [n.node_id for n in store.get_nodes(filters=year)] == ["n-budget", "n-cat"]
    store.delete("doc-1")  # a document's nodes
    assert [n.node_id for n in store.get_nodes()] == ["n-final", "n-budget"]
    store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="budget")]))
    store.client.close()
    reopened = HmdeVectorStore(**settings)  # the same folder, a new store: what was committed is there
    assert [n.node_id for n in reopened.get_nodes()] == ["n-final"] and same(reopened.get_nodes()[0], written[0])
    reopened.add([written[1]])
    reopened.delete_nodes(node_ids=["n-final"])
    assert [n.node_id for n in reopened.get_nodes()] == ["n-volcano"]
    reopened.clear()
    assert reopened.get_nodes() == []
    reopened.client.close()


def test_queries_rank_as_hmde_and_honour_filters_doc_ids_and_node_ids(settings):
    store = HmdeVectorStore(**settings)
    store.add(nodes())
    query = VectorStoreQuery(query_str="who won the final?", similarity_top_k=4)
    result = store.query(query)
    hmde = store.client.search(["who won the final?"], 4)[0]
    assert result.ids == [h["doc_id"] for h in hmde] and result.ids[0] == "n-final"
    assert all(0 <= s <= 1 for s in result.similarities) and result.similarities == sorted(result.similarities,
                                                                                             reverse=True)
    assert same(result.nodes[0], nodes()[0])
    not_final = MetadataFilters(filters=[MetadataFilter(key="topic", operator="!=", value="final"),
                                         MetadataFilter(key="year", operator="<", value=2023)],
                                condition=FilterCondition.AND)
    filtered = store.query(VectorStoreQuery(query_str="who won the final?", similarity_top_k=4, filters=not_final))
    assert filtered.ids == [h["doc_id"] for h in store.client.search(["who won the final?"], 4,
                                                                     'topic != "final" and year < 2023')[0]]
    assert sorted(filtered.ids) == ["n-budget", "n-volcano"]
    assert set(store.query(VectorStoreQuery(query_str="final", similarity_top_k=4, doc_ids=["doc-1"])).ids) == \
        {"n-volcano", "n-cat"}
    assert store.query(VectorStoreQuery(query_str="final", similarity_top_k=4, node_ids=["n-cat"])).ids == ["n-cat"]
    with pytest.raises(Exception, match="LlamaIndex's operator contains compares inside lists"):
        store.query(VectorStoreQuery(query_str="x", filters=MetadataFilters(
            filters=[MetadataFilter(key="tags", operator="contains", value="x")])))
    store.client.close()


def test_the_way_llama_index_teaches_it(settings):
    from llama_index.core.llms import MockLLM

    store = HmdeVectorStore(**settings)
    documents = [Document(text=text, id_=name, metadata={"topic": name}) for name, text in TEXTS.items()]
    index = VectorStoreIndex.from_documents(documents, storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=store.embed_model)
    retriever = index.as_retriever(similarity_top_k=2, filters=MetadataFilters(
        filters=[MetadataFilter(key="topic", operator="in", value=["final", "budget", "volcano"])]))
    found = retriever.retrieve("who won the final?")
    assert found[0].node.ref_doc_id == "final" and len(found) == 2
    assert [n.node.node_id for n in found] == [h["doc_id"] for h in store.client.search(
        ["who won the final?"], 2, 'topic in ["final", "budget", "volcano"]')[0]]
    index.insert(Document(text="Ein neuer Bericht über das Finale.", id_="report", metadata={"topic": "report"}))
    assert {n.ref_doc_id for n in store.get_nodes()} == {"final", "volcano", "budget", "cat", "report"}
    index.delete_ref_doc("final")
    assert "final" not in {n.ref_doc_id for n in store.get_nodes()}
    answer = index.as_query_engine(llm=MockLLM(), similarity_top_k=1).query("who won the final?")
    assert len(answer.source_nodes) == 1 and answer.source_nodes[0].node.ref_doc_id == "report"
    store.client.close()
