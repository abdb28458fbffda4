"""The smoothed int8 graph (issue 78): SmoothQuant's factors keep the float function, calibration ranges travel by
model hash, ``auto`` runs int8 where hmde ships a model's ranges and the graph passes its check, and an index keeps
the family of vectors it was built with."""

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

TEXTS = ["The volcano erupted again last night. Ash covered the villages.", "Der Vulkan ist wieder ausgebrochen.",
         "北京是中国的首都。", "Wie backt man Brot mit Hefe?"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("HMDE_CACHE", str(folder))
    return folder


@pytest.fixture()
def mini_ranges(cache, tmp_path, monkeypatch):
    """hmde-mini's ranges, calibrated on the check's texts (its demo documents, their scripts), in a ranges folder
    of the test's own."""
    from transformers import AutoTokenizer

    from hmde.export import smoothing
    from hmde.export.cached import check_texts, ensure_export

    monkeypatch.setattr(smoothing, "RANGES", tmp_path / "ranges")
    folder, _ = ensure_export("hmde-mini")
    documents, _, sentences = check_texts()
    ranges = smoothing.activation_ranges(folder / "lower.onnx", AutoTokenizer.from_pretrained(str(folder / "tokenizer")),
                                         documents + sentences + ["query: " + s for s in sentences])
    smoothing.save_ranges(smoothing.ranges_file(folder.name.split("-")[-3]), ranges)
    return folder, ranges


def run(graph, ids, mask):
    import onnxruntime as ort

    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]


def test_smoothing_keeps_the_float_function_and_moves_the_range_into_the_weights(mini_ranges, tmp_path):
    import onnx

    from hmde.export.smoothing import smooth, weighted_inputs

    folder, ranges = mini_ranges
    smooth(folder / "lower.onnx", tmp_path / "s.onnx", ranges)
    from transformers import AutoTokenizer

    batch = AutoTokenizer.from_pretrained(str(folder / "tokenizer"))(TEXTS, padding=True, return_tensors="np")
    ids, mask = batch["input_ids"].astype(np.int64), batch["attention_mask"].astype(np.int64)
    np.testing.assert_allclose(run(tmp_path / "s.onnx", ids, mask), run(folder / "lower.onnx", ids, mask), atol=2e-5)
    graph = onnx.load(str(tmp_path / "s.onnx"))
    muls = [n for n in graph.graph.node if n.name.startswith("smooth")]
    assert len(muls) == len(weighted_inputs(onnx.load(str(folder / "lower.onnx")))) == len(ranges) == 8
    # every weighted product now reads smoothed activations: the query, key and value projections share one Mul
    assert all(nodes[0].input[0].startswith("smooth") for _, nodes in weighted_inputs(graph))
    assert sum(len(nodes) for _, nodes in weighted_inputs(graph)) == 12


def test_ranges_round_trip_without_pickles_and_a_graph_that_does_not_fit_is_refused(mini_ranges, tmp_path):
    from hmde.errors import ModelLoadError
    from hmde.export.smoothing import load_ranges, smooth

    folder, ranges = mini_ranges
    back = load_ranges(folder.name.split("-")[-3] + "0" * 48)
    assert len(back) == len(ranges) and all(np.array_equal(a, b) for a, b in zip(back, ranges))
    assert load_ranges("f" * 64) is None and load_ranges(None) is None
    with pytest.raises(ModelLoadError, match="do not fit this graph"):
        smooth(folder / "lower.onnx", tmp_path / "s.onnx", ranges[:-1])
    assert not (tmp_path / "s.onnx").exists()


def test_auto_runs_the_checked_int8_graph_where_ranges_ship_and_fp32_elsewhere(mini_ranges, cache):
    from hmde.encoders.backends import resolve
    from hmde.encoders.model_loading import load_model
    from hmde.export.cached import INT8_MIN_COSINE, ensure_export
    from hmde.export.smoothing import FORM

    folder, _ = mini_ranges
    assert resolve("hmde-mini", "cpu", "auto") == "onnx-int8"
    record = json.loads((folder / "check.json").read_text())["int8"]
    assert record["passed"] and record["form"] == FORM == "smoothquant-static-a0.8-v1"
    assert record["threshold"] == INT8_MIN_COSINE
    assert min(record["min_cosine"].values()) >= INT8_MIN_COSINE == 0.999
    assert resolve("hmde-mini", "cpu", "auto-fp32") == "onnx"  # reading an index of fp32 vectors
    assert resolve("hmde-mini", "cuda", "auto") == "torch"
    fast = load_model("hmde-mini", "cpu", backend="auto")[1]
    exact = load_model("hmde-mini", "cpu", backend="torch")[1]
    assert fast.int8
    a, b = np.asarray(fast.encode_documents(TEXTS)), np.asarray(exact.encode_documents(TEXTS))
    cosines = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosines.min() >= INT8_MIN_COSINE and not np.allclose(a, b, atol=1e-5)  # close, yet not fp32's vectors
    record["passed"] = False  # a graph that fails its check is not run unasked
    whole = json.loads((folder / "check.json").read_text())
    whole["int8"] = record
    (folder / "check.json").write_text(json.dumps(whole))
    assert ensure_export("hmde-mini", int8=True)[1]["int8"]["passed"] is False  # the same form is not remade
    assert resolve("hmde-mini", "cpu", "auto") == "onnx"


def test_int8_vectors_do_not_depend_on_the_batch(mini_ranges):
    """Fixed activation scales: a text alone and among others gets the same vector, so every door (a query alone,
    three at once, a framework's batch) ranks alike; ONNX Runtime's per-batch scales did not."""
    import onnx

    from hmde.encoders.model_loading import load_model

    folder, _ = mini_ranges
    fast = load_model("hmde-mini", "cpu", backend="auto")[1]
    ops = [n.op_type for n in onnx.load(str(folder / "lower.int8.onnx"), load_external_data=False).graph.node]
    assert "DynamicQuantizeLinear" not in ops and ops.count("QuantizeLinear") == 6  # 3 inputs a layer, 2 layers
    together = np.asarray(fast.lower.encode(TEXTS + ["x " * 60]))
    alone = np.stack([np.asarray(fast.lower.encode([t]))[0] for t in TEXTS])
    np.testing.assert_allclose(together[:len(TEXTS)], alone, atol=1e-5)


def test_an_index_keeps_the_family_of_vectors_it_was_built_with(mini_ranges, tmp_path):
    from hmde.cli.main import main
    from hmde.index.search import Index

    docs = [{"doc_id": str(i), "text": t} for i, t in enumerate(TEXTS)]
    with Index.create(str(tmp_path / "q"), docs, model="hmde-mini") as index:
        assert index.model.int8 and index.search("volcano ash", top_k=1)[0][0].doc_id == "0"
    assert json.loads((tmp_path / "q" / "index.json").read_text())["backend"] == "onnx-int8"
    with Index.open(str(tmp_path / "q")) as index:
        assert index.model.int8
    with Index.create(str(tmp_path / "f"), docs, model="hmde-mini", backend="onnx") as index:
        assert not index.model.int8
    for recorded in ("onnx", "torch", "auto"):  # fp32 vectors (earlier hmde recorded torch or auto): read as fp32
        meta = json.loads((tmp_path / "f" / "index.json").read_text())
        meta["backend"] = recorded
        (tmp_path / "f" / "index.json").write_text(json.dumps(meta))
        with Index.open(str(tmp_path / "f")) as index:
            assert not index.model.int8
        with Index.open(str(tmp_path / "f"), backend="auto") as index:
            assert not index.model.int8
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert main(["index", "build", "hmde-mini", str(src), "-o", str(tmp_path / "c"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "c" / "index.json").read_text())["backend"] == "onnx-int8"
    assert main(["index", "add", str(tmp_path / "f"), str(src), "--no-progress"]) == 2  # ids exist: refused
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"doc_id": "new", "text": "Ein neues Dokument."}) + "\n")
    assert main(["index", "add", str(tmp_path / "f"), str(more), "--no-progress"]) == 0  # added with fp32


def test_hmde_e5_ships_ranges_for_its_current_weights():
    """A changed hmde-e5 needs new ranges (benchmarks/int8_calibration.py), else auto falls back to fp32."""
    from hmde.encoders.registry import resolve_model_path
    from hmde.evaluation.provenance import model_hash
    from hmde.export.smoothing import load_ranges

    ranges = load_ranges(model_hash(resolve_model_path("hmde-e5")))
    assert ranges is not None and len(ranges) == 48
    assert [len(r) for r in ranges[:4]] == [384, 384, 384, 1536] and all(np.isfinite(r).all() for r in ranges)
    assert all((r > 0).all() for r in ranges)


def test_a_representation_file_carries_its_family_into_an_index(mini_ranges, tmp_path, capsys):
    from hmde.cli.main import main
    from hmde.index.search import Index
    from hmde.io.representation_parquet import read_info

    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    assert main(["encode", "hmde-mini", str(src), "-o", str(tmp_path / "r.parquet"), "--no-progress"]) == 0
    assert read_info(tmp_path / "r.parquet").backend == "onnx-int8"
    assert main(["index", "build", str(tmp_path / "r.parquet"), "-o", str(tmp_path / "i"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "i" / "index.json").read_text())["backend"] == "onnx-int8"
    with Index.create(str(tmp_path / "f"), [{"doc_id": "x", "text": "Ein Haus am See."}], model="hmde-mini",
                      backend="onnx"):
        pass
    capsys.readouterr()
    assert main(["index", "add", str(tmp_path / "f"), str(tmp_path / "r.parquet"), "--no-progress"]) == 2
    said = capsys.readouterr().err
    assert "holds vectors of --backend onnx-int8" in said and "encode the documents with --backend onnx" in said


def test_hmde_eval_runs_the_default_backend_and_fine_tuning_pytorch():
    """`hmde eval`'s subcommand is held as ``protocol``, like xldc's --protocol: only fine-tuning needs PyTorch."""
    from hmde.cli.common import needs_torch
    from hmde.cli.main import build_parser

    parser = build_parser()
    assert not needs_torch(parser.parse_args(["eval", "clir", "--xquad", "x", "-o", "r.json"]))
    assert not needs_torch(parser.parse_args(["eval", "xsr", "--data", "x", "-o", "r.json"]))
    assert needs_torch(parser.parse_args(["eval", "xldc", "--masakhanews", "x", "-o", "r.json"]))  # default: both
    frozen = parser.parse_args(["eval", "xldc", "--masakhanews", "x", "-o", "r.json", "--protocol", "frozen"])
    assert not needs_torch(frozen)
