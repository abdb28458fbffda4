"""Where users already are (issue 62): LangChain, LlamaIndex and Haystack get hmde's ranking unchanged, and
`/v1/embeddings` takes what OpenAI's clients send. Real packages (langchain-core, langchain-openai,
llama-index-core, haystack-ai, tiktoken), a real index and real servers; nothing of theirs is mocked.

tiktoken's cl100k_base file cannot be downloaded here, so the tests build a real ``tiktoken.Encoding`` from
mergeable ranks (every byte a token, a few merges) and register it under that name, in this process and, through a
``sitecustomize`` on its path, in the server's: the client encodes and the server decodes with one encoding, as
with the real file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
tiktoken = pytest.importorskip("tiktoken")
import httpx  # noqa: E402

from hmde.cli.main import main  # noqa: E402
from serve_helpers import ThreadServer, serve_process  # noqa: E402

DOCS = [
    {"doc_id": "final-deu", "lang": "deu", "text": "Die Mannschaft hat am Sonntag das Finale gewonnen. Die Fans feierten.",
     "section": "sport", "title": "Finale gewonnen", "url": "https://example.org/final-deu", "date": "2024-05-02"},
    {"doc_id": "final-ita", "lang": "ita", "text": "La nostra squadra ha vinto la finale domenica. I tifosi hanno festeggiato.",
     "section": "sport", "title": "Finale vinta", "date": "2024-05-03"},
    {"doc_id": "volcano-eng", "lang": "eng", "text": "The volcano erupted last night. Ash covered the villages.",
     "section": "science", "title": "Volcano", "date": "2023-11-20"},
    {"doc_id": "volcano-fra", "lang": "fra", "text": "Le volcan est entré en éruption hier soir. Les cendres ont couvert les villages.",
     "section": "science", "date": "2023-11-21"},
    {"doc_id": "budget-spa", "lang": "spa", "text": "El gobierno presentó el presupuesto. La oposición lo criticó.",
     "section": "politics", "date": "2024-01-15"},
]
QUERIES = ["who won the final?", "ash from the volcano", "the government's budget"]
ENCODING_SOURCE = textwrap.dedent('''
    import tiktoken, tiktoken.registry
    ranks = {bytes([i]): i for i in range(256)}
    for pair in (b"th", b"he", b"in", b"er", b"an", b" t"):
        ranks[pair] = len(ranks)
    PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    tiktoken.registry.ENCODINGS["cl100k_base"] = tiktoken.Encoding(name="cl100k_base", pat_str=PAT,
                                                                   mergeable_ranks=ranks, special_tokens={})
''')


@pytest.fixture(scope="module")
def encoding_path(tmp_path_factory):
    """A folder whose ``sitecustomize`` registers the encoding in every Python process started with it on its path;
    registered in this process too."""
    from hmde.serve import token_arrays

    folder = tmp_path_factory.mktemp("tiktoken-site")
    token_arrays._failed.pop("cl100k_base", None)  # an earlier test's failed download is not this one's
    (folder / "sitecustomize.py").write_text(ENCODING_SOURCE)
    exec(ENCODING_SOURCE, {})  # noqa: S102 - the test's own source, above
    yield folder
    tiktoken.registry.ENCODINGS.pop("cl100k_base", None)  # the other tests see tiktoken as it was
    token_arrays._loaded.pop("cl100k_base", None)


@pytest.fixture(scope="module")
def news(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("integrations")
    src = folder / "news.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    assert main(["index", "build", "hmde-e5", str(src), "-o", str(folder / "news"), "--no-progress"]) == 0
    return folder / "news"


@pytest.fixture(scope="module")
def server(news):
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served

    with ThreadServer(load_served(None, [str(news)], "cpu"), ServeOptions(api_key="k")) as running:
        yield running


def hmde_search(news, queries, k=10, filter=None):
    from hmde.index.search import Index

    with Index.open(str(news)) as index:
        return [[h.as_dict() for h in hits] for hits in index.search(queries, top_k=k, filter=filter)]


def same(hits: list[dict], expected: list[dict]) -> None:
    assert [h["doc_id"] for h in hits] == [e["doc_id"] for e in expected]
    assert all(abs(h["score"] - e["score"]) <= 1e-5 for h, e in zip(hits, expected))
    assert [[x["text"] for x in h["sentences"]] for h in hits] == [[x["text"] for x in e["sentences"]]
                                                                    for e in expected]
    assert all(abs(x["score"] - y["score"]) <= 1e-5 for h, e in zip(hits, expected)
               for x, y in zip(h["sentences"], e["sentences"]))  # queries embedded alone or three at once
    assert [h["metadata"] for h in hits] == [e["metadata"] for e in expected]


# -- /v1/embeddings and OpenAI's clients ------------------------------------------------------------------
def test_token_arrays_are_decoded_with_the_clients_encoding(server, encoding_path):
    encoding = tiktoken.get_encoding("cl100k_base")
    texts = ["Ein Haus am See", "the house by the lake"]
    url, auth = server.url + "/v1/embeddings", {"Authorization": "Bearer k"}
    as_text = httpx.post(url, json={"model": "hmde-e5", "input": texts}, headers=auth, timeout=60).json()
    as_rows = httpx.post(url, json={"model": "hmde-e5", "input": [encoding.encode(t) for t in texts]}, headers=auth,
                         timeout=60).json()
    one = httpx.post(url, json={"model": "hmde-e5", "input": encoding.encode(texts[0])}, headers=auth,
                     timeout=60).json()
    assert [d["embedding"] for d in as_rows["data"]] == [d["embedding"] for d in as_text["data"]]
    alone = httpx.post(url, json={"model": "hmde-e5", "input": texts[0]}, headers=auth, timeout=60).json()
    assert one["data"][0]["embedding"] == alone["data"][0]["embedding"]  # one array: one text
    bad = httpx.post(url, json={"model": "hmde-e5", "input": [[5, 10**9]]}, headers=auth, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[0]"
    assert "holds the token id 1000000000, outside cl100k_base's 262 tokens" in bad.json()["error"]["message"]


def test_langchains_openai_embeddings_with_every_default_against_hmde_serve(news, encoding_path):
    """LangChain tokenizes with tiktoken (cl100k_base for a model it does not know) and sends token ids."""
    langchain_openai = pytest.importorskip("langchain_openai")
    env = {"PYTHONPATH": os.pathsep.join([str(encoding_path), os.environ.get("PYTHONPATH", "")]),
           "TIKTOKEN_CACHE_DIR": str(encoding_path / "cache")}
    process, url = serve_process([str(news)], env)
    try:
        client = langchain_openai.OpenAIEmbeddings(model="hmde-e5", base_url=url + "/v1", api_key="-")
        assert client.check_embedding_ctx_length  # the default that sent token arrays
        documents = client.embed_documents([d["text"] for d in DOCS[:2]])
        query = client.embed_query(QUERIES[0])
        direct = httpx.post(url + "/v1/embeddings", json={"model": "hmde-e5", "input": [d["text"] for d in DOCS[:2]]
                                                          + [QUERIES[0]]}, timeout=60).json()["data"]
        for got, want in zip(documents + [query], direct):  # the same text reached the model
            assert sum(a * b for a, b in zip(got, want["embedding"])) > 0.9999
    finally:
        process.terminate()
        process.wait(60)


def test_token_arrays_where_the_encoding_cannot_be_loaded_are_a_400_naming_the_client_fix(news, encoding_path,
                                                                                        tmp_path):
    openai = pytest.importorskip("openai")
    langchain_openai = pytest.importorskip("langchain_openai")
    # a server without the encoding (an empty tiktoken cache, no network): the client has it and sends token ids
    process, url = serve_process([str(news)], {"TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")})
    try:
        client = langchain_openai.OpenAIEmbeddings(model="hmde-e5", base_url=url + "/v1", api_key="-",
                                                   max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            client.embed_documents(["Ein Haus am See"])
        message = str(refused.value)
        assert "tiktoken's cl100k_base encoding" in message and "check_embedding_ctx_length=False" in message
        works = langchain_openai.OpenAIEmbeddings(model="hmde-e5", base_url=url + "/v1", api_key="-",
                                                  check_embedding_ctx_length=False)
        assert len(works.embed_documents(["Ein Haus am See"])[0]) == 384
    finally:
        process.terminate()
        process.wait(60)


# -- the retrievers: hmde search's ranking, evidence, metadata and filter ------------------------------------
def langchain_hits(retriever, query, **kwargs) -> list[dict]:
    return [{"doc_id": d.id, "score": d.metadata["score"], "sentences": d.metadata["sentences"],
             "metadata": {k: v for k, v in d.metadata.items() if k not in ("doc_id", "lang", "score", "rank",
                                                                        "sentences")}}
            for d in retriever.invoke(query, **kwargs)]


@pytest.mark.parametrize("where", ["local", "served"])
def test_each_frameworks_retriever_returns_hmde_searchs_ranking(news, server, where):
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    pytest.importorskip("haystack")
    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    place = {"index": str(news)} if where == "local" else {"url": server.url, "index": "news", "api_key": "k"}
    expected = hmde_search(news, QUERIES, k=3)
    filtered = hmde_search(news, QUERIES, k=3, filter='section == "sport" or date >= "2024-01-01"')
    lang_retriever = lc.HmdeRetriever(k=3, **place)
    llama_retriever = li.HmdeRetriever(k=3, **place)
    llama_filtered = li.HmdeRetriever(k=3, filter='section == "sport" or date >= "2024-01-01"', **place)
    hay_retriever = hs.HmdeRetriever(k=3, **place)

    def own(metadata: dict) -> dict:
        return {k: v for k, v in metadata.items() if k not in ("doc_id", "lang", "score", "rank", "sentences")}

    for query, want, want_filtered in zip(QUERIES, expected, filtered):
        same(langchain_hits(lang_retriever, query), want)
        same(langchain_hits(lang_retriever, query, filter='section == "sport" or date >= "2024-01-01"'),
             want_filtered)
        for retriever, target in ((llama_retriever, want), (llama_filtered, want_filtered)):
            nodes = retriever.retrieve(query)
            same([{"doc_id": n.node.id_, "score": n.score, "sentences": n.node.metadata["sentences"],
                   "metadata": own(n.node.metadata)} for n in nodes], target)
        for chosen, target in ((None, want), ('section == "sport" or date >= "2024-01-01"', want_filtered)):
            documents = hay_retriever.run(query, filter=chosen)["documents"]
            same([{"doc_id": d.id, "score": d.score, "sentences": d.meta["sentences"], "metadata": own(d.meta)}
                  for d in documents], target)
            assert all(d.meta["lang"] == next(x["lang"] for x in DOCS if x["doc_id"] == d.id) for d in documents)


def test_the_embedders_take_the_query_path_for_queries_and_the_document_path_for_documents(news, server):
    import numpy as np

    from hmde.index.search import Index
    from hmde.integrations import haystack as hs, langchain as lc, llama_index as li

    with Index.open(str(news)) as index:
        query = index.encode_queries([QUERIES[0]])[0]
    query = query / np.linalg.norm(query)
    documents = [d["embedding"] for d in httpx.post(server.url + "/v1/embeddings", headers={"Authorization":
                 "Bearer k"}, json={"model": "hmde-e5", "input": [DOCS[0]["text"]]}, timeout=60).json()["data"]]
    for got_query, got_documents in (
            (lc.HmdeEmbeddings().embed_query(QUERIES[0]), lc.HmdeEmbeddings().embed_documents([DOCS[0]["text"]])),
            (lc.HmdeEmbeddings(url=server.url, api_key="k").embed_query(QUERIES[0]),
             lc.HmdeEmbeddings(url=server.url, api_key="k").embed_documents([DOCS[0]["text"]])),
            (li.HmdeEmbedding().get_query_embedding(QUERIES[0]),
             li.HmdeEmbedding().get_text_embedding_batch([DOCS[0]["text"]])),
            (hs.HmdeTextEmbedder().run(QUERIES[0])["embedding"],
             [d.embedding for d in hs.HmdeDocumentEmbedder().run([__import__("haystack").Document(
                 content=DOCS[0]["text"])])["documents"]])):
        assert float(np.dot(got_query, query)) > 0.9999
        assert float(np.dot(got_documents[0], documents[0])) > 0.9999
        assert float(np.dot(got_query, got_documents[0])) < 0.999  # two paths, not one


@pytest.mark.parametrize("module, extra, package", [("langchain", "langchain", "langchain_core"),
                                                    ("llama_index", "llamaindex", "llama_index"),
                                                    ("haystack", "haystack", "haystack")])
def test_an_integration_without_its_extra_is_one_line_naming_it(module, extra, package):
    code = (f"import sys; sys.modules[{package!r}] = None\n"
            f"try:\n    import hmde.integrations.{module}\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    assert out.startswith(f"hmde's {extra} integration needs") and f"pip install 'hmde[{extra}]'" in out, out


@pytest.mark.parametrize("framework", ["LangChain", "LlamaIndex", "Haystack"])
def test_the_docs_example_for_each_framework_runs(framework, tmp_path):
    doc = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"
    section = doc.read_text(encoding="utf-8").split(f"## {framework}\n", 1)[1].split("\n## ", 1)[0]
    (code,) = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    expected = {"LangChain": ["['final-deu']", "Éruption", "\n1\n"],
                "LlamaIndex": ["['volcano-fra']", "['final-deu']"],
                "Haystack": ["[('final-deu'"]}[framework]
    assert all(line in out for line in expected), out
