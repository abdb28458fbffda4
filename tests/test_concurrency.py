"""Many callers on one index (issue 92): the promises of tests/concurrency_contract.py for hmde.Index and the three
framework stores, over hmde's own files and Milvus; the model thread's gathering and the writer lock's bounded wait."""

from __future__ import annotations

import threading
import time

import pytest

from concurrency_contract import ConcurrencyContract, DuplicatePolicyRaces, KilledWriterContract


class TestIndexLocal(ConcurrencyContract, DuplicatePolicyRaces, KilledWriterContract):
    door, store = "index", "local"
    duplicate_error = "DuplicateIds"


class TestIndexMilvus(ConcurrencyContract):
    door, store = "index", "milvus"


class TestLangChainLocal(ConcurrencyContract, DuplicatePolicyRaces):
    door, store = "langchain", "local"
    policies = ("upsert",)  # LangChain's ids: a known one is replaced


class TestLangChainMilvus(ConcurrencyContract):
    door, store = "langchain", "milvus"


class TestLlamaIndexLocal(ConcurrencyContract, DuplicatePolicyRaces):
    door, store = "llama_index", "local"
    policies = ("upsert",)  # LlamaIndex's node ids: a known one is replaced


class TestLlamaIndexMilvus(ConcurrencyContract):
    door, store = "llama_index", "milvus"


class TestHaystackLocal(ConcurrencyContract, DuplicatePolicyRaces):
    door, store = "haystack", "local"
    duplicate_error = "DuplicateDocumentError"


class TestHaystackMilvus(ConcurrencyContract):
    door, store = "haystack", "milvus"


def test_callers_waiting_while_the_model_works_are_embedded_in_one_call():
    from hmde.encoders.model_thread import MODEL_THREAD, GatheredCalls

    calls, release = [], threading.Event()
    gathered = GatheredCalls(lambda texts: (calls.append(list(texts)), [t.upper() for t in texts])[1], limit=64)
    MODEL_THREAD.submit(release.wait, 30)  # the model thread busy: the callers below wait together
    results = {}

    def caller(i):
        results[i] = gathered([f"q{i}a", f"q{i}b"])

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert results == {i: [f"Q{i}A", f"Q{i}B"] for i in range(8)}  # each caller its own rows, in order
    assert len(calls) == 1 and len(calls[0]) == 16


def test_a_gathered_call_that_fails_tells_each_of_its_callers_and_a_cancelled_one_is_passed_over():
    import asyncio

    from hmde.encoders.model_thread import MODEL_THREAD, GatheredCalls

    def fail(texts):
        raise ValueError(f"bad batch of {len(texts)}")

    with pytest.raises(ValueError, match="bad batch of 1"):
        GatheredCalls(fail)(["x"])

    async def cancelled_then_served():
        release = threading.Event()
        gathered = GatheredCalls(lambda texts: list(texts))
        MODEL_THREAD.submit(release.wait, 30)
        gone = asyncio.ensure_future(gathered.awaiting(["gone"]))
        kept = asyncio.ensure_future(gathered.awaiting(["kept"]))
        await asyncio.sleep(0.05)
        gone.cancel()
        release.set()
        return await kept

    assert asyncio.run(cancelled_then_served()) == ["kept"]


def test_a_writer_waits_for_another_threads_write_bounded_and_names_the_lock(tmp_path, monkeypatch):
    from hmde.errors import HmdeError
    from hmde.ground.locks import exclusive_writer

    held, done = threading.Event(), threading.Event()

    def holder():
        with exclusive_writer(tmp_path / "idx"):
            held.set()
            done.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(30)
    try:
        monkeypatch.setenv("HMDE_LOCK_TIMEOUT", "0.3")
        started = time.monotonic()
        with pytest.raises(HmdeError) as refused:
            with exclusive_writer(tmp_path / "idx"):
                pass
        assert 0.25 < time.monotonic() - started < 5
        message = str(refused.value)
        assert "waited 0.3 s for the writer lock of" in message and ".idx.write.lock" in message
        assert "another thread of this process" in message and "\n" not in message
    finally:
        done.set()
        thread.join(30)
    with exclusive_writer(tmp_path / "idx"):  # free again once the holder has ended; re-entrant in one thread
        with exclusive_writer(tmp_path / "idx"):
            pass


def test_a_ranking_equals_its_reference_up_to_ties_alone():
    from concurrency_contract import same_ranking

    reference = [("a", 0.9), ("b", 0.8), ("c", 0.8), ("d", 0.5), ("e", 0.4), ("f", 0.4)]
    assert same_ranking(list(reference), reference)
    assert same_ranking([("a", 0.9), ("c", 0.8), ("b", 0.8000001), ("d", 0.5), ("f", 0.4), ("g", 0.4)], reference)
    assert not same_ranking([("b", 0.9), ("a", 0.8), ("c", 0.8), ("d", 0.5), ("e", 0.4), ("f", 0.4)], reference)
    assert not same_ranking([("a", 0.9), ("b", 0.8), ("d", 0.8), ("c", 0.5), ("e", 0.4), ("f", 0.4)], reference)
    assert not same_ranking(reference[:5], reference)
