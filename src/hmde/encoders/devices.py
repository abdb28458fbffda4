"""Which device a run uses: ``auto`` (a CUDA GPU when there is one), or one named and checked,
so that a wrong name is one line before any model loads, not a traceback from deep inside torch."""

from __future__ import annotations

from ..errors import HmdeError


def pick_device(name: str | None) -> str:
    import torch

    if name in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise HmdeError(f"--device {name!r} is not a device: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise HmdeError("--device cuda was asked for, but no CUDA GPU is available; use --device cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise HmdeError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s) (cuda:0 .. "
                        f"cuda:{torch.cuda.device_count() - 1})")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise HmdeError("--device mps was asked for, but this machine has no MPS GPU; use --device cpu")
    if device.type not in ("cpu", "cuda", "mps"):
        raise HmdeError(f"--device {name}: hmde runs on cpu, cuda or mps")
    return name


MAX_THREADS = 1024  # torch.set_num_threads(1000000) was a MemoryError


def check_threads(threads) -> None:
    """A thread count: a whole number from 1 to :data:`MAX_THREADS` (``threads=``, ``--threads``)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise HmdeError(f"threads (--threads) must be a whole number from 1 to {MAX_THREADS}, got {threads!r}")


_THREADS: list[int] = []  # what set_threads was last given in this process: ONNX Runtime sessions made later use it


def set_threads(threads: int | None) -> None:
    """CPU threads for the whole job (``--threads``, ``threads=``): torch's operators at once, ONNX Runtime sessions
    made from now on, FAISS's OpenMP threads (a search, a mining run's neighbours) and the numeric libraries' BLAS
    pools (numpy's, through threadpoolctl); None: the defaults, one per core. On a machine busy with other work,
    spinning threads compete with it, and 1 thread can be several times faster (benchmarks/cpu_threads.py,
    docs/defaults.md; issue 96: ``threads=1`` left FAISS on every core, a 2.7 ms search took 20 ms)."""
    if threads is None:
        return
    check_threads(threads)
    import faiss
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    threadpool_limits(limits=threads, user_api="blas")  # kept for the process (not a context: the job's setting)
    _THREADS[:] = [threads]


def cpu_threads() -> int | None:
    """The thread count :func:`set_threads` set in this process, or None (the runtimes' defaults)."""
    return _THREADS[0] if _THREADS else None


_OPENMP: list = []  # threadpoolctl's controller of the OpenMP libraries loaded (made once, after torch loads)


def one_thread():
    """A context in which this thread's OpenMP regions (PyTorch's, oneDNN's) run on one thread, restored after:
    OpenMP's thread count is per calling thread, so no other thread's setting moves (threadpoolctl). For one short
    input (a query under bf16 on a CPU: :mod:`hmde.encoders.cpu_bf16`), where waking other threads costs more than
    they save."""
    if not _OPENMP:
        from threadpoolctl import ThreadpoolController

        _OPENMP.append(ThreadpoolController().select(user_api="openmp"))
    return _OPENMP[0].limit(limits=1)
