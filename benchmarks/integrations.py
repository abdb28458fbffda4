"""The frameworks' retrieval, measured (issue 62): the same queries through each framework's hmde retriever, and
through hmde's document vectors in each framework's default in-memory vector store (what a user gets by putting
``/v1/embeddings`` vectors in their own store).

Collection: the 48 XQuAD articles of the dev data, article i in language ``LANGS[i % 4]`` (German, Greek, Hindi,
English: a mixed collection); queries: the first question of every paragraph (240), in English and in Greek; the
relevant document is the question's article. MRR@10 and P@1 (one relevant document per query), hmde-e5, 2 cores.

Rows:
- ``hmde search``: :meth:`hmde.Index.search` (best sentence + 0.5 x document vector, the language calibration);
- each framework's hmde store (issue 76), filled through the framework's own calls (LangChain's
  ``add_documents``, LlamaIndex's ``VectorStoreIndex.from_documents`` with its default node splitter, Haystack's
  ``write_documents``) and searched through it (``as_retriever``, ``HmdeRetriever(document_store=...)``); LlamaIndex's
  nodes are ranked by their document (``ref_doc_id``, its best node);
- LangChain / LlamaIndex / Haystack ``HmdeRetriever`` over the same index (hmde.integrations);
- ``/v1`` vectors in LangChain's ``InMemoryVectorStore`` (``OpenAIEmbeddings`` against ``hmde serve``, the query
  path not asked for: the route a new user takes), in LlamaIndex's ``VectorStoreIndex`` and Haystack's
  ``InMemoryDocumentStore`` (hmde's embedders: documents through the document path, queries through the query
  path).

    python benchmarks/integrations.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

LANGS = ("de", "el", "hi", "en")
CODES = {"de": "deu", "el": "ell", "hi": "hin", "en": "eng"}


def collection(data: Path):
    """(documents, {query language: (questions, relevant article ids)})."""
    from hmde.evaluation import clir

    folder = data / "eval" / "xquad"
    docs = {}
    for lang in LANGS:
        _, articles, _ = clir.load_xquad(folder, "en", lang, "article")
        for i, (doc_id, text) in enumerate(zip(articles.doc_ids, articles.texts)):
            if LANGS[i % len(LANGS)] == lang:
                docs[doc_id] = {"doc_id": doc_id, "text": text, "lang": CODES[lang]}
    queries = {}
    for query_lang in ("en", "el"):
        raw = json.loads(clir.xquad_file(folder, query_lang).read_text(encoding="utf-8"))["data"]
        questions = [(para["qas"][0]["question"], f"a{a}") for a, article in enumerate(raw)
                     for para in article["paragraphs"]]
        queries[query_lang] = questions
    return [docs[k] for k in sorted(docs, key=lambda x: int(x[1:]))], queries


def scores(rankings: list[list[str]], relevant: list[str]) -> tuple[float, int]:
    mrr = sum(1.0 / (r.index(want) + 1) if want in r[:10] else 0.0 for r, want in zip(rankings, relevant))
    return mrr / len(relevant), sum(1 for r, want in zip(rankings, relevant) if r[:1] == [want])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--queries", type=int, default=240, help="questions per query language (first N)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from serve_helpers import serve_process

    from hmde.cli.main import main as hmde
    from hmde.index.search import Index
    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    docs, queries = collection(args.data)
    work = Path(tempfile.mkdtemp(prefix="hmde-integrations-"))
    src = work / "docs.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    assert hmde(["index", "build", "hmde-e5", str(src), "-o", str(work / "xquad"), "--no-progress"]) == 0
    process, url = serve_process([str(work / "xquad")])
    try:
        rows = {}
        routes = {
            "hmde search (Index.search)": None,
            "LangChain HmdeRetriever": lc.HmdeRetriever(index=str(work / "xquad"), k=10),
            "LlamaIndex HmdeRetriever": li.HmdeRetriever(index=str(work / "xquad"), k=10),
            "Haystack HmdeRetriever": hs.HmdeRetriever(index=str(work / "xquad"), k=10),
        }
        index = Index.open(str(work / "xquad"))
        for name, retriever in routes.items():
            for query_lang, pairs in queries.items():
                asked = pairs[:args.queries]
                started = time.perf_counter()
                if retriever is None:
                    ranked = [[h.doc_id for h in hits] for hits in index.search([q for q, _ in asked], top_k=10)]
                elif isinstance(retriever, lc.HmdeRetriever):
                    ranked = [[d.id for d in retriever.invoke(q)] for q, _ in asked]
                elif isinstance(retriever, li.HmdeRetriever):
                    ranked = [[n.node.id_ for n in retriever.retrieve(q)] for q, _ in asked]
                else:
                    ranked = [[d.id for d in retriever.run(q)["documents"]] for q, _ in asked]
                rows[(name, query_lang)] = (*scores(ranked, [r for _, r in asked]), time.perf_counter() - started)
        index.close()
        rows.update(store_rows(docs, queries, work, args.queries))
        rows.update(vector_store_rows(docs, queries, url, args.queries))
        print(f"{len(docs)} XQuAD articles in {', '.join(LANGS)} (article i in language i mod 4); the first question of "
              f"each paragraph ({args.queries} per language); hmde-e5; MRR@10, P@1")
        print("| route | English questions MRR | P@1 | Greek questions MRR | P@1 |")
        print("|---|---|---|---|---|")
        for name in dict.fromkeys(n for n, _ in rows):
            en, el = rows[(name, "en")], rows[(name, "el")]
            print(f"| {name} | {en[0]:.3f} | {en[1]}/{args.queries} | {el[0]:.3f} | {el[1]}/{args.queries} |")
    finally:
        process.terminate()
        process.wait(60)


def store_rows(docs, queries, work: Path, n: int) -> dict:
    """Each framework's hmde store, filled and searched the way the framework teaches."""
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document
    from llama_index.core import Document as LlamaDocument, StorageContext, VectorStoreIndex

    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    rows = {}
    langchain = lc.HmdeVectorStore(index=str(work / "langchain"))
    langchain.add_documents([Document(page_content=d["text"], id=d["doc_id"], metadata={"lang": d["lang"]})
                             for d in docs])
    langchain_retriever = langchain.as_retriever(search_kwargs={"k": 10})
    llama = li.HmdeVectorStore(index=str(work / "llama"))
    llama_index = VectorStoreIndex.from_documents(
        [LlamaDocument(text=d["text"], id_=d["doc_id"]) for d in docs],
        storage_context=StorageContext.from_defaults(vector_store=llama), embed_model=llama.embed_model)
    llama_retriever = llama_index.as_retriever(similarity_top_k=30)  # nodes: ranked by their documents below
    haystack = hs.HmdeDocumentStore(index=str(work / "haystack"))
    haystack.write_documents([HaystackDocument(id=d["doc_id"], content=d["text"]) for d in docs])
    haystack_retriever = hs.HmdeRetriever(document_store=haystack, top_k=10)
    for query_lang, pairs in queries.items():
        asked = pairs[:n]
        relevant = [r for _, r in asked]
        ranked = [[d.id for d in langchain_retriever.invoke(q)] for q, _ in asked]
        rows[("LangChain HmdeVectorStore (add_documents, as_retriever)", query_lang)] = (*scores(ranked, relevant), 0)
        ranked = [list(dict.fromkeys(x.node.ref_doc_id for x in llama_retriever.retrieve(q)))[:10] for q, _ in asked]
        rows[("LlamaIndex HmdeVectorStore (from_documents, default nodes, as_retriever)", query_lang)] = \
            (*scores(ranked, relevant), 0)
        ranked = [[d.id for d in haystack_retriever.run(q)["documents"]] for q, _ in asked]
        rows[("Haystack HmdeDocumentStore (write_documents, HmdeRetriever)", query_lang)] = \
            (*scores(ranked, relevant), 0)
    for store in (langchain.client, llama.client, haystack.client):
        store.close()
    return rows


def vector_store_rows(docs, queries, url: str, n: int) -> dict:
    """hmde's document vectors in each framework's own in-memory store."""
    from haystack import Document as HaystackDocument
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_openai import OpenAIEmbeddings
    from llama_index.core import Document as LlamaDocument, Settings, VectorStoreIndex

    from hmde.integrations import haystack as hs, llama_index as li

    rows = {}
    openai_route = OpenAIEmbeddings(model="hmde-e5", base_url=url + "/v1", api_key="-",
                                    check_embedding_ctx_length=False)
    store = InMemoryVectorStore(openai_route)
    store.add_documents([Document(page_content=d["text"], id=d["doc_id"]) for d in docs])
    Settings.embed_model = li.HmdeEmbedding()
    Settings.chunk_size = 8192  # a document a node: the vector of the whole document, as /v1 gives it
    llama = VectorStoreIndex.from_documents([LlamaDocument(text=d["text"], id_=d["doc_id"]) for d in docs])
    llama_retriever = llama.as_retriever(similarity_top_k=10)
    haystack_store = InMemoryDocumentStore()
    embedded = hs.HmdeDocumentEmbedder().run([HaystackDocument(id=d["doc_id"], content=d["text"]) for d in docs])
    haystack_store.write_documents(embedded["documents"])
    haystack_retriever, query_embedder = InMemoryEmbeddingRetriever(haystack_store, top_k=10), hs.HmdeTextEmbedder()
    for query_lang, pairs in queries.items():
        asked = pairs[:n]
        relevant = [r for _, r in asked]
        ranked = [[d.id for d in store.similarity_search(q, k=10)] for q, _ in asked]
        rows[("/v1 vectors in LangChain's InMemoryVectorStore (OpenAIEmbeddings)", query_lang)] = \
            (*scores(ranked, relevant), 0.0)
        ranked = [[n.node.ref_doc_id for n in llama_retriever.retrieve(q)] for q, _ in asked]
        rows[("document vectors in LlamaIndex's VectorStoreIndex (HmdeEmbedding)", query_lang)] = \
            (*scores(ranked, relevant), 0.0)
        ranked = [[d.id for d in haystack_retriever.run(query_embedding=query_embedder.run(q)["embedding"])[
            "documents"]] for q, _ in asked]
        rows[("document vectors in Haystack's InMemoryDocumentStore (HmdeDocumentEmbedder)", query_lang)] = \
            (*scores(ranked, relevant), 0.0)
    return rows


if __name__ == "__main__":
    main()
