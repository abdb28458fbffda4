"""The smoke tier (``python -m pytest -m smoke``, under 3 minutes on 2 cores): the README's commands and the
server's routes once each, end to end on a tiny model built here (the demo on the bundled model), so that a
contributor hears in minutes whether something basic broke. Every behaviour is checked in depth by the full suite;
these tests only assert what a first run of each command would show a user."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hmde.cli.main import main

pytestmark = pytest.mark.smoke

# sentences of the tiny models' own vocabulary (tests/conftest.py's CORPUS): their words are no unknown tokens
DOCS = [{"doc_id": "final-eng", "lang": "eng", "section": "sport",
         "text": "The football team won the championship after a dramatic final match. It was a sunny day."},
        {"doc_id": "cat-deu", "lang": "deu", "section": "sport", "text": "Die Katze saß auf der Matte. Es war ein "
         "sonniger Tag."},
        {"doc_id": "frog-eng", "lang": "eng", "section": "science",
         "text": "Researchers discovered a new species of frog in the rainforest."},
        {"doc_id": "growth-eng", "lang": "eng", "section": "politics",
         "text": "Economic growth slowed in the third quarter as exports fell sharply."}]
QUERY = "Researchers discovered a new species of frog in the rainforest."
IDS = {d["doc_id"] for d in DOCS}


def jsonl(path: Path, docs=DOCS) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory, hmde_dir) -> Path:
    folder = tmp_path_factory.mktemp("smoke")
    assert main(["index", "build", str(hmde_dir), str(jsonl(folder / "docs.jsonl")), "-o", str(folder / "idx"),
                 "--no-progress"]) == 0
    return folder


def test_the_demo_the_readmes_first_command_runs(capsys):
    assert main(["demo"]) == 0
    assert "query" in capsys.readouterr().out


def test_every_command_answers_help(capsys):
    from hmde.cli.main import COMMANDS

    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0 and "usage: hmde" in capsys.readouterr().out


def test_encode_writes_vectors_and_ids(built, hmde_dir, tmp_path):
    assert main(["encode", str(hmde_dir), str(built / "docs.jsonl"), "-o", str(tmp_path / "v.npy"),
                 "--no-progress"]) == 0
    assert np.load(tmp_path / "v.npy").shape[0] == 4
    assert (tmp_path / "v.ids.txt").read_text().split() == [d["doc_id"] for d in DOCS]


def test_search_filter_and_every_index_write(built, hmde_dir, tmp_path, capsys):
    import shutil

    idx = tmp_path / "idx"
    shutil.copytree(built / "idx", idx)
    capsys.readouterr()
    assert main(["search", str(idx), QUERY, "--json", "--top-k", "1"]) == 0  # a random model: what ranks first is
    assert json.loads(capsys.readouterr().out)["doc_id"] in IDS  # noise; the ranking itself is the full suite's
    assert main(["search", str(idx), "who won?", "--json", "--filter", 'section == "sport"']) == 0
    assert {json.loads(x)["doc_id"] for x in capsys.readouterr().out.splitlines()} == {"final-eng", "cat-deu"}
    new = jsonl(tmp_path / "new.jsonl", [{"doc_id": "cat-fra", "lang": "fra", "text": "Le chat était assis sur le "
                                                                                       "tapis."}])
    assert main(["index", "add", str(idx), str(new), "--no-progress"]) == 0
    assert main(["index", "upsert", str(idx), str(new), "--no-progress"]) == 0
    assert main(["index", "delete", str(idx), "growth-eng"]) == 0
    assert main(["index", "compact", str(idx)]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(idx), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 4


def test_align_documents_then_sentences_in_every_format(hmde_dir, tmp_path):
    en = jsonl(tmp_path / "en.jsonl", [{"doc_id": "a", "lang": "eng", "text": "The cat sleeps. It rains."}])
    de = jsonl(tmp_path / "de.jsonl", [{"doc_id": "x", "lang": "deu", "text": "Die Katze schläft. Es regnet."}])
    assert main(["align", str(hmde_dir), str(en), str(de), "-o", str(tmp_path / "pairs.tsv"), "--sentences",
                 str(tmp_path / "beads.jsonl"), "--no-progress"]) == 0
    assert (tmp_path / "pairs.tsv").read_text().splitlines()[1].split("\t")[:2] == ["a", "x"]
    src, tgt = tmp_path / "en.txt", tmp_path / "de.txt"
    src.write_text("The cat sleeps.\nIt rains.\n")
    tgt.write_text("Die Katze schläft.\nEs regnet.\n")
    for fmt, out in (("jsonl", "b.jsonl"), ("tsv", "b.tsv"), ("moses", "corpus"), ("tmx", "b.tmx")):
        assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / out), "--format",
                     fmt, "--src-lang", "eng", "--tgt-lang", "deu", "--no-progress"]) == 0
    assert (tmp_path / "corpus.en").is_file() and (tmp_path / "corpus.de").is_file()


def test_classify_trains_in_one_language_and_predicts_in_another(hmde_dir, tmp_path, capsys):
    labelled = jsonl(tmp_path / "l.jsonl", [{**d, "label": d["section"]} for d in DOCS])
    assert main(["classify", "train", str(hmde_dir), str(labelled), "-o", str(tmp_path / "clf")]) == 0
    assert main(["classify", "predict", str(tmp_path / "clf"), str(labelled), "-o", str(tmp_path / "p.jsonl")]) == 0
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 4


def test_every_route_of_the_server(built, hmde_dir):
    pytest.importorskip("fastapi")
    import httpx

    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    with ThreadServer(load_served(str(hmde_dir), [str(built / "idx")], "cpu"), ServeOptions(writable=True)) as s:
        assert httpx.get(s.url + "/health").json()["status"] == "ok"
        hits = httpx.post(s.url + "/search", json={"query": QUERY, "top_k": 1}).json()
        assert hits["results"][0]["hits"][0]["doc_id"] in IDS
        embedded = httpx.post(s.url + "/v1/embeddings", json={"model": "hmde", "input": ["Ein Haus am See"]}).json()
        assert len(embedded["data"][0]["embedding"]) > 0
        assert httpx.post(s.url + "/embed", json={"input": ["x"], "kind": "query"}).json()["vectors"]
        assert httpx.get(s.url + "/indexes").json()["indexes"][0]["documents"] == 4
        route = s.url + "/indexes/idx/documents"
        assert httpx.post(route, json={"documents": [{"doc_id": "n", "text": "Neu."}]}, timeout=60).status_code == 200
        assert httpx.post(route + "/metadata", json={"metadata": {"seen": True}, "ids": ["n"]}).json()["updated"] == 1
        found = httpx.post(route + "/query", json={"filter": "seen == true"}).json()["documents"]
        assert [d["doc_id"] for d in found] == ["n"]
        assert httpx.request("DELETE", route, json={"ids": ["n"]}).json()["deleted"] == 1
        assert "hmde_requests_total" in httpx.get(s.url + "/metrics").text
        assert httpx.get(s.url + "/").status_code == 200


def test_each_frameworks_store_ingests_filters_and_searches(hmde_dir, tmp_path):
    from hmde.integrations.haystack import HmdeDocumentStore, HmdeRetriever
    from hmde.integrations.langchain import HmdeVectorStore as LangChainStore
    from hmde.integrations.llama_index import HmdeVectorStore as LlamaStore
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core.schema import TextNode

    texts = {d["doc_id"]: d["text"] for d in DOCS}
    langchain = LangChainStore(index=str(tmp_path / "lc"), model=str(hmde_dir))
    langchain.add_documents([LangChainDocument(page_content=t, metadata={"k": k}) for k, t in texts.items()],
                            ids=list(texts))
    assert {d.id for d in langchain.similarity_search(QUERY, k=4, filter={"k": {"$ne": "cat-deu"}})} == \
        IDS - {"cat-deu"}
    haystack = HmdeDocumentStore(index=str(tmp_path / "hs"), model=str(hmde_dir))
    haystack.write_documents([HaystackDocument(id=k, content=t, meta={"k": k}) for k, t in texts.items()])
    found = HmdeRetriever(document_store=haystack).run(QUERY, top_k=1, filters={"field": "meta.k", "operator": "!=",
                                                                                 "value": "x"})
    assert found["documents"][0].id in IDS
    llama = LlamaStore(index=str(tmp_path / "li"), model=str(hmde_dir))
    llama.add([TextNode(id_=k, text=t, metadata={"k": k}) for k, t in texts.items()])
    assert len(llama.get_nodes()) == 4
    for store in (langchain.client, haystack.client, llama.client):
        store.close()


def test_an_index_in_milvus(hmde_dir, tmp_path, capsys):
    pytest.importorskip("milvus_lite")
    assert main(["index", "build", str(hmde_dir), str(jsonl(tmp_path / "d.jsonl")), "-o", str(tmp_path / "idx"),
                 "--store", f"milvus:{tmp_path / 'milvus.db'}", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["search", str(tmp_path / "idx"), QUERY, "--json", "--top-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["doc_id"] in IDS
