"""`hmde serve` over HTTP: a real uvicorn server on a free localhost port, the OpenAI SDK against
/v1/embeddings, vectors equal to `hmde encode`'s, hits equal to `hmde search`'s, every refusal a 4xx
JSON naming its field, batching across requests, the API key, hot reload and a drained SIGTERM."""

from __future__ import annotations

import json
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import httpx  # noqa: E402

from conftest import CORPUS  # noqa: E402
from hmde.cli.main import main  # noqa: E402
from serve_helpers import ThreadServer, serve_process  # noqa: E402

LANGS = ["eng", "eng", "deu", "fra", "spa", "jpn", "zho", "ara", "rus", "eng", "eng", "eng"]
TEXTS = CORPUS[:12]  # twelve texts in nine languages (the corpus repeats after them)


def write_docs(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def collection(tmp_path_factory, hmde_dir):
    root = tmp_path_factory.mktemp("serve")
    docs = write_docs(root / "docs.jsonl", [{"doc_id": f"d{i}", "text": t, "lang": lang}
                                            for i, (t, lang) in enumerate(zip(TEXTS, LANGS))])
    index = root / "news"
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(index), "--no-progress"]) == 0
    return root, docs, index


@pytest.fixture(scope="module")
def server(collection, hmde_dir):
    from hmde.serve.served import load_served

    _, _, index = collection
    served = load_served(str(hmde_dir), [str(index)], "cpu")
    with ThreadServer(served) as running:
        yield running


def post(server, path, body, **kw):
    return httpx.post(server.url + path, json=body, timeout=60, **kw)


def refusal(response, status, field):
    assert response.status_code == status, response.text
    err = response.json()["error"]
    assert err["param"] == field and err["code"] == status and err["message"]
    assert "Traceback" not in response.text
    return err["message"]


def encoded(tmp_path, hmde_dir, docs, *flags):
    out = tmp_path / "v.npy"
    assert main(["encode", str(hmde_dir), str(docs), "-o", str(out), "--no-progress", "--device", "cpu", *flags]) == 0
    return np.load(out)


def test_openai_sdk_gets_the_vectors_of_hmde_encode(server, collection, hmde_dir, tmp_path):
    from openai import OpenAI

    _, docs, _ = collection
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    reply = client.embeddings.create(model=str(hmde_dir), input=TEXTS)  # the SDK asks for base64 and decodes it
    got = np.array([d.embedding for d in reply.data], dtype=np.float32)
    want = encoded(tmp_path, hmde_dir, docs, "--normalize")
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert [d.index for d in reply.data] == list(range(len(TEXTS))) and reply.usage.total_tokens > len(TEXTS)
    queries = client.embeddings.create(model=str(hmde_dir), input=TEXTS[:3], extra_body={"input_type": "query"})
    q = np.array([d.embedding for d in queries.data], dtype=np.float32)
    (tmp_path / "q.txt").write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf-8")
    np.testing.assert_allclose(q, encoded(tmp_path, hmde_dir, tmp_path / "q.txt", "--queries", "--normalize"),
                               atol=2e-5)


def test_embeddings_wire_format_field_by_field(server, hmde_dir):
    reply = post(server, "/v1/embeddings", {"input": "one text", "model": "hmde", "encoding_format": "float",
                                            "user": "someone"})
    assert reply.status_code == 200
    body = reply.json()
    assert set(body) == {"object", "data", "model", "usage"} and body["object"] == "list"
    assert body["model"] == str(hmde_dir)
    (item,) = body["data"]
    assert set(item) == {"object", "index", "embedding"} and item["object"] == "embedding" and item["index"] == 0
    assert len(item["embedding"]) == 64 and abs(np.linalg.norm(item["embedding"]) - 1) < 1e-5
    assert set(body["usage"]) == {"prompt_tokens", "total_tokens"}
    b64 = post(server, "/v1/embeddings", {"input": ["one text"], "model": "hmde", "encoding_format": "base64"}).json()
    import base64

    decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, item["embedding"], atol=1e-7)


def test_embed_takes_hmde_options(server, collection, hmde_dir, tmp_path):
    _, docs, _ = collection
    reply = post(server, "/embed", {"input": TEXTS, "method": "mean"})
    assert reply.status_code == 200 and reply.json()["method"] == "mean" and not reply.json()["normalized"]
    np.testing.assert_allclose(np.array(reply.json()["vectors"], np.float32),
                               encoded(tmp_path, hmde_dir, docs, "--method", "mean"), atol=2e-5)
    query = post(server, "/embed", {"input": ["a cat"], "kind": "query", "normalize": True}).json()
    assert query["method"] is None and abs(np.linalg.norm(query["vectors"][0]) - 1) < 1e-5


def test_search_returns_the_hits_of_hmde_search(server, collection, capsys):
    _, _, index = collection
    reply = post(server, "/search", {"query": "a cat on a mat", "top_k": 3})
    assert reply.status_code == 200
    body = reply.json()
    assert body["index"] == "news" and body["results"][0]["query"] == "a cat on a mat"
    hits = body["results"][0]["hits"]
    capsys.readouterr()
    assert main(["search", str(index), "a cat on a mat", "--top-k", "3", "--json", "--device", "cpu"]) == 0
    cli = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [h["doc_id"] for h in hits] == [h["doc_id"] for h in cli]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in cli], abs=2e-4)
    assert hits[0]["sentences"] and hits[0]["sentences"][0]["text"] in hits[0]["text"]
    assert hits[0]["lang"] == LANGS[int(hits[0]["doc_id"][1:])]
    two = post(server, "/search", {"index": "news", "queries": ["a cat", "economic growth"], "top_k": 2,
                                   "include_text": False}).json()
    assert [r["query"] for r in two["results"]] == ["a cat", "economic growth"]
    assert all("text" not in h for r in two["results"] for h in r["hits"])
    only_deu = post(server, "/search", {"query": "a cat", "lang": "deu"}).json()["results"][0]["hits"]
    assert [h["lang"] for h in only_deu] == ["deu"]
    # the queries' language as hmde search takes it (the index calibrates by it: nine languages)
    scores = {}
    for lang in ("en", "none"):
        served = post(server, "/search", {"query": "a cat on a mat", "top_k": 12, "query_lang": lang}).json()
        assert main(["search", str(index), "a cat on a mat", "--top-k", "12", "--json", "--device", "cpu",
                     "--query-lang", lang]) == 0
        cli = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        served = {h["doc_id"]: h["score"] for h in served["results"][0]["hits"]}
        assert served == pytest.approx({h["doc_id"]: h["score"] for h in cli}, abs=2e-4)
        scores[lang] = served
    # English documents lower by the same amount (this server embeds queries batched: the same to 2e-4)
    drop = {d: scores["none"][d] - scores["en"][d] for d in scores["en"]}
    assert {d for d, x in drop.items() if x > 1e-4} == {f"d{i}" for i, lang in enumerate(LANGS) if lang == "eng"}


@pytest.mark.parametrize("path, body, status, field", [
    ("/v1/embeddings", {"input": "x", "model": "hmde", "dimensions": 8}, 400, "dimensions"),
    ("/v1/embeddings", {"input": "x", "model": "text-embedding-3-small"}, 404, "model"),
    ("/v1/embeddings", {"input": [1.5, 2, 3], "model": "hmde"}, 400, "input"),  # token ids are whole numbers
    ("/v1/embeddings", {"input": [], "model": "hmde"}, 400, "input"),
    ("/v1/embeddings", {"input": ["ok", "  "], "model": "hmde"}, 400, "input[1]"),
    ("/v1/embeddings", {"model": "hmde"}, 400, "input"),
    ("/v1/embeddings", {"input": "x", "model": "hmde", "encoding_format": "int8"}, 400, "encoding_format"),
    ("/v1/embeddings", {"input": ["x"] * 2049, "model": "hmde"}, 413, "input"),
    ("/v1/embeddings", {"input": "x" * 100_001, "model": "hmde"}, 413, "input"),
    ("/embed", {"input": "x", "method": "lawdr"}, 400, "method"),
    ("/embed", {"input": "x", "method": "nonsense"}, 400, "method"),
    ("/embed", {"input": "x", "kind": "query", "method": "mean"}, 400, "method"),
    ("/embed", {"input": "x", "knd": "query"}, 400, "knd"),
    ("/search", {"query": "x", "top_k": 0}, 400, "top_k"),
    ("/search", {"query": "x", "top_k": 5000}, 400, "top_k"),
    ("/search", {"query": "x", "index": "../news"}, 404, "index"),
    ("/search", {"query": "x", "hybrid": True}, 400, "hybrid"),
    ("/search", {"top_k": 3}, 400, "query"),
    ("/search", {"query": "x", "queries": ["y"]}, 400, "query"),
    ("/search", {"queries": ["fine", ""]}, 400, "queries[1]"),
    ("/search", {"query": 3}, 400, "query"),
    ("/search", {"query": "x", "query_lang": "!!"}, 400, "query_lang"),
    ("/search", {"query": "x", "query_lang": 3}, 400, "query_lang"),
])
def test_a_bad_request_is_a_json_4xx_naming_its_field(server, path, body, status, field):
    refusal(post(server, path, body), status, field)


def test_malformed_and_oversized_bodies(server):
    bad = httpx.post(server.url + "/search", content=b'{"query": ', headers={"Content-Type": "application/json"})
    refusal(bad, 400, "body")
    huge = httpx.post(server.url + "/search", content=b"x" * (5 * 1024 * 1024),
                      headers={"Content-Type": "application/json"})
    refusal(huge, 413, "body")
    assert httpx.get(server.url + "/nowhere").status_code == 404

    def chunks(data: bytes, size: int = 65536):  # a body sent chunked: no Content-Length to refuse it by
        for i in range(0, len(data), size):
            yield data[i:i + size]

    chunked = httpx.post(server.url + "/search", content=chunks(b"x" * (5 * 1024 * 1024)),
                         headers={"Content-Type": "application/json"})
    assert "content-length" not in {k.lower() for k in chunked.request.headers}
    refusal(chunked, 413, "body")
    small = httpx.post(server.url + "/search", content=chunks(json.dumps({"query": "a cat"}).encode(), 4),
                       headers={"Content-Type": "application/json"})
    assert small.status_code == 200 and small.json()["results"][0]["hits"]


def test_health_indexes_and_prometheus_metrics(server):
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["indexes"] == ["news"] and health["dim"] == 64
    (described,) = httpx.get(server.url + "/indexes").json()["indexes"]
    assert described["name"] == "news" and described["documents"] == len(TEXTS) and described["multi_vector"]
    post(server, "/search", {"query": "a cat"})
    metrics = httpx.get(server.url + "/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'hmde_requests_total{route="/search",status="200"}' in text
    assert 'hmde_request_seconds_bucket{le="0.05",route="/search"}' in text
    assert "hmde_batch_texts_bucket" in text and "hmde_queued_texts" in text


def test_concurrent_requests_share_model_batches(collection, hmde_dir):
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served

    served = load_served(str(hmde_dir), [], "cpu")
    calls = []
    encode = served.model.encode
    served.model.encode = lambda key, texts, langs: calls.append(len(texts)) or encode(key, texts, langs)
    with ThreadServer(served, ServeOptions(max_wait_ms=200, max_batch=64)) as running:
        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(lambda t: post(running, "/v1/embeddings", {"input": t, "model": "hmde"}),
                                    TEXTS * 2))
    assert all(r.status_code == 200 for r in replies)
    assert sum(calls) == 24 and len(calls) < 24 and max(calls) > 1  # 24 requests, fewer model calls
    alone = np.array([r.json()["data"][0]["embedding"] for r in replies[:12]])
    served2 = load_served(str(hmde_dir), [], "cpu")
    direct = served2.model.encode(served2.model.document_method, TEXTS, [None] * 12)
    np.testing.assert_allclose(alone, direct / np.linalg.norm(direct, axis=1, keepdims=True), atol=2e-5)


def test_a_full_queue_answers_503_with_retry_after(hmde_dir):
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served

    served = load_served(str(hmde_dir), [], "cpu")
    release, entered = threading.Event(), threading.Event()
    encode = served.model.encode

    def held(key, texts, langs):  # the model busy until the test lets it go
        entered.set()
        release.wait(30)
        return encode(key, texts, langs)

    served.model.encode = held
    with ThreadServer(served, ServeOptions(max_queue=2, max_wait_ms=0)) as running:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(post, running, "/v1/embeddings", {"input": ["a", "b"], "model": "hmde"})
            assert entered.wait(30)
            busy = post(running, "/v1/embeddings", {"input": "c", "model": "hmde"})
            release.set()
            assert first.result().status_code == 200
    refusal(busy, 503, None)
    assert busy.headers["retry-after"] == "1"


def test_api_key_guards_every_route_but_health(collection, hmde_dir):
    _, _, index = collection
    process, url = serve_process([str(index), "--model", str(hmde_dir), "--device", "cpu"],
                                 env={"HMDE_API_KEY": "s3cret"})
    try:
        assert httpx.get(url + "/health").status_code == 200
        assert httpx.get(url + "/").status_code == 200  # the page's HTML; it asks for the key
        for path, body in (("/search", {"query": "cat"}), ("/v1/embeddings", {"input": "x", "model": "hmde"})):
            refusal(httpx.post(url + path, json=body), 401, "Authorization")
            refusal(httpx.post(url + path, json=body, headers={"Authorization": "Bearer wrong"}), 401, "Authorization")
        refusal(httpx.get(url + "/metrics"), 401, "Authorization")
        ok = httpx.post(url + "/search", json={"query": "cat"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["results"][0]["hits"]
    finally:
        process.kill()
        process.wait()


def test_sigterm_drains_requests_in_flight_and_exits_0(hmde_dir):
    process, url = serve_process(["--model", str(hmde_dir), "--device", "cpu", "--max-batch", "4096"])
    texts = [" ".join(TEXTS)] * 600  # long enough that the signal comes while the model works
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, url + "/embed", json={"input": texts}, timeout=120)
        for _ in range(200):  # until the request is with the model
            if httpx.get(url + "/health").json()["queued_texts"]:
                break
            threading.Event().wait(0.02)
        process.send_signal(signal.SIGTERM)
        reply = pending.result()
    assert reply.status_code == 200 and len(reply.json()["vectors"]) == 600
    assert process.wait(60) == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=2)


def test_an_index_grown_while_served_is_searched_without_restart(tmp_path, hmde_dir):
    from hmde.serve.served import load_served

    first = write_docs(tmp_path / "a.jsonl", [{"doc_id": "a", "text": TEXTS[0], "lang": "eng"},
                                               {"doc_id": "b", "text": TEXTS[9], "lang": "eng"}])
    index = tmp_path / "growing"
    assert main(["index", "build", str(hmde_dir), str(first), "-o", str(index), "--no-progress"]) == 0
    with ThreadServer(load_served(None, [str(index)], "cpu")) as running:
        before = post(running, "/search", {"query": TEXTS[11], "top_k": 10}).json()["results"][0]["hits"]
        assert {h["doc_id"] for h in before} == {"a", "b"}
        more = write_docs(tmp_path / "b.jsonl", [{"doc_id": "frog", "text": TEXTS[11], "lang": "eng"}])
        assert main(["index", "build", str(more), "-o", str(index), "--add", "--no-progress"]) == 0
        after = post(running, "/search", {"query": TEXTS[11], "top_k": 10}).json()["results"][0]["hits"]
        assert {h["doc_id"] for h in after} == {"a", "b", "frog"}
        assert httpx.get(running.url + "/indexes").json()["indexes"][0]["documents"] == 3


def test_serve_refuses_what_it_cannot_serve_before_binding(tmp_path, collection, hmde_dir, labse_dir, capsys):
    _, _, index = collection
    assert main(["serve", str(tmp_path)]) == 2
    assert "not an hmde index" in capsys.readouterr().err
    twin = tmp_path / "other" / "news"
    twin.parent.mkdir()
    import shutil

    shutil.copytree(index, twin)
    assert main(["serve", str(index), str(twin), "--model", str(hmde_dir), "--device", "cpu"]) == 2
    assert "two served indexes are named 'news'" in capsys.readouterr().err
    assert main(["serve", str(index), "--model", str(labse_dir), "--device", "cpu"]) == 2
    assert "built with" in capsys.readouterr().err
    assert main(["serve", "--model", "hmde-auto"]) == 2
    assert "one model" in capsys.readouterr().err


def _exchange(sock, request: bytes) -> bytes:
    """One HTTP/1.1 request on ``sock`` and its whole response (Content-Length bodies); b"" once the server closed."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_an_unexpected_error_is_a_500_json_and_the_connection_stays_open(hmde_dir, caplog):
    """A fault inside a route (here the model raising a SystemError once) is a 500 JSON naming its kind, with the
    traceback in the server's log, never the client's; and the client's keep-alive connection still serves its next
    request (Starlette's outermost handler re-raised, so uvicorn closed the connection: a client that had already
    sent its next request on it got 'connection reset by peer')."""
    import socket

    from hmde.serve.served import load_served

    served = load_served(str(hmde_dir), [], "cpu")
    encode, calls = served.model.encode, []

    def failing_once(key, texts, langs):
        calls.append(texts)
        if len(calls) == 1:
            raise SystemError("error return without exception set")
        return encode(key, texts, langs)

    served.model.encode = failing_once
    body = json.dumps({"input": "a", "model": "hmde"}).encode()
    request = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with ThreadServer(served) as running, socket.create_connection(("127.0.0.1", running.port), timeout=60) as sock:
        first = _exchange(sock, request)
        second = _exchange(sock, request)  # the same connection
        third = _exchange(sock, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 500"), first[:200]
    error = json.loads(first.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == 500 and "SystemError" in error["message"] and b"Traceback" not in first
    assert second.startswith(b"HTTP/1.1 200"), second[:200]
    assert len(json.loads(second.partition(b"\r\n\r\n")[2])["data"][0]["embedding"]) == served.model.dim
    assert third.startswith(b"HTTP/1.1 200"), third[:200]
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "/v1/embeddings" in logged and "SystemError" in logged
