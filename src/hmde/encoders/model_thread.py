"""One thread of the process runs every model call of hmde's in-process users (:data:`MODEL_THREAD`), and
concurrent calls of one encoding are gathered into one model call there (:class:`GatheredCalls`).

Why one thread: a model is one set of weights and one tokenizer; eight threads calling it at once share two cores
and a tokenizer that is not made for it, and are no faster (docs/defaults.md, "CPU threads on a shared machine").
Why gathered: sixteen callers' one-query searches are one batch of sixteen queries, as the server's batcher makes
them (:mod:`hmde.serve.batcher`): while the model thread is busy, the calls that arrive wait together, and the next
model call takes them all (issue 92).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

MODEL_THREAD_NAME = "hmde-model"
MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix=MODEL_THREAD_NAME)
GATHERED_TEXTS = 64  # texts of several callers in one model call at most (the server's batch)


def on_model_thread() -> bool:
    return threading.current_thread().name.startswith(MODEL_THREAD_NAME)


def run_on_model_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` on the model thread (called from it: at once)."""
    if on_model_thread():
        return function(*args, **kwargs)
    return MODEL_THREAD.submit(function, *args, **kwargs).result()


class GatheredCalls:
    """``function(texts) -> rows`` (an array or a list, one row per text) for any number of threads at once: each
    caller's texts wait in one list, and each model-thread turn takes every caller waiting (up to
    :data:`GATHERED_TEXTS` texts) into one call, then hands each its rows."""

    def __init__(self, function: Callable[[list], object], limit: int = GATHERED_TEXTS):
        self.function, self.limit = function, limit
        self._waiting: list[tuple[list, Future]] = []
        self._lock = threading.Lock()

    def submit(self, texts) -> Future:
        """A future of ``texts``' rows."""
        texts, future = list(texts), Future()
        with self._lock:
            self._waiting.append((texts, future))
        MODEL_THREAD.submit(self._turn)  # one turn per caller: a turn that finds nothing waiting ends at once
        return future

    def __call__(self, texts):
        if on_model_thread():  # a call made from the model thread itself runs there now (its turn would wait on it)
            return self.function(list(texts))
        return self.submit(texts).result()

    async def awaiting(self, texts):
        return await asyncio.wrap_future(self.submit(texts))

    def _turn(self) -> None:
        with self._lock:
            taken, size = [], 0
            while self._waiting and (not taken or size + len(self._waiting[0][0]) <= self.limit):
                texts, future = self._waiting.pop(0)
                if future.set_running_or_notify_cancel():  # False: the caller went away (a cancelled task)
                    taken.append((texts, future))
                    size += len(texts)
        if not taken:
            return
        try:
            rows = self.function([t for texts, _ in taken for t in texts])
        except BaseException as exc:  # every caller of the call learns why
            for _, future in taken:
                future.set_exception(exc)
            return
        start = 0
        for texts, future in taken:
            future.set_result(rows[start:start + len(texts)])
            start += len(texts)


class OnModelThread:
    """A document vectorizer whose model calls run on the model thread (an index write from any thread)."""

    def __init__(self, vectorizer):
        self._vectorizer = vectorizer

    def encode_with_sentences(self, *args, **kwargs):
        return run_on_model_thread(self._vectorizer.encode_with_sentences, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._vectorizer, name)
