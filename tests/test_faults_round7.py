"""Faults of issue 77 (round 7 of the fault pass, and what a new user tripped over): each case as the tester ran
it, failing on the code before the fix. The Milvus commits and the filters are in the store contract
(tests/store_contract.py, both stores) and tests/test_milvus_store.py; docs/faults.md has a row per case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import cli_files
from cli_files import last_error
from hmde.cli.main import main

DOCS = [{"doc_id": "a", "lang": "eng", "text": "The cat sat on the mat. It was warm.", "year": 2019},
        {"doc_id": "b", "lang": "deu", "text": "Die Katze schläft. Es regnet.", "year": 2020},
        {"doc_id": "c", "lang": "eng", "text": "Economic growth slowed. Exports fell.", "year": 2021}]


def write_jsonl(path: Path, docs=DOCS) -> Path:
    return cli_files.write_jsonl(path, docs)


@pytest.fixture(scope="module")
def news(tmp_path_factory, hmde_dir) -> Path:
    folder = tmp_path_factory.mktemp("round7")
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(folder / "d.jsonl")), "-o", str(folder / "news"),
                 "--no-progress"]) == 0
    return folder / "news"


# -- 5, 6: the server answers bad text and unassigned token ids with a 4xx naming the field ---------------------
def test_a_lone_surrogate_or_an_unassigned_token_id_is_a_4xx_naming_the_field(news, hmde_dir):
    pytest.importorskip("fastapi")
    tiktoken = pytest.importorskip("tiktoken")
    import httpx

    from hmde.serve import token_arrays
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    # an encoding with a hole inside its range, as cl100k_base has (100256, 100261-100275: no token)
    ranks = {bytes([i]): i for i in range(256)}
    holed = tiktoken.Encoding(name="cl100k_base", pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                              special_tokens={"<|end|>": 300})
    token_arrays._loaded["cl100k_base"] = holed
    try:
        with ThreadServer(load_served(str(hmde_dir), [str(news)], "cpu"), ServeOptions()) as s:
            bad = httpx.post(s.url + "/v1/embeddings", json={"model": "hmde", "input": [[104], [104, 105, 280]]},
                             timeout=60)
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[1]"
            assert "holds the token id 280, which names no token of cl100k_base" in bad.json()["error"]["message"]
            again = httpx.post(s.url + "/v1/embeddings", json={"model": "hmde", "input": [104, 105]}, timeout=60)
            assert again.status_code == 200  # the connection was not dropped: the next request is answered
            surrogate = '{"model": "hmde", "input": ["fine", "bad \\ud800 text"]}'
            r = httpx.post(s.url + "/v1/embeddings", content=surrogate, headers={"Content-Type": "application/json"},
                           timeout=60)
            assert r.status_code == 400 and r.json()["error"]["param"] == "input[1]"
            assert "lone surrogate (U+D800) at character 5" in r.json()["error"]["message"]
            r = httpx.post(s.url + "/search", content='{"query": "cat \\udfff"}',
                           headers={"Content-Type": "application/json"}, timeout=60)
            assert r.status_code == 400 and r.json()["error"]["param"] == "query"
            r = httpx.post(s.url + "/search", content='{"query": "cat", "filter": "year == \\"\\ud800\\""}',
                           headers={"Content-Type": "application/json"}, timeout=60)
            assert r.status_code == 400 and "lone surrogate" in r.json()["error"]["message"]
            assert "duckdb" not in r.json()["error"]["message"]
    finally:
        token_arrays._loaded.pop("cl100k_base", None)


# -- 8: a missing languages.npz is refused, as a garbled one is ----------------------------------------------
def test_a_missing_language_statistics_file_is_one_line(news, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(news, copy)
    (copy / "languages.npz").unlink()
    capsys.readouterr()
    assert main(["index", "info", str(copy)]) == 2
    assert last_error(capsys) == (f"hmde: error: {copy / 'languages.npz'}: missing: the index records a language "
                                  "debiasing, whose statistics this file holds; put it back, or rebuild the index "
                                  "(hmde index build ... --overwrite)")
    assert main(["search", str(copy), "cat"]) == 2
    assert "languages.npz: missing" in last_error(capsys)


# -- 9: the sentence stage's settings ---------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (["--scale", "-100"], "scale must be a finite number > 0, got -100.0"),
    (["--scale", "0"], "scale must be a finite number > 0, got 0.0"),
    (["--warmup", "-5"], "warmup must be >= 0 steps, got -5"),
    (["--lr", "nan"], "lr must be a finite number > 0, got nan"),
    (["--margin", "-0.2"], "margin must be >= 0"),
    (["--lower-trainable", "bogus"], "lower_trainable: expected all (the paper), no-embeddings, or top-N"),
])
def test_sentence_stage_settings_are_refused_before_the_data_or_the_model(flags, message, tmp_path, capsys):
    (tmp_path / "data").mkdir()  # no pairs in it: a setting refused before the data is read
    assert main(["sentence-stage", "no-such-model", "--data", str(tmp_path / "data"), "-o", str(tmp_path / "run"),
                 *flags]) == 2
    assert message in last_error(capsys)
    assert not (tmp_path / "run").exists()


def test_a_resumed_stage_logs_each_step_once_and_leaves_no_temporary(tmp_path):
    from hmde.training.checkpoint import STATE_FILE, save_checkpoint, trim_log

    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 56)) + '{"step": 5')
    trim_log(log, 50)  # the checkpoint of step 50: steps 51-55 are run again
    assert [json.loads(x)["step"] for x in log.read_text().splitlines()] == list(range(1, 51))
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / f".{STATE_FILE}.abc123.tmp").write_bytes(b"half a checkpoint")  # a writer killed while saving
    save_checkpoint(folder, {"step": 1})
    assert sorted(p.name for p in folder.iterdir()) == [STATE_FILE]


def test_a_checkpoint_of_other_settings_names_them(tmp_path):
    pytest.importorskip("torch")
    from hmde.pretraining.sentence_stage import SentenceStageTrainer
    from hmde.pretraining.sentence_stage_config import SentenceStageConfig
    from hmde.training.checkpoint import save_checkpoint
    from dataclasses import asdict

    save_checkpoint(tmp_path / "run" / "checkpoint", {"step": 3, "model": {}, "config": asdict(
        SentenceStageConfig(lr=2e-5, steps=4, batch_size=2, lower_trainable="all"))})
    trainer = SentenceStageTrainer.__new__(SentenceStageTrainer)  # the resume check alone: no model is needed
    trainer.config = SentenceStageConfig(steps=4, batch_size=2, lower_trainable="all")
    trainer.output = tmp_path / "run"
    import torch

    trainer.module = torch.nn.Linear(2, 2)
    with pytest.raises(Exception, match=r"written with other settings \(lr 2e-05 there, 1e-05 now\): give the "
                                        r"same, or another --output"):
        trainer.train()


# -- 10: the integrations' errors ---------------------------------------------------------------------------
def test_integrations_name_a_server_that_is_down_and_counts_that_are_no_counts(news):
    pytest.importorskip("httpx")
    from hmde.errors import HmdeError
    from hmde.integrations.client import Embedder, IndexClient
    from serve_helpers import free_port

    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(HmdeError, match=rf"^cannot reach the hmde server at {down} \(.*\): is `hmde serve` running"):
        IndexClient(url=down).search(["q"])
    with pytest.raises(HmdeError, match="cannot reach the hmde server"):
        Embedder(url=down).embed(["q"], "query")
    with pytest.raises(HmdeError, match="url must be a server's address starting with http:// or https:// .*got "
                                        "'localhost:8000'"):
        IndexClient(url="localhost:8000")
    searcher = IndexClient(index=str(news))
    for k in (0, 2.5, "5", True):
        with pytest.raises(HmdeError, match=rf"^k must be a whole number >= 1, got {k!r}"):
            searcher.search(["cat"], k)
    searcher.close()


def test_haystack_top_k_zero_is_refused_not_ten(news):
    pytest.importorskip("haystack")
    from hmde.errors import HmdeError
    from hmde.integrations.haystack import HmdeRetriever

    retriever = HmdeRetriever(index=str(news), k=10)
    with pytest.raises(HmdeError, match=r"top_k must be a whole number >= 1, got 0"):
        retriever.run("cat", top_k=0)
    assert len(retriever.run("cat", top_k=1)["documents"]) == 1


def test_python_search_errors_name_pythons_parameters(news):
    from hmde.errors import HmdeError
    from hmde.index.search import Index

    with Index.open(str(news)) as index:
        with pytest.raises(HmdeError, match=r"^top_k \(--top-k\) must be a whole number >= 1, got 2.5$"):
            index.search("cat", top_k=2.5)
        with pytest.raises(HmdeError, match=r"^top_k \(--top-k\) must be a whole number >= 1, got '5'$"):
            index.search("cat", top_k="5")


# -- 11: bounds and quiet failures ------------------------------------------------------------------------
def test_threads_has_an_upper_bound(news, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["search", str(news), "cat", "--threads", "1000000"])
    assert exit_.value.code == 2 and "--threads: must be at most 1024, got 1000000" in capsys.readouterr().err
    from hmde.errors import HmdeError
    from hmde.index.search import Index

    with pytest.raises(HmdeError, match=r"threads \(--threads\) must be a whole number from 1 to 1024"):
        Index.open(str(news), threads=10**6)


def test_an_unknown_field_of_an_index_with_ten_thousand_keys_is_a_short_line(tmp_path):
    from store_contract import DIM, batch, meta_for, world

    from hmde.index.filters import FilterError
    from hmde.index.store import DocumentIndex

    docs = world(6)
    docs[0]["metadata"] = {f"key{i:05d}": i for i in range(10_000)}
    with DocumentIndex.write_batches(tmp_path / "idx", meta_for(""), [batch(docs)]) as index:
        with pytest.raises(FilterError) as refused:
            index.search(np.ones((1, DIM), np.float32), filter="key0001 == 1")
    message = str(refused.value)
    assert len(message) < 500 and "(did you mean 'key09001' or " in message and "key00015 and 9,988 more)" in message


def test_two_writers_on_one_milvus_lite_folder_get_hmdes_line_alone(tmp_path):
    pytest.importorskip("milvus_lite")
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom hmde.index.milvus_client import "
                               f"client_for\nclient_for({str(tmp_path / 'm.db')!r})\nprint('held', flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        other = subprocess.run([sys.executable, "-c", "from hmde.index.milvus_client import client_for\n"
                                f"client_for({str(tmp_path / 'm.db')!r})"], capture_output=True, text=True,
                               env={**os.environ, "HMDE_LOCK_TIMEOUT": "2"})  # it waits (issue 92), bounded
    finally:
        holder.kill()
        holder.wait()
    assert other.returncode != 0
    lines = [x for x in other.stderr.splitlines() if x.strip()]
    assert "Failed to start MilvusLite" not in other.stderr and "BlockingIOError" not in other.stderr
    assert "held by another process for 2 s" in lines[-1]
    assert lines[lines.index(next(x for x in lines if x.startswith("Traceback"))):][-1].startswith("hmde.errors")


# -- 13: documents without a language get one ------------------------------------------------------------
def test_documents_without_a_language_are_detected_stored_and_counted(hmde_dir, tmp_path, capsys):
    docs = [{"doc_id": "en", "text": "The government presented its budget to parliament on Tuesday."},
            {"doc_id": "de", "text": "Die Regierung hat am Dienstag dem Parlament ihren Haushalt vorgelegt."},
            {"doc_id": "xx", "text": "12345"}]
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl", docs)), "-o",
                 str(tmp_path / "idx"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(tmp_path / "idx"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["languages"] == {"deu": 1, "eng": 1, "unknown": 1}
    one = [{"doc_id": "x", "text": "Only English here, said plainly and at length."}]
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "e.jsonl", one)), "-o",
                 str(tmp_path / "one"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(tmp_path / "one")]) == 0
    assert "(recorded; idle here: it needs documents in two known languages)" in capsys.readouterr().out


def test_an_integer_beyond_64_bits_in_metadata_is_refused_before_a_milvus_write(hmde_dir, tmp_path, capsys):
    pytest.importorskip("milvus_lite")
    from hmde.errors import InputError
    from hmde.index.search import Index

    docs = [{"doc_id": "a", "text": "One.", "views": 3}, {"doc_id": "b", "text": "Two.", "stats": {"n": 2 ** 70}}]
    with pytest.raises(InputError, match=r"documents\[1\], field 'stats': document 'b': stats.n is an integer beyond"):
        Index.create(str(tmp_path / "idx"), docs, model=str(hmde_dir), store=f"milvus:{tmp_path / 'm.db'}")
    assert not (tmp_path / "idx").exists()
    src = write_jsonl(tmp_path / "d.jsonl", docs)
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "idx"), "--store",
                 f"milvus:{tmp_path / 'm.db'}", "--no-progress"]) == 2
    assert last_error(capsys).startswith(f"hmde: error: {src}, line 2, field 'stats': document 'b': stats.n is an")
