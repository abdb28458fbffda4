"""auto's bf16 on a CPU with AMX (issue 96, item 0): chosen by the CPU's flags and a probe, trusted only after the
model's check (its measured minima, per CPU), float32's family of vectors, never in training; a failed check runs the
ONNX graphs. The suite runs with HMDE_CPU_BF16=off (conftest); these tests set the policy they test."""

import json

import numpy as np
import pytest
import torch

from hmde.encoders import cpu_bf16
from hmde.errors import HmdeError

TEXTS = ["The volcano erupted again last night. Ash covered the villages.", "Der Vulkan ist wieder ausgebrochen.",
         "北京是中国的首都。"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("HMDE_CACHE", str(folder))
    return folder


@pytest.fixture()
def cpu(monkeypatch):
    """Set the CPU's flags and the probe's speeds (float32, bf16) as a test says."""
    from hmde.encoders import precision

    def set_cpu(flags=(), speeds=(300.0, 1600.0)):
        monkeypatch.setattr(cpu_bf16, "cpu_flags", lambda: frozenset(flags))
        monkeypatch.setattr(precision, "product_speeds", lambda dtype: speeds)
    return set_cpu


def test_the_policy_the_cpu_flags_and_the_probe_decide_whether_bf16_is_tried(monkeypatch, cpu):
    cpu(flags={"avx512f", "amx_bf16", "amx_tile"}, speeds=(300.0, 1600.0))
    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    assert cpu_bf16.wanted()
    cpu(flags={"avx512f", "amx_bf16"}, speeds=(300.0, 800.0))  # 2.7x: under MIN_SPEEDUP
    assert not cpu_bf16.wanted()
    cpu(flags={"avx512f", "avx512_bf16"}, speeds=(300.0, 1600.0))  # no AMX: auto keeps the graphs
    assert not cpu_bf16.wanted()
    monkeypatch.setenv(cpu_bf16.VARIABLE, "on")  # on: the probe alone
    assert cpu_bf16.wanted()
    monkeypatch.setenv(cpu_bf16.VARIABLE, "off")
    cpu(flags={"amx_bf16"}, speeds=(300.0, 1600.0))
    assert not cpu_bf16.wanted()
    monkeypatch.setenv(cpu_bf16.VARIABLE, "sometimes")
    with pytest.raises(HmdeError, match="HMDE_CPU_BF16='sometimes': expected auto, on or off"):
        cpu_bf16.wanted()


def test_auto_runs_pytorch_in_bf16_where_the_check_passes_with_float32s_vectors(tmp_path, cache, monkeypatch, cpu):
    from hmde.encoders.backends import resolve
    from hmde.encoders.hierarchical import HierarchicalEncoder
    from hmde.encoders.model_loading import load_model
    from hmde.index.search import Index

    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    cpu(flags={"amx_bf16"})
    assert resolve("hmde-mini", "cpu", "auto") == "torch-bf16"
    assert resolve("hmde-mini", "cpu", "auto-fp32") == "torch-bf16"  # float32's family: reads fp32 indexes
    assert resolve("hmde-mini", "cpu", "onnx-int8") == "onnx-int8"  # asked for: as asked
    assert resolve("hmde-mini", "cuda", "auto") == "torch"
    kind, model = load_model("hmde-mini", "cpu", backend="auto")
    assert isinstance(model, HierarchicalEncoder) and model.lower.inference_dtype == torch.bfloat16
    record = json.loads(cpu_bf16.record_path("hmde-mini").read_text())
    assert record["passed"] and min(record["min_cosine"].values()) >= cpu_bf16.MIN_COSINE
    assert record["cpu"] == cpu_bf16.cpu_name() and record["threshold"] == 0.9999
    assert not any(p.name.startswith("onnx-") for p in cache.iterdir())  # no graphs made: none needed

    reference = load_model("hmde-mini", "cpu", backend="torch")[1]
    assert reference.lower.inference_dtype is None
    fp32, bf16 = reference.lower.encode(TEXTS), model.lower.encode(TEXTS)
    cos = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cos.min() >= 0.9999 and not np.array_equal(fp32, bf16)  # bf16 ran, and kept float32's vectors
    # a query's vector is the one it has alone, whatever it is embedded with (every door gives it the same scores)
    queries = ["who won the final?", "ash from the volcano", "the government's budget", TEXTS[0]]
    together = model.lower.encode(queries, prompt_name="query")
    for i, query in enumerate(queries):
        np.testing.assert_array_equal(together[i], model.lower.encode([query], prompt_name="query")[0])
    # never with gradients, nor in training: fine-tuning sees float32
    np.testing.assert_array_equal(model.lower.embed(TEXTS).detach().numpy(),
                                  reference.lower.embed(TEXTS).detach().numpy())
    model.lower.train(), reference.lower.train()
    with torch.no_grad():
        torch.manual_seed(0)
        trained = model.lower.embed(TEXTS).numpy()
        torch.manual_seed(0)
        np.testing.assert_array_equal(trained, reference.lower.embed(TEXTS).numpy())  # the same dropout, float32
    model.lower.eval(), reference.lower.eval()

    docs = [{"doc_id": str(i), "text": t} for i, t in enumerate(TEXTS)]
    with Index.create(str(tmp_path / "idx"), docs, model="hmde-mini") as index:
        assert index.model.lower.inference_dtype == torch.bfloat16
        assert index.search("volcano ash", top_k=1)[0][0].doc_id == "0"
    assert json.loads((tmp_path / "idx" / "index.json").read_text())["backend"] == "auto"
    with Index.open(str(tmp_path / "idx"), backend="torch") as index:  # float32 reads bf16's index, and adds to it
        index.add([{"doc_id": "3", "text": "Ash fell on the villages near the volcano."}])
        assert index.search("volcano ash", top_k=2)[0][0].doc_id in ("0", "3")


def test_a_record_is_trusted_by_its_measured_minima_for_this_cpu_only(cache, monkeypatch, cpu):
    from hmde.encoders.model_loading import load_model

    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    cpu(flags={"amx_bf16"})
    path = cpu_bf16.record_path("hmde-mini")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": cpu_bf16.VERSION, "cpu": cpu_bf16.cpu_name(), "passed": True}))
    assert not cpu_bf16.trusted(json.loads(path.read_text()))  # "passed" without the minima: measured again
    load_model("hmde-mini", "cpu", backend="auto")
    record = json.loads(path.read_text())
    assert set(record["min_cosine"]) == {"queries", "sentences", "documents"}
    assert cpu_bf16.trusted(record)
    assert not cpu_bf16.trusted({**record, "cpu": "another CPU"})
    assert not cpu_bf16.trusted({**record, "min_cosine": {**record["min_cosine"], "documents": 0.9991}})
    assert not cpu_bf16.trusted({**record, "version": cpu_bf16.VERSION + 1})


def test_a_model_whose_bf16_vectors_fail_the_check_runs_its_onnx_graphs(cache, monkeypatch, cpu, caplog):
    pytest.importorskip("onnxruntime")
    from hmde.encoders.backends import resolve
    from hmde.encoders.model_loading import load_model
    from hmde.export.onnx import OnnxHierarchicalEncoder

    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    cpu(flags={"amx_bf16"})
    monkeypatch.setattr(cpu_bf16, "MIN_COSINE", 1.0000001)  # no bf16 vector reaches it
    with caplog.at_level("INFO", logger="hmde"):
        kind, model = load_model("hmde-mini", "cpu", backend="auto")
    assert isinstance(model, OnnxHierarchicalEncoder)
    record = json.loads(cpu_bf16.record_path("hmde-mini").read_text())
    assert record["refused"] == "cosine" and not record["passed"]
    assert "runs its ONNX graphs on this CPU, not PyTorch in bf16: its bf16 vectors kept a min cosine" in caplog.text
    assert resolve("hmde-mini", "cpu", "auto") == "onnx"  # the record says no: straight to the graphs next time


@pytest.mark.skipif("amx_bf16" not in cpu_bf16.cpu_flags(), reason="this CPU has no AMX bf16 tiles")
def test_on_this_cpu_with_amx_auto_chooses_bf16_by_its_own_probe(cache, monkeypatch):
    from hmde.encoders.backends import resolve

    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    assert resolve("hmde-mini", "cpu", "auto") == "torch-bf16"


def test_a_bf16_query_runs_on_one_openmp_thread_and_no_other_threads_count_moves(cache, monkeypatch, cpu):
    import threading

    from hmde.encoders.devices import one_thread
    from hmde.encoders.model_loading import load_model
    from hmde.encoders.sentence_encoder import ALONE_LIMIT, SentenceEncoder

    monkeypatch.setenv(cpu_bf16.VARIABLE, "auto")
    cpu(flags={"amx_bf16"})
    model = load_model("hmde-mini", "cpu", backend="auto")[1]
    assert model.lower.inference_dtype == torch.bfloat16
    seen, sizes, original, before = [], [], SentenceEncoder.embed_plan, torch.get_num_threads()

    def recording(self, plan, **kwargs):
        seen.append(torch.get_num_threads())
        sizes.append(max(len(batch["input_ids"]) for batch in plan.batches))
        return original(self, plan, **kwargs)

    monkeypatch.setattr(SentenceEncoder, "embed_plan", recording)
    torch.set_num_threads(2)
    try:
        model.lower.encode(["who won the final?"], prompt_name="query")
        model.lower.encode(TEXTS)  # document sentences: every thread
        assert seen == [1, 2] and sizes[0] == 1 and torch.get_num_threads() == 2  # restored after the query
        # a bulk call (an evaluation's queries) is batched on every thread: one at a time would run at a third
        bulk = [f"question number {i}?" for i in range(ALONE_LIMIT + 1)]
        model.lower.encode(bulk, prompt_name="query")
        assert seen[2] == 2 and sizes[2] > 1
        model.lower.encode(bulk[:ALONE_LIMIT], prompt_name="query")  # up to the limit: alone
        assert seen[3] == 1 and sizes[3] == 1
        other = []
        with one_thread():
            assert torch.get_num_threads() == 1
            worker = threading.Thread(target=lambda: other.append(torch.get_num_threads()))
            worker.start(), worker.join()
        assert other == [2]  # OpenMP's count is the calling thread's: the others keep theirs
    finally:
        torch.set_num_threads(before)
