"""Faults of issue 43 (a fault-injection pass over the surfaces added since issue 29): each case as the
tester ran it, failing on the code before the fix. docs/faults.md has a row per case."""

from __future__ import annotations

import errno
import gc
import glob
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hmde.cli.main import main

DOCS = [("a", "eng", "The cat sat on the mat. It was warm."), ("b", "deu", "Die Katze schläft. Es regnet."),
        ("c", "eng", "Economic growth slowed. Exports fell.")]


def write_docs(path: Path, docs=DOCS) -> Path:
    path.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in docs))
    return path


def err(capsys) -> str:
    text = capsys.readouterr().err
    assert "Traceback" not in text
    return text.strip().splitlines()[-1]


# -- data loss -------------------------------------------------------------------------------------------
def test_lawdr_statistics_never_replace_a_users_folder_or_file(tmp_path, hmde_dir, capsys):
    src = write_docs(tmp_path / "docs.jsonl")
    mine = tmp_path / "mydir"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    argv = ["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "o.npy"), "--method", "lawdr", "--lawdr-m", "1",
            "--no-progress"]
    assert main([*argv, "--lawdr-stats", str(mine)]) == 2
    assert "is not an hmde LAWDR statistics folder" in err(capsys)
    assert (mine / "notes.txt").read_text() == "keep" and not (tmp_path / "o.npy").exists()
    assert main([*argv, "--lawdr-stats", str(src)]) == 2  # the input file as the statistics folder
    assert "this is a file" in err(capsys) and src.read_text().startswith('{"doc_id": "a"')
    assert main([*argv, "--lawdr-stats", str(tmp_path / "stats")]) == 0
    (tmp_path / "stats" / "mine.txt").write_text("also kept")
    assert main([*argv, "--lawdr-stats", str(tmp_path / "stats")]) == 0  # reused, not refitted
    from hmde.methods.lawdr_statistics import LawdrStats

    stats = LawdrStats.load(tmp_path / "stats")
    stats.save(tmp_path / "stats")  # a refit replaces statistics and carries the user's file
    assert (tmp_path / "stats" / "mine.txt").read_text() == "also kept"


@pytest.mark.parametrize("command", ["convert", "mlm"])
def test_longformer_commands_never_replace_a_users_folder(command, tmp_path, labse_dir, capsys):
    mine = tmp_path / "mydir"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    corpus = tmp_path / "c.txt"
    corpus.write_text("Some text.\n")
    argv = ["longformer", "convert", str(labse_dir), "-o", str(mine)] if command == "convert" else \
        ["longformer", "mlm", str(labse_dir), str(corpus), "-o", str(mine)]
    assert main(argv) == 2
    assert "is not an hmde Longformer folder" in err(capsys) and (mine / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("case", ["encode-ids", "search-run", "build-pairs", "pseudo-documents", "eval-xsr"])
def test_an_output_that_is_an_input_is_refused_by_every_command(case, tmp_path, capsys):
    ids = tmp_path / "X.ids.txt"
    ids.write_text("a\nb\n")
    index = tmp_path / "IDX"
    index.mkdir()
    (index / "index.json").write_text("{}")
    (index / "vectors.faiss").write_text("")
    pairs = tmp_path / "p.parquet"
    pairs.write_bytes(b"PAR1")
    tsv = tmp_path / "f.tsv.gz"
    tsv.write_bytes(b"\x1f\x8b")
    data = tmp_path / "tatoeba"
    data.mkdir()
    (data / "tatoeba.deu-eng.deu").write_text("x\n")
    argv, victim = {
        "encode-ids": (["encode", "hmde-mini", str(ids), "-o", str(tmp_path / "X.npy")], ids),
        "search-run": (["search", str(index), "q", "--run", str(index / "index.json")], index / "index.json"),
        "build-pairs": (["build-pairs", str(pairs), "--output", str(pairs)], pairs),
        "pseudo-documents": (["pseudo-documents", str(tsv), "--output", str(tsv)], tsv),
        "eval-xsr": (["eval", "xsr", "hmde-mini", "--data", str(data), "-o",
                      str(data / "tatoeba.deu-eng.deu")], data / "tatoeba.deu-eng.deu"),
    }[case]
    before = victim.read_bytes()
    assert main(argv) == 2
    assert "name another output" in err(capsys)
    assert victim.read_bytes() == before


# -- crashes and tracebacks ------------------------------------------------------------------------------------
@pytest.fixture()
def small_disk(tmp_path):
    """A 256 kB tmpfs (root in CI, as here); skipped where mounting is not allowed."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    gc.collect()  # what only a reference cycle still holds (a traceback's frames) is not a leak
    held = files_open_under(mount)
    if subprocess.run(["umount", str(mount)], capture_output=True).returncode:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)  # never leave a mount behind
    assert held == [], "a failed write left files open"


def files_open_under(folder: Path) -> list[str]:
    """The files this process holds open below ``folder`` (Linux: /proc/self/fd)."""
    held = []
    for fd in glob.glob("/proc/self/fd/*"):
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # the listing's own descriptor, closed already
            continue
        if target.startswith(f"{folder}/"):
            held.append(target)
    return held


def many_docs(path: Path, n: int = 3000) -> Path:
    return write_docs(path, [(f"d{i}", "eng", f"Sentence {i} about topic {i % 3}. Line {i}.") for i in range(n)])


def test_encode_onto_a_full_disk_is_one_line_naming_the_file(small_disk, tmp_path, hmde_dir, capsys):
    src = many_docs(tmp_path / "big.jsonl")
    assert main(["encode", str(hmde_dir), str(src), "-o", str(small_disk / "o.npy"), "--no-progress"]) == 2
    assert err(capsys) == f"hmde: error: {small_disk / 'o.npy'}: No space left on device"  # was SIGBUS, exit 135
    assert os.listdir(small_disk) == []  # no temporaries left


def test_index_build_onto_a_full_disk_is_one_line_naming_the_index(small_disk, tmp_path, hmde_dir, capsys):
    src = many_docs(tmp_path / "big.jsonl")
    gc.disable()  # what a failed write leaves open must be closed by the write itself, not by a later collection
    try:
        assert main(["index", "build", str(hmde_dir), str(src), "-o", str(small_disk / "IDX"), "--no-progress"]) == 2
        assert files_open_under(small_disk) == []  # the temporary's database was left open (a server's fd and disk)
    finally:
        gc.enable()
    assert err(capsys) == f"hmde: error: {small_disk / 'IDX'}: No space left on device"
    assert not (small_disk / "IDX").exists() and not [p for p in os.listdir(small_disk) if p.endswith(".tmp")]


def test_library_write_errors_are_oserrors_naming_the_file(small_disk):
    import torch
    from safetensors.torch import save_file

    from hmde.ground.atomic import atomic_path

    for name, write in (("ck.pt", lambda p: torch.save({"x": torch.zeros(1_000_000)}, p)),  # a checkpoint
                        ("m.safetensors", lambda p: save_file({"x": torch.zeros(1_000_000)}, str(p)))):  # e5 cache
        with pytest.raises(OSError) as info:
            with atomic_path(small_disk / name) as tmp:
                write(tmp)
        assert info.value.filename == str(small_disk / name) and info.value.errno in (errno.ENOSPC, errno.EIO)
    import faiss

    from hmde.ground.atomic import write_error

    failed = write_error(RuntimeError("Error in faiss::FileIOWriter: write error in x: 0 != 1 (No space left on "
                                      "device)"), Path("IDX"))
    assert (failed.errno, failed.filename) == (errno.ENOSPC, "IDX")
    assert write_error(RuntimeError("shape mismatch"), Path("x")) is None and faiss  # other errors stay as they are


def test_an_index_with_a_whitespace_only_document_stays_searchable(tmp_path, hmde_dir, capsys):
    src = write_docs(tmp_path / "d.jsonl", [("w", "eng", "   "), ("x", "eng", "Real text here.")])
    for mode in ("--single-vector", "--multi-vector"):
        out = tmp_path / mode.strip("-")
        assert main(["index", "build", str(hmde_dir), str(src), "-o", str(out), mode, "--no-progress"]) == 0
        capsys.readouterr()
        assert main(["search", str(out), "text", "--json"]) == 0  # was: ValueError: cannot reshape array of size 0
        assert json.loads(capsys.readouterr().out.splitlines()[0])["doc_id"] == "x"


@pytest.mark.parametrize("damage, message", [
    ("no-npz", "lawdr.npz: missing"),
    ("truncated", "not readable LAWDR arrays"),
    ("pickle", "not readable LAWDR arrays"),
    ("object-array", "not readable LAWDR arrays"),
    ("language", "lawdr.json needs the array 'dir_xxx'"),
    ("bandwidth", "field 'densities."),
    ("languages", "field 'languages'"),
])
def test_damaged_lawdr_statistics_are_one_line(damage, message, tmp_path, hmde_dir, capsys):
    src = write_docs(tmp_path / "docs.jsonl")
    stats = tmp_path / "stats"
    argv = ["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "o.npy"), "--method", "lawdr", "--lawdr-m", "1",
            "--lawdr-stats", str(stats), "--no-progress"]
    assert main(argv) == 0
    npz, meta_path = stats / "lawdr.npz", stats / "lawdr.json"
    meta = json.loads(meta_path.read_text())
    if damage == "no-npz":
        npz.unlink()
    elif damage == "truncated":
        npz.write_bytes(npz.read_bytes()[:100])
    elif damage == "pickle":
        import pickle

        npz.write_bytes(pickle.dumps({"x": 1}))
    elif damage == "object-array":
        with np.load(npz) as data:
            arrays = {k: data[k] for k in data.files}
        arrays["dir_eng"] = np.array([{"a": 1}], dtype=object)
        np.savez(npz, **arrays)
    elif damage == "language":
        meta["languages"].append("xxx")
    elif damage == "bandwidth":
        next(iter(meta["densities"].values()))["bandwidth"] = None
    elif damage == "languages":
        meta["languages"] = "eng"
    meta_path.write_text(json.dumps(meta))
    assert main(argv) == 2
    assert message in err(capsys)


def test_a_lone_surrogate_is_named_by_file_line_and_field_before_the_model_loads(tmp_path, capsys, monkeypatch):
    src = tmp_path / "d.jsonl"
    src.write_text('{"doc_id": "a", "text": "Fine."}\n{"doc_id": "b", "text": "Bad \\ud800 x."}\n')
    import hmde.cli.common

    monkeypatch.setattr(hmde.cli.common, "load_named_model", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["encode", "hmde-mini", str(src), "-o", str(tmp_path / "o.npy")]) == 2
    assert err(capsys) == f"hmde: error: {src}, line 2, field 'text': holds a lone surrogate (U+D800, from a JSON " \
        "escape): not text; fix or drop it"


def test_a_damaged_onnx_export_is_one_line(tmp_path, hmde_dir, capsys):
    pytest.importorskip("onnxruntime", reason="ONNX export needs the onnx extra: pip install 'hmde[onnx]'")
    export = tmp_path / "onnx"
    assert main(["export", "onnx", str(hmde_dir), "-o", str(export)]) == 0
    src = write_docs(tmp_path / "d.jsonl")
    pristine = {p.relative_to(export): p.read_bytes() for p in export.rglob("*") if p.is_file()}
    for damage in ("truncate-lower", "no-upper", "no-tokenizer"):
        for rel, data in pristine.items():
            (export / rel).parent.mkdir(parents=True, exist_ok=True)
            (export / rel).write_bytes(data)
        if damage == "truncate-lower":
            (export / "lower.onnx").write_bytes(pristine[Path("lower.onnx")][:1000])
        elif damage == "no-upper":
            (export / "upper.onnx").unlink()
        else:
            for p in (export / "tokenizer").iterdir():
                p.unlink()
        capsys.readouterr()
        assert main(["encode", str(export), str(src), "-o", str(tmp_path / "o.npy"), "--backend", "onnx"]) == 2, damage
        assert "export the model again" in err(capsys), damage


def test_parquet_languages_that_are_not_strings_are_named(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b"], "text": ["One.", "Two."], "lang": [1, 2]}), path)
    assert main(["encode", "hmde-mini", str(path), "-o", str(tmp_path / "o.npy")]) == 2
    assert err(capsys) == f"hmde: error: {path}, line 1, field 'lang': must be a string (a language code), got int"


# -- silent nonsense ---------------------------------------------------------------------------------------
def test_a_kill_between_the_two_renames_never_leaves_new_ids_beside_an_old_matrix(tmp_path, hmde_dir, monkeypatch):
    out = tmp_path / "o.npy"
    assert main(["encode", str(hmde_dir), str(write_docs(tmp_path / "d.jsonl")), "-o", str(out), "--no-progress"]) == 0
    old = np.load(out)
    other = write_docs(tmp_path / "e.jsonl", [("x", "eng", "Another text."), ("y", "eng", "And one more.")])
    real = os.replace
    calls = []

    def dies_after_the_first(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed between the two renames
        return real(src, dst)

    monkeypatch.setattr(os, "replace", dies_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        from hmde.io.vector_files import VectorWriter

        with VectorWriter(out, 2) as writer:
            writer.add(["x", "y"], np.ones((2, old.shape[1]), np.float32))
    ids = out.with_name("o.ids.txt")
    pair = (np.load(out), ids.read_text().split() if ids.exists() else None)
    assert pair[1] is None or (len(pair[0]) == len(pair[1]) and (pair[1] == ["a", "b", "c"]) == (len(pair[0]) == 3))
    assert not (pair[1] == ["x", "y"] and len(pair[0]) == 3)  # never the new ids beside the old matrix
    assert other.exists()


def test_doc_ids_with_whitespace_are_refused_for_a_trec_run_before_the_model_loads(tmp_path, hmde_dir, capsys,
                                                                                    monkeypatch):
    src = write_docs(tmp_path / "d.jsonl", [("a b", "eng", "Cats and dogs."), ("c", "eng", "Birds.")])
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "i"), "--no-progress"]) == 0
    import hmde.index.search

    monkeypatch.setattr(hmde.index.search, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["search", str(tmp_path / "i"), "cats", "--run", str(tmp_path / "r.trec")]) == 2
    assert "'a b' holds whitespace" in err(capsys) and not (tmp_path / "r.trec").exists()


def test_language_values_that_are_no_language_are_read_as_unknown_with_one_warning(tmp_path, hmde_dir, capsys):
    src = write_docs(tmp_path / "d.jsonl", [("a", "xx", "One."), ("b", "xx", "Two."), ("c", "!!", "Three."),
                                            ("d", "zho_Hans", "四。")])
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "i"), "--no-progress"]) == 0
    warnings = [x for x in capsys.readouterr().err.splitlines() if "no language code" in x]
    assert warnings == [f"hmde: warning: {src}, line 1, field 'lang': 'xx' is no language code; read as unknown",
                        f"hmde: warning: {src}, line 3, field 'lang': '!!' is no language code; read as unknown"]
    from hmde.index.store import DocumentIndex

    with DocumentIndex.open(tmp_path / "i") as index:
        assert [r[0] for r in index._query("SELECT lang FROM docs ORDER BY row")] == [None, None, None, "zho_Hans"]


# -- training, pairs, recipes -----------------------------------------------------------------------------
PAGES = [{"doc_id": f"{lang}/{c}", "concept": c, "lang": lang, "text": t, "categories": ["x"]}
         for lang, c, t in (("eng", "Q1", "The cat sleeps. It is small."), ("deu", "Q1", "Die Katze schläft. Sie ist klein."),
                            ("eng", "Q2", "The dog runs. It is fast."), ("deu", "Q2", "Der Hund rennt. Er ist schnell."),
                            ("eng", "Q3", "Paris is a city. It is big."), ("deu", "Q3", "Paris ist eine Stadt. Sie ist groß."))]
TRAIN = ["--batch-size", "2", "--grad-accum", "1", "--warmup", "1", "--seed", "3", "--save-every", "2", "--max-steps",
         "4", "--no-progress", "--device", "cpu", "--bf16", "off"]


@pytest.fixture()
def quoted_pairs(tmp_path):
    """A pairs file built in a folder whose name holds a quote (it was pasted into DuckDB's SQL)."""
    folder = tmp_path / "it's"
    folder.mkdir()
    pages = folder / "pages.jsonl"
    pages.write_text("".join(json.dumps(p) + "\n" for p in PAGES))
    assert main(["build-pairs", str(pages), "-o", str(folder / "p.parquet"), "--no-negative", "keep",
                 "--no-progress"]) == 0
    return folder / "p.parquet"


def test_resume_refuses_other_settings_and_another_model_before_loading(quoted_pairs, labse_dir, hf_dir, tmp_path,
                                                                         capsys, monkeypatch):
    run = tmp_path / "run"
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--stop-at-step", "2"]) == 0
    assert json.loads((run / "training_config.json").read_text())["start_model"] == str(labse_dir.resolve())
    import hmde.encoders.hierarchical

    monkeypatch.setattr(hmde.encoders.hierarchical.HierarchicalEncoder, "from_sentence_encoder",
                        classmethod(lambda *a, **k: pytest.fail("the model was loaded")))
    for change, message in ((["--lr", "1e-3"], "--lr 1e-05; resume with the same value, not 0.001"),
                            (["--batch-size", "3"], "--batch-size 2; resume with the same value, not 3"),
                            (["--seed", "4"], "--seed 3; resume with the same value, not 4")):
        argv = [a for a in TRAIN]
        flag = change[0]
        if flag in argv:
            argv[argv.index(flag) + 1] = change[1]
        else:
            argv += change
        assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *argv, "--resume"]) == 2
        assert err(capsys).endswith(message + " (or start a new run with --overwrite)")
    assert main(["train", str(hf_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--resume"]) == 2
    assert f"was started from {labse_dir.resolve()}, not {hf_dir}" in err(capsys)


def test_a_resumed_run_logs_each_step_once(quoted_pairs, labse_dir, tmp_path):
    run = tmp_path / "run"
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--stop-at-step", "2"]) == 0
    log = run / "train_log.jsonl"
    # as SIGKILL leaves it: steps logged after the last checkpoint (step 2)
    log.write_text(log.read_text() + json.dumps({"step": 3, "loss": 1.0}) + "\n" + '{"step": 4, "lo')
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--resume"]) == 0
    steps = [r["step"] for r in map(json.loads, log.read_text().splitlines()) if "loss" in r]
    assert steps == sorted(set(steps)) and steps[-1] == 4


def test_overwrite_unlinks_a_symlinked_checkpoint_and_keeps_its_target(quoted_pairs, labse_dir, tmp_path, capsys):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--stop-at-step", "2"]) == 0
    (run / "checkpoint").rename(elsewhere)
    (run / "checkpoint").symlink_to(elsewhere)
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(run), *TRAIN, "--overwrite"]) == 0
    assert elsewhere.is_dir() and any(elsewhere.iterdir())  # not hmde's to delete
    assert (run / "checkpoint").is_dir() and not (run / "checkpoint").is_symlink()


def test_a_pairs_documents_file_with_non_text_is_one_line(quoted_pairs, labse_dir, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = quoted_pairs.with_name("p.docs.parquet")
    table = pq.read_table(docs)
    pq.write_table(table.set_column(table.column_names.index("text"), "text",
                                    pa.array(range(len(table)), pa.int64())), docs)
    assert main(["train", str(labse_dir), str(quoted_pairs), "-o", str(tmp_path / "m"), *TRAIN]) == 2
    assert err(capsys) == f"hmde: error: {docs}, field 'text': must hold text, holds int64; rebuild it with " \
        "`hmde build-pairs`"


def test_sigterm_in_a_recipe_step_ends_the_recipe_with_143(monkeypatch, capsys):
    import hmde.cli.main as cli_main
    from hmde.recipes.steps import commands, run_step

    with commands(lambda argv: 143), pytest.raises(cli_main.Terminated):  # the step was terminated
        run_step("a step", False, ["encode"])


# -- indexes ----------------------------------------------------------------------------------------------------
def test_add_through_a_symlinked_index_updates_its_target(tmp_path, hmde_dir):
    real, link = tmp_path / "real", tmp_path / "L"
    assert main(["index", "build", str(hmde_dir), str(write_docs(tmp_path / "d.jsonl", DOCS[:2])), "-o", str(real),
                 "--no-progress"]) == 0
    link.symlink_to(real)
    assert main(["index", "build", str(write_docs(tmp_path / "e.jsonl", DOCS[2:])), "-o", str(link), "--add",
                 "--no-progress"]) == 0
    assert link.is_symlink() and json.loads((real / "index.json").read_text())["count"] == 3
    assert not [p for p in tmp_path.iterdir() if ".old." in p.name]


def test_an_index_whose_model_is_gone_is_one_line_without_asking_the_hub(tmp_path, hmde_dir, capsys, monkeypatch):
    out = tmp_path / "i"
    assert main(["index", "build", str(hmde_dir), str(write_docs(tmp_path / "d.jsonl")), "-o", str(out),
                 "--no-progress"]) == 0
    meta = json.loads((out / "index.json").read_text())
    meta["model"] = "someorg/a-model-not-here"
    (out / "index.json").write_text(json.dumps(meta))
    import huggingface_hub

    real = huggingface_hub.snapshot_download

    def offline_only(*args, **kwargs):
        assert kwargs.get("local_files_only"), "the hub was asked"
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline_only)
    assert main(["search", str(out), "cats"]) == 2
    assert "was built with someorg/a-model-not-here, which is neither a folder here" in err(capsys)
    assert main(["search", str(out), "cats", "--model", "hmde-auto"]) == 2
    assert "leave --model out" in err(capsys)
    assert main(["index", "build", "hmde-auto", str(write_docs(tmp_path / "e.jsonl", [("z", "eng", "Z.")])), "-o",
                 str(out), "--add"]) == 2
    assert "leave the model out of --add" in err(capsys)


def test_a_damaged_e5_cache_is_said_and_built_again(tmp_path, monkeypatch, capsys):
    from hmde.e5 import folder as e5_folder

    monkeypatch.setenv("HMDE_CACHE", str(tmp_path / "cache"))
    built = e5_folder.ensure_folder()
    assert e5_folder.damage(built) is None
    config = built / "config.json"
    config.write_text(config.read_text().replace("384", "385"))
    e5_folder._VERIFIED.clear()  # as a new process finds it (one process checks a folder once)
    capsys.readouterr()
    again = e5_folder.ensure_folder()
    assert again == built and e5_folder.damage(again) is None
    assert "is damaged (config.json changed since it was built); building it again" in capsys.readouterr().err
    (built / "model.safetensors").write_bytes(b"")
    assert e5_folder.damage(built).startswith("model.safetensors has 0 bytes")
