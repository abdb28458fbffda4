"""Faults of issue 63 (round 6 of the fault pass, and what a new user tripped over): each case as the tester ran
it, failing on the code before the fix. docs/faults.md has a row per case."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cli_files
from cli_files import last_error
from hmde.cli.main import main

DOCS = [{"doc_id": "a", "lang": "eng", "text": "The cat sat on the mat. It was warm."},
        {"doc_id": "b", "lang": "deu", "text": "Die Katze schläft. Es regnet."},
        {"doc_id": "c", "lang": "eng", "text": "Economic growth slowed. Exports fell."}]


def write_jsonl(path: Path, docs=DOCS) -> Path:
    return cli_files.write_jsonl(path, docs)


# -- 1: alignment settings bounded before any model loads ----------------------------------------------------
@pytest.mark.parametrize("value", ["1000000", "17", "11", "1"])
def test_max_merge_out_of_range_is_one_line_before_any_model_loads(value, tmp_path, capsys):
    src, tgt = tmp_path / "en.txt", tmp_path / "fr.txt"
    src.write_text("One.\nTwo.\nThree.\nFour.\n")
    tgt.write_text("Un.\nDeux.\nTrois.\nQuatre.\n")
    with pytest.raises(SystemExit) as exit_:  # argparse: exit 2, the bounds named (a model name that cannot load)
        main(["align-sentences", "no-such-model", str(src), str(tgt), "-o", str(tmp_path / "o.jsonl"), "--max-merge",
              value])
    assert exit_.value.code == 2
    assert "must be between 2 and 10" in capsys.readouterr().err


def test_the_aligner_options_refuse_out_of_range_values_from_python():
    from hmde.align.sentence_alignment import MAX_MERGE, AlignmentOptions
    from hmde.errors import HmdeError

    assert len(AlignmentOptions(max_merge=MAX_MERGE).check().bead_types()) == 45
    for bad in (AlignmentOptions(max_merge=17), AlignmentOptions(max_merge=10**6), AlignmentOptions(length_weight=1e9),
                AlignmentOptions(length_weight=float("nan"))):
        with pytest.raises(HmdeError, match="must be between"):
            bad.check()


def test_the_largest_max_merge_aligns_without_overflow(tmp_path, hmde_dir):
    src, tgt = tmp_path / "en.txt", tmp_path / "fr.txt"
    src.write_text("".join(f"Sentence number {i} is here.\n" for i in range(12)))
    tgt.write_text("".join(f"Satz Nummer {i} ist hier.\n" for i in range(11)))
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "o.jsonl"),
                 "--max-merge", "10", "--no-anchors"]) == 0
    beads = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sorted(i for b in beads for i in b["src"]) == list(range(12))


# -- 2: the replaced count of an upsert is this request's --------------------------------------------------
def test_upsert_reports_the_documents_this_write_replaced_cli_python_server(tmp_path, hmde_dir, capsys):
    pytest.importorskip("fastapi")
    import httpx

    from hmde.index.search import Index
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    src = write_jsonl(tmp_path / "docs.jsonl")
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--no-progress"]) == 0
    for _ in range(2):  # the same documents twice: 3 replaced each time (was 3, then 6)
        capsys.readouterr()
        assert main(["index", "upsert", str(index), str(src), "--no-progress"]) == 0
        assert "upserted 3 documents (3 replaced)" in capsys.readouterr().out
    five = [{"doc_id": f"n{i}", "text": f"A new page number {i}. It is short."} for i in range(5)]
    with ThreadServer(load_served(str(hmde_dir), [str(index)], "cpu"), ServeOptions(writable=True)) as running:
        url = running.url + "/indexes/idx/documents"
        answers = [httpx.post(url, json={"documents": five}, timeout=60).json()["replaced"] for _ in range(3)]
        assert answers == [0, 5, 5]  # was 5, 10, 14...: the deleted rows of the index, not of the request
        assert main(["index", "delete", str(index), "a", "b", "c"]) == 0  # an outside writer's delete
        r = httpx.post(url, json={"documents": [{"doc_id": "brand-new", "text": "Nothing like it."}]}, timeout=60)
        assert r.json()["replaced"] == 0  # was 3
    with Index.open(str(index)) as opened:
        assert opened.upsert(five[:2]) == 2 and opened.index.replaced == 2


def test_upsert_on_milvus_reports_what_it_replaced(tmp_path, hmde_dir, capsys):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    src = write_jsonl(tmp_path / "docs.jsonl")
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--no-progress", "--store",
                 f"milvus:{tmp_path / 'm.db'}"]) == 0
    capsys.readouterr()
    assert main(["index", "upsert", str(index), str(src), "--no-progress"]) == 0
    assert "(3 replaced)" in capsys.readouterr().out  # was always 0 on Milvus


# -- 3: a representation file's vectors checked before anything is written -------------------------------------
def representation(tmp_path, hmde_dir) -> Path:
    out = tmp_path / "rep.parquet"
    assert main(["encode", str(hmde_dir), str(write_jsonl(tmp_path / "docs.jsonl")), "-o", str(out),
                 "--no-progress"]) == 0
    return out


def rewritten(path: Path, out: Path, column: str, change) -> Path:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index(column), column, change(table.column(column)))
    pq.write_table(table, out)
    return out


def test_nan_vectors_in_a_representation_file_are_named_by_row_and_column(tmp_path, hmde_dir, capsys):
    import pyarrow as pa

    rep = representation(tmp_path, hmde_dir)

    def nan_second_vector(column):
        values = np.array(column.to_pylist(), np.float32)
        values[1, 3] = np.nan
        return pa.array(list(values), column.type)

    bad = rewritten(rep, tmp_path / "nanvec.parquet", "vector", nan_second_vector)
    assert main(["index", "build", str(bad), "-o", str(tmp_path / "idx")]) == 2
    assert last_error(capsys).endswith(f"{bad}, row 2, column 'vector': not a finite vector (NaN or infinity); "
                                       "encode the documents again")
    assert not (tmp_path / "idx").exists()

    def inf_in_a_sentence(column):
        lists = column.to_pylist()
        lists[2][1][0] = float("inf")
        return pa.array(lists, column.type)

    bad = rewritten(rep, tmp_path / "infsent.parquet", "sentence_vectors", inf_in_a_sentence)
    assert main(["index", "build", str(bad), "-o", str(tmp_path / "idx")]) == 2
    assert "row 3, column 'sentence_vectors': sentence 2 is not a finite vector" in last_error(capsys)


def test_a_representation_file_whose_metadata_says_another_dimension_is_one_line(tmp_path, hmde_dir, capsys):
    import pyarrow.parquet as pq

    rep = representation(tmp_path, hmde_dir)
    table = pq.read_table(rep)
    meta = dict(table.schema.metadata)
    meta[b"hmde.dim"] = b"999"
    bad = tmp_path / "dim999.parquet"
    pq.write_table(table.replace_schema_metadata(meta), bad)
    assert main(["index", "build", str(bad), "-o", str(tmp_path / "idx")]) == 2
    message = last_error(capsys)
    assert "column 'vector': holds 64-d vectors, but the file's metadata says hmde.dim = 999" in message, message
    assert not (tmp_path / "idx").exists()


# -- 4: a killed Parquet encode's temporary is removed by the next encode ------------------------------------
def test_a_killed_parquet_encodes_temporary_is_removed_by_the_next_encode(tmp_path, hmde_dir):
    src = write_jsonl(tmp_path / "docs.jsonl", [{"doc_id": f"d{i}", "text": f"Sentence {i} of many. " * 40}
                                                 for i in range(400)])
    out = tmp_path / "Z.parquet"
    child = subprocess.Popen([sys.executable, "-m", "hmde", "encode", str(hmde_dir), str(src), "-o", str(out),
                              "--no-progress", "--batch-size", "4"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".Z.parquet.*.tmp")):
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    left = list(tmp_path.glob(".Z.parquet.*.tmp"))
    assert len(left) == 1 and left[0].name.endswith(f"-{child.pid}.tmp"), left
    small = write_jsonl(tmp_path / "small.jsonl")
    assert main(["encode", str(hmde_dir), str(small), "-o", str(out), "--no-progress"]) == 0
    assert not list(tmp_path.glob(".Z.parquet.*")) and out.is_file()


# -- 5: tracebacks ----------------------------------------------------------------------------------------
def test_classify_c_below_zero_is_refused_before_embedding(tmp_path, capsys):
    src = write_jsonl(tmp_path / "l.jsonl", [{**d, "label": x} for d, x in zip(DOCS, "xyx")])
    with pytest.raises(SystemExit) as exit_:
        main(["classify", "train", "no-such-model", str(src), "-o", str(tmp_path / "clf"), "--c", "-1"])
    assert exit_.value.code == 2 and "must be > 0, got -1.0" in capsys.readouterr().err


def test_python_writes_refuse_a_batch_size_of_zero_and_say_python_names(tmp_path, hmde_dir):
    from hmde.errors import HmdeError
    from hmde.index.records import UnknownIds
    from hmde.index.search import Index

    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir)) as index:
        with pytest.raises(HmdeError, match="batch_size must be a positive integer, got 0"):
            index.add([{"doc_id": "z", "text": "Zed."}], batch_size=0)
        with pytest.raises(UnknownIds) as refused:  # 12: Python's argument, not the command line's flag
            index.delete(["a", "nope"])
        assert "ignore_missing=True deletes the others" in str(refused.value) and "--ignore" not in str(refused.value)
        with pytest.raises(HmdeError) as known:  # 12: no DuckDB traceback chained to it
            index.add([{"doc_id": "a", "text": "Again."}])
        assert "'a' is already in the index (an upsert replaces it)" in str(known.value)
        assert known.value.__cause__ is None and known.value.__suppress_context__
    with pytest.raises(HmdeError, match="batch_size"):
        Index.create(str(tmp_path / "other"), DOCS, model=str(hmde_dir), batch_size=-3)


@pytest.mark.parametrize("argv", [["index", "info", "{idx}"], ["search", "{idx}", "cat", "Katze", "growth"]])
def test_a_closed_pipe_ends_quietly(argv, tmp_path, hmde_dir):
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl")), "-o", str(index),
                 "--no-progress"]) == 0
    command = " ".join([sys.executable, "-m", "hmde"] + [a.format(idx=index) for a in argv])
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stdout.strip() in ("0", "141")  # a reader that left before the end: 141, as Unix tools


# -- 6: --lang checked as a document's lang is ------------------------------------------------------------
@pytest.mark.parametrize("argv", [["index", "upsert", "{idx}", "{src}", "--lang", "!!"],
                                  ["encode", "{src}", "-o", "{out}", "--lang", "!!"],
                                  ["classify", "predict", "{idx}", "{src}", "--lang", "xx"],
                                  ["search", "{idx}", "cat", "--lang", "!!"]])
def test_a_lang_flag_that_is_no_language_code_is_refused(argv, tmp_path, capsys):
    values = {"idx": str(tmp_path / "idx"), "src": str(write_jsonl(tmp_path / "d.jsonl")),
              "out": str(tmp_path / "o.npy")}
    with pytest.raises(SystemExit) as exit_:
        main([a.format(**values) for a in argv])
    assert exit_.value.code == 2 and "is no language code" in capsys.readouterr().err


# -- 7 and 13: align-sentences reads what it is given ----------------------------------------------------------
def test_align_sentences_refuses_collections_without_pairs(tmp_path, capsys):
    src, tgt = write_jsonl(tmp_path / "src.jsonl"), write_jsonl(tmp_path / "tgt.jsonl")
    assert main(["align-sentences", "no-such-model", str(src), str(tgt), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert last_error(capsys) == (f"hmde: error: {src}: is a document collection: name its document pairs with "
                                  "--pairs PAIRS.tsv (`hmde align` writes them), or give two text files (one sentence "
                                  "per line, or raw texts with --split)")


def test_two_raw_texts_are_split_and_the_beads_give_spans_ids_and_scores(tmp_path, hmde_dir):
    en = "Die Brücke\nThe bridge was opened in 1900. It crosses the river.\nTraffic grew fast."
    de = "Die Brücke\nDie Brücke wurde 1900 eröffnet. Sie überquert den Fluss.\nDer Verkehr wuchs schnell."
    src, tgt = tmp_path / "en.txt", tmp_path / "de.txt"
    src.write_text(en)
    tgt.write_text(de)
    out = tmp_path / "beads.jsonl"
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(out), "--split", "--src-lang",
                 "eng", "--tgt-lang", "deu"]) == 0
    beads = [json.loads(x) for x in out.read_text().splitlines()]
    for bead in beads:
        for side, text in (("src", en), ("tgt", de)):
            assert len(bead[f"{side}_spans"]) == len(bead[side])
            pieces = [text[a:b] for a, b in bead[f"{side}_spans"]]
            assert " ".join(pieces) == bead[f"{side}_text"]
    assert sorted(i for b in beads for i in b["src"]) == list(range(max(i for b in beads for i in b["src"]) + 1))
    tsv = tmp_path / "beads.tsv"  # the scored table (issue 77: tsv is the plain bitext)
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tsv), "--split", "--format",
                 "scored"]) == 0
    lines = tsv.read_text().splitlines()
    assert lines[0] == "src_text\ttgt_text\tscore\tsrc_doc\ttgt_doc"
    first = lines[1].split("\t")
    assert first[3:] == ["en.txt", "de.txt"] and -1 <= float(first[2]) <= 1


# -- 8: messages ------------------------------------------------------------------------------------------
def test_a_lone_surrogate_in_an_id_is_named_as_the_id(tmp_path, hmde_dir):
    from hmde.errors import InputError
    from hmde.io.documents import records_from

    with pytest.raises(InputError, match=r"documents\[0\], field 'doc_id': holds a lone surrogate \(U\+D800\)"):
        records_from([{"doc_id": "bad\ud800", "text": "fine"}])
    with pytest.raises(InputError, match=r"field 'text': holds a lone surrogate \(U\+DC00\)"):
        records_from([{"doc_id": "ok", "text": "bad\udc00"}])


def test_a_file_that_is_not_a_milvus_lite_database_is_refused_untouched(tmp_path, hmde_dir, capsys):
    pytest.importorskip("pymilvus")
    precious = tmp_path / "precious.db"
    precious.write_bytes(b"SQLite format 3\x00" + bytes(100))
    before = precious.read_bytes()
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl")), "-o", str(tmp_path / "i"),
                 "--store", f"milvus:{precious}", "--no-progress"]) == 2
    assert "that is a file, and a Milvus Lite database is a folder" in last_error(capsys)
    assert precious.read_bytes() == before


def test_a_second_index_of_the_same_name_on_a_shared_milvus_store_suggests_what_works(tmp_path, hmde_dir, capsys):
    pytest.importorskip("milvus_lite")
    src, store = write_jsonl(tmp_path / "d.jsonl"), f"milvus:{tmp_path / 'shared.db'}"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "one" / "news"), "--store", store,
                 "--no-progress"]) == 0
    for extra in ([], ["--overwrite"]):
        assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "two" / "news"), "--store", store,
                     "--no-progress", *extra]) == 2
        message = last_error(capsys)
        assert "made by another index folder of the same name" in message and "--overwrite" not in message


def test_a_blank_query_in_a_queries_file_names_file_line_and_id(tmp_path, capsys):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcats\nq2\t   \n")
    assert main(["search", str(tmp_path / "nowhere"), "--queries", str(queries)]) == 2
    assert last_error(capsys) == f"hmde: error: {queries}, line 2, field 'text': query 'q2' is empty (only whitespace)"


# -- 9: one limit on ids ----------------------------------------------------------------------------------
def test_ids_over_the_servers_limit_are_refused_by_files_and_python_too(tmp_path, hmde_dir, capsys):
    from hmde.errors import InputError
    from hmde.io.documents import MAX_ID_CHARS, records_from

    long_id = "x" * 10_000
    src = write_jsonl(tmp_path / "d.jsonl", [{"doc_id": long_id, "text": "Text."}])
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "i")]) == 2
    assert last_error(capsys).endswith(f"line 1, field 'doc_id': the id is 10,000 characters long; ids hold at "
                                       f"most {MAX_ID_CHARS:,} (one limit for files, Python and the server)")
    with pytest.raises(InputError, match="at most 1,000 characters"):
        records_from([{"doc_id": long_id, "text": "Text."}])
    records_from([{"doc_id": "y" * MAX_ID_CHARS, "text": "Text."}])  # the limit itself is taken


# -- 10: encode -o never replaces a file hmde did not write -------------------------------------------------
@pytest.mark.parametrize("name", ["mine.npy", "mine.parquet"])
def test_encode_replaces_its_own_outputs_and_a_users_file_only_with_overwrite(name, tmp_path, hmde_dir, capsys):
    src = write_jsonl(tmp_path / "d.jsonl")
    users = tmp_path / name
    users.write_bytes(b"a user's data")
    assert main(["encode", str(hmde_dir), str(src), "-o", str(users), "--no-progress"]) == 2
    assert last_error(capsys).endswith("the file exists and is not an output of hmde encode; pass --overwrite to "
                                       "replace it (or name a new file)")
    assert users.read_bytes() == b"a user's data"
    assert main(["encode", str(hmde_dir), str(src), "-o", str(users), "--no-progress", "--overwrite"]) == 0
    assert main(["encode", str(hmde_dir), str(src), "-o", str(users), "--no-progress"]) == 0  # hmde's: a rerun


# -- 11: threads ------------------------------------------------------------------------------------------
def test_threads_sets_torchs_threads_from_the_command_line_and_python(tmp_path, hmde_dir, capsys):
    import torch

    from hmde.errors import HmdeError
    from hmde.index.search import Index

    src = write_jsonl(tmp_path / "d.jsonl")
    assert main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "o.npy"), "--no-progress",
                 "--threads", "1"]) == 0
    assert torch.get_num_threads() == 1
    torch.set_num_threads(2)
    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir), threads=1):
        assert torch.get_num_threads() == 1
    with pytest.raises(HmdeError, match=r"threads \(--threads\) must be a whole number from 1 to 1024, got 0"):
        Index.open(str(tmp_path / "idx"), threads=0)
    with pytest.raises(SystemExit):
        main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "o.npy"), "--threads", "0"])


# -- 15 and 16: what Parquet and Milvus tell their own users ---------------------------------------------
def test_a_representation_file_says_its_document_vectors_are_not_normalised(tmp_path, hmde_dir):
    import pyarrow.parquet as pq

    rep = tmp_path / "mean.parquet"
    assert main(["encode", "hmde-e5", str(write_jsonl(tmp_path / "docs.jsonl")), "-o", str(rep), "--no-progress"]) == 0
    meta = pq.read_schema(rep).metadata
    assert b"not normalised" in meta[b"hmde.vector_norm"]
    norms = np.linalg.norm(np.array(pq.read_table(rep).column("vector").to_pylist()), axis=1)
    assert (norms < 0.99).all()  # hmde-e5's mean of two unit sentence vectors, as said


def test_milvus_collections_are_described_and_left_loaded(tmp_path, hmde_dir):
    pytest.importorskip("milvus_lite")
    from pymilvus import MilvusClient

    from hmde.index.milvus_write import collection_schema
    from hmde.index.store import read_index_meta

    index = tmp_path / "news"
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl")), "-o", str(index),
                 "--store", f"milvus:{tmp_path / 'm.db'}", "--no-progress"]) == 0
    meta = read_index_meta(index / "index.json")
    for sentences in (False, True):  # what hmde sends (a cluster keeps it; Milvus Lite 3 drops descriptions)
        schema = collection_schema(meta, sentences)
        assert schema.description.startswith(f"hmde index {meta.store_prefix}")
        assert all(f.description for f in schema.fields)
    # the store's own user, a new client, queries with no load_collection (a cluster keeps the collections loaded;
    # Milvus Lite, whose in-process server hmde stops when done so that other processes can open the folder, answers
    # queries whatever its load state)
    client = MilvusClient(str(tmp_path / "m.db"))
    try:
        assert client.query(f"{meta.store_prefix}_documents", filter="", output_fields=["count(*)"])[0]["count(*)"] == 3
    finally:
        client.close()


# -- 17: the server's compact route, /health, info's wording ---------------------------------------------
def test_server_compacts_hides_index_names_without_the_key_and_answers_unknown_routes_in_openais_shape(
        tmp_path, hmde_dir, capsys):
    pytest.importorskip("fastapi")
    import httpx

    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    index = tmp_path / "news"
    src = write_jsonl(tmp_path / "d.jsonl")
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--no-progress"]) == 0
    assert main(["index", "upsert", str(index), str(src), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(index)]) == 0
    assert "3 live, 3 replaced or deleted (masked until `hmde index compact`)" in capsys.readouterr().out
    auth = {"Authorization": "Bearer k"}
    with ThreadServer(load_served(str(hmde_dir), [str(index)], "cpu"), ServeOptions(writable=True, api_key="k")) as s:
        assert "indexes" not in httpx.get(s.url + "/health").json()
        assert httpx.get(s.url + "/health", headers=auth).json()["indexes"] == ["news"]
        r = httpx.post(s.url + "/indexes/news/compact", headers=auth, timeout=60)
        assert r.status_code == 200 and r.json() == {"index": "news", "dropped": 3, "live": 3}
        assert httpx.post(s.url + "/indexes/news/compact", headers=auth).json()["dropped"] == 0
        put = httpx.put(s.url + "/indexes/news/documents", headers=auth, json={})
        assert put.status_code == 405 and put.json()["error"]["message"] == \
            "PUT /indexes/news/documents: this route takes DELETE, POST"
        assert set(put.json()["error"]) == {"message", "type", "param", "code"}
        unknown = httpx.get(s.url + "/nothing-here", headers=auth)
        assert unknown.status_code == 404 and unknown.json()["error"]["message"].startswith(
            "GET /nothing-here: no such route")
    with ThreadServer(load_served(str(hmde_dir), [str(index)], "cpu"), ServeOptions()) as s:  # read-only: refused
        r = httpx.post(s.url + "/indexes/news/compact")
        assert r.status_code == 403 and "--writable" in r.json()["error"]["message"]
