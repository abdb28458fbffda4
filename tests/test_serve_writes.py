"""The server's write routes (issue 53): POST and DELETE /indexes/{name}/documents, GET /indexes/{name}, on a
real uvicorn server. Writes are refused unless --writable, need the key like every route, answer every refusal
with a 4xx JSON naming the field, never take a path from the client, and commit what `hmde index upsert` would."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import httpx  # noqa: E402

from hmde.cli.main import main  # noqa: E402
from hit_lists import assert_same_hits  # noqa: E402
from serve_helpers import ThreadServer, serve_process  # noqa: E402
from test_serve import LANGS, TEXTS, refusal, write_docs  # noqa: E402

KEY = "s3cret"


@pytest.fixture()
def news(tmp_path, hmde_dir):
    docs = write_docs(tmp_path / "docs.jsonl", [{"doc_id": f"d{i}", "text": t, "lang": lang}
                                                for i, (t, lang) in enumerate(zip(TEXTS, LANGS))])
    index = tmp_path / "news"
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(index), "--no-progress", "--bm25"]) == 0
    return index


def load(hmde_dir, index):
    from hmde.serve.served import load_served

    return load_served(str(hmde_dir), [str(index)], "cpu")


def test_writes_are_refused_without_writable_and_info_shows_no_path(news, hmde_dir):
    from hmde.serve.options import ServeOptions

    with ThreadServer(load(hmde_dir, news), ServeOptions()) as running:
        r = httpx.post(running.url + "/indexes/news/documents", json={"documents": [{"doc_id": "x", "text": "y"}]})
        refusal(r, 403, None)
        assert "--writable" in r.json()["error"]["message"]
        refusal(httpx.request("DELETE", running.url + "/indexes/news/documents", json={"ids": ["d1"]}), 403, None)
        info = httpx.get(running.url + "/indexes/news").json()
        assert info["name"] == "news" and info["documents"] == 12 and info["deleted_documents"] == 0
        assert "path" not in info and str(news) not in json.dumps(info)
        assert info["languages"]["eng"] == 5
        listed = httpx.get(running.url + "/indexes").json()["indexes"][0]
        assert listed["languages"] == info["languages"]


def test_writable_upserts_and_deletes_equal_the_command_line_and_refusals_name_their_field(news, hmde_dir, tmp_path):
    from hmde.index.search import Index
    from hmde.serve.options import ServeOptions

    cli_copy = tmp_path / "cli"
    import shutil

    shutil.copytree(news, cli_copy)
    changed = [{"doc_id": "d2", "text": "Ein ganz neuer Text über Flüsse und Brücken.", "lang": "deu"},
               {"doc_id": "n1", "text": ["A new page.", "It is about rivers."], "lang": "eng"}]
    auth = {"Authorization": f"Bearer {KEY}"}
    with ThreadServer(load(hmde_dir, news), ServeOptions(api_key=KEY, writable=True, max_inputs=4)) as running:
        url = running.url
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": changed}), 401, "Authorization")
        r = httpx.post(url + "/indexes/news/documents", json={"documents": changed}, headers=auth, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json() == {"index": "news", "mode": "upsert", "documents": 2, "replaced": 1, "live": 13}
        r = httpx.request("DELETE", url + "/indexes/news/documents", json={"ids": ["d5", "d7"]}, headers=auth)
        assert r.json() == {"index": "news", "deleted": 2, "missing": 0}
        hits = [result for queries in (TEXTS[:4], TEXTS[4:6] + ["rivers"]) for result in httpx.post(
            url + "/search", json={"queries": queries, "top_k": 13}, headers=auth, timeout=60).json()["results"]]
        for result in hits:
            ids = [h["doc_id"] for h in result["hits"]]
            assert "d5" not in ids and "d7" not in ids and len(ids) == 11
        d2 = next(h for h in hits[0]["hits"] if h["doc_id"] == "d2")
        assert d2["text"] == changed[0]["text"]  # the replaced version only
        # refusals: each a 4xx naming its field
        refusal(httpx.request("DELETE", url + "/indexes/news/documents", json={"ids": ["d1", "nope"]}, headers=auth),
                404, "ids")
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": [changed[0], {"doc_id": "z"}]},
                           headers=auth), 400, "documents[1].text")
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": [{"doc_id": "z", "text": "t",
                                                                                "lang": "!!"}]}, headers=auth),
                400, "documents[0].lang")
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": [changed[0]] * 5}, headers=auth),
                413, "documents")
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": [changed[0]], "mode": "add"},
                           headers=auth), 409, "documents")
        refusal(httpx.post(url + "/indexes/news/documents", json={"documents": [changed[0]], "path": "/tmp/x"},
                           headers=auth), 400, "path")
        for name in ("nope", "..%2Fnews", "%2Ftmp%2Fnews"):  # an index is a served name, never a path
            r = httpx.post(url + f"/indexes/{name}/documents", json={"documents": changed}, headers=auth)
            assert r.status_code == 404 and "Traceback" not in r.text
        info = httpx.get(url + "/indexes/news", headers=auth).json()
        assert (info["documents"], info["deleted_documents"]) == (11, 3)
    # the command line's write of the same documents gives the same index
    write_docs(tmp_path / "changed.jsonl", changed)
    assert main(["index", "upsert", str(cli_copy), str(tmp_path / "changed.jsonl"), "--no-progress"]) == 0
    assert main(["index", "delete", str(cli_copy), "d5", "d7"]) == 0
    with Index.open(str(news), model=str(hmde_dir)) as served_index, \
            Index.open(str(cli_copy), model=str(hmde_dir)) as cli_index:
        a = [[(h.doc_id, h.score) for h in q] for q in served_index.search(TEXTS[:6], top_k=11)]
        b = [[(h.doc_id, h.score) for h in q] for q in cli_index.search(TEXTS[:6], top_k=11)]
        assert_same_hits(a, b)


def test_fifty_writes_while_sixteen_clients_search(news, hmde_dir):
    """A real `hmde serve --writable`: 50 upserts and deletes while 16 clients search. No 5xx, and no answer to a
    search that started after a delete's 200 names the deleted id."""
    process, url = serve_process([str(news), "--model", str(hmde_dir), "--writable", "--device", "cpu"])
    deleted_at: dict[str, float] = {}  # doc id -> when its delete was answered
    answers, statuses, failures, stop = [], [], [], threading.Event()

    def searcher(k: int):
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    r = client.post(url + "/search", json={"query": TEXTS[k % len(TEXTS)], "top_k": 30})
                except httpx.TransportError as exc:  # kept with the server's log and state, said below
                    failures.append((k, round(started - began, 2), round(time.monotonic() - started, 2), repr(exc)))
                    return
                statuses.append(r.status_code)
                if r.status_code == 200:
                    answers.append((started, [h["doc_id"] for h in r.json()["results"][0]["hits"]]))

    def write(client, step: int):  # even steps add w{step}, odd steps delete the one just added
        if step % 2 == 0:
            return client.post(url + "/indexes/news/documents", json={"documents": [
                {"doc_id": f"w{step}", "text": f"Written at step {step}. " + TEXTS[step % 12],
                 "lang": LANGS[step % 12]}]})
        return client.request("DELETE", url + "/indexes/news/documents", json={"ids": [f"w{step - 1}"]})

    refused, began, exit_code = None, time.monotonic(), None  # refused: the first write not answered 200
    try:
        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(searcher, k) for k in range(16)]
            try:
                with httpx.Client(timeout=60) as client:
                    for step in range(50):
                        try:
                            r = write(client, step)
                        except httpx.TransportError as exc:
                            refused = (step, round(time.monotonic() - began, 2), repr(exc))
                            break
                        if step % 2 == 1 and r.status_code == 200:
                            deleted_at[f"w{step - 1}"] = time.monotonic()
                        statuses.append(r.status_code)
                        if r.status_code != 200:
                            refused = (step, r.status_code, r.text)
                            break
            finally:
                stop.set()  # the searchers end whatever happened here (else the pool's exit waits on them forever)
            for f in futures:
                f.result()
    finally:
        stop.set()
        exit_code = process.poll()  # None: the server still runs
        process.terminate()
        log = process.communicate(timeout=60)[0] or ""
    assert refused is None, (refused, exit_code, log[-4000:])  # the server's log says why
    assert failures == [], (failures, exit_code, log[-4000:])
    assert len(answers) > 50 and all(s < 500 for s in statuses), (sorted(set(statuses)), log[-4000:])
    late = [(doc, ids) for started, ids in answers for doc, when in deleted_at.items() if started > when and doc in ids]
    assert late == []
    assert len(deleted_at) == 25
