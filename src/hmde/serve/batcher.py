"""Concurrent requests gathered into model batches.

Each request puts its texts in one queue and waits. One loop takes the first waiting job, every job
queued behind it (those that came while the model was busy: under load, batches form by themselves),
then whatever else arrives within ``max_wait_ms``, up to ``max_batch`` texts, groups the jobs by what
they ask (document method or query path: one model call per group) and runs the model in one worker
thread, so the event loop keeps accepting requests while the model works. The queue is bounded in
texts; a request that would overflow it is refused at once (:class:`Overloaded`, a 503 upstream)
rather than waiting without end.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np


class Overloaded(Exception):
    """The queue holds as many texts as it may: come back later."""


@dataclass
class Job:
    key: Hashable  # what the texts go through: one model call per key and batch
    texts: list
    langs: list
    future: asyncio.Future


EncodeFn = Callable[[Hashable, list, list], np.ndarray]
BatchObserver = Callable[[int, float], None]  # (texts in the model call, seconds it took)


class Batcher:
    def __init__(self, encode: EncodeFn, executor: ThreadPoolExecutor, max_batch: int = 64,
                 max_wait_ms: float = 0.0, max_queue: int = 4096, observe: BatchObserver | None = None):
        self.encode, self.executor = encode, executor
        self.max_batch, self.max_wait, self.max_queue = max_batch, max_wait_ms / 1000.0, max_queue
        self.observe = observe
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.waiting = 0  # texts queued or being embedded
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def submit(self, key: Hashable, texts: Sequence, langs: Sequence) -> np.ndarray:
        """The texts' vectors, in order, once their batch has run; :class:`Overloaded` at once when the
        queue is full."""
        texts = list(texts)
        if self.waiting + len(texts) > self.max_queue and self.waiting > 0:
            raise Overloaded
        job = Job(key, texts, list(langs), asyncio.get_running_loop().create_future())
        self.waiting += len(texts)
        self.queue.put_nowait(job)
        try:
            return await job.future
        finally:
            self.waiting -= len(texts)

    async def _gather(self) -> list[Job]:
        """The first waiting job, every job queued behind it (requests that came while the model was busy),
        then whatever arrives within ``max_wait``, up to ``max_batch`` texts."""
        jobs = [await self.queue.get()]
        size = len(jobs[0].texts)
        deadline = time.perf_counter() + self.max_wait
        while size < self.max_batch:
            try:
                job = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self.queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
            jobs.append(job)
            size += len(job.texts)
        return jobs

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._gather()
            groups: dict = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for key, group in groups.items():
                group = [j for j in group if not j.future.cancelled()]  # a client that went away
                if not group:
                    continue
                texts = [t for j in group for t in j.texts]
                langs = [lang for j in group for lang in j.langs]
                started = time.perf_counter()
                try:
                    vectors = await loop.run_in_executor(self.executor, self.encode, key, texts, langs)
                except Exception as exc:  # every waiting request learns why
                    for j in group:
                        if not j.future.done():
                            j.future.set_exception(exc)
                    continue
                if self.observe is not None:
                    self.observe(len(texts), time.perf_counter() - started)
                start = 0
                for j in group:
                    if not j.future.done():
                        j.future.set_result(vectors[start:start + len(j.texts)])
                    start += len(j.texts)
