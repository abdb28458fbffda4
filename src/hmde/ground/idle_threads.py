"""Idle threads sleep instead of spinning, in every hmde process: set before the libraries that read it load, never
over the user's own setting.

- ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP: PyTorch's operators, FAISS's searches; read when torch loads): on a machine
  busy with other work, spinning threads slowed ``hmde encode`` of 20 articles from 10.3 s to 17.1 s, and cost
  nothing on an idle one (6.1 s vs 6.0 s; benchmarks/cpu_threads.py, docs/defaults.md).
- ``OPENBLAS_THREAD_TIMEOUT=4`` (OpenBLAS, numpy's and FAISS's BLAS; read when each library loads): after a product
  OpenBLAS's threads otherwise spin for about 2^28 cycles (0.1 s) before they sleep, on the cores FAISS's next
  search needs. A calibrated search at 50k sentences on two threads, whose few small products sit between FAISS
  calls, took 21.5 ms instead of 7.7 (issue 96; docs/speed.md). 4 is OpenBLAS's shortest wait (2^4 cycles).
  numpy's OpenBLAS reads it when numpy loads: the command line, ``hmde serve`` and a script that imports hmde
  before numpy have it; a script that imports numpy first sets ``OPENBLAS_THREAD_TIMEOUT=4`` itself (docs/speed.md).
  Changing BLAS's thread count around each search instead does not work from many threads: threadpoolctl lets one
  Python thread control OpenBLAS's count and ignores the others.
"""

from __future__ import annotations

import os
import sys

SETTINGS = (("OMP_WAIT_POLICY", "PASSIVE", "torch"), ("OPENBLAS_THREAD_TIMEOUT", "4", None))


def sleeping_idle_threads() -> None:
    """Set each variable of :data:`SETTINGS` the user has not set, where the library it reaches has not loaded yet
    (OpenBLAS: always, since FAISS's own copy loads with FAISS, after numpy's)."""
    for name, value, loaded in SETTINGS:
        if loaded is None or loaded not in sys.modules:
            os.environ.setdefault(name, value)
