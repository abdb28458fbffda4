"""What every door of an hmde index promises to an application with many callers (issue 92), as one test class that
each door and store subclasses (as tests/store_contract.py does for the stores): one object shared by 64 threads and
asyncio tasks at once, mixed with writers, gives 0 errors, every read equal to the same read made alone, and keeps
every committed write; two processes racing on one folder (creating it, adding to it, one id under a duplicate
policy) get what the door promises, 20 rounds of 20; a writer killed with SIGKILL while readers read leaves them the
version before or after, and never an error.

A subclass sets ``door`` (a name of :data:`DOORS`: hmde.Index, LangChain, LlamaIndex, Haystack) and ``store``
("local" or "milvus"). The model is the tiny random hmde folder of tests/conftest.py: what is tested is the sharing,
not the ranking (tests/store_contract.py tests that).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

BASE = 24  # documents the readers search (tagged batch == "base": writers' documents never match their filter)
QUERIES = ["the cat sat on the mat", "Economic growth slowed", "Die Katze saß auf der Matte", "un día soleado",
           "the football team won the final", "a new species of frog", "猫はマットの上", "Кошка сидела"]
TOPICS = ["The cat sat on the mat.", "Economic growth slowed in the third quarter.", "Die Katze saß auf der Matte.",
          "Era un día soleado en la ciudad.", "The football team won the championship.",
          "Researchers discovered a new species of frog.", "猫はマットの上に座った。", "Кошка сидела на коврике."]


def base_documents() -> list[dict]:
    return [{"doc_id": f"base-{i:02d}", "text": f"{TOPICS[i % 8]} Item {i} of the base set. {TOPICS[(i * 3) % 8]}",
             "batch": "base"} for i in range(BASE)]


def new_documents(tag: str, n: int) -> list[dict]:
    return [{"doc_id": f"{tag}-{i:03d}", "text": f"{TOPICS[i % 8]} Written by {tag}, number {i}.", "batch": tag}
            for i in range(n)]


# -- the doors: each as the framework's own calls, over one object ----------------------------------------------------
class Door:
    """One object of a door over the index at ``path``: ``write`` (documents), ``search`` and ``asearch`` (the ids of
    the k best base documents), ``ids`` (every id held), ``get`` (texts of ids)."""

    def __init__(self, path: str, model: str, settings: dict):
        self.path, self.model, self.settings = path, model, settings


class IndexDoor(Door):
    def open(self):
        import hmde
        from hmde.integrations.client import shared_model

        name, kind, loaded, device = shared_model(self.model, "cpu")  # loaded once per process, as a server would
        self.index = hmde.Index.open_or_create(self.path, name, kind, loaded, device, **self.settings)
        return self

    def write(self, docs, mode="upsert"):
        return self.index.write([{"doc_id": d["doc_id"], "text": d["text"], "batch": d["batch"]} for d in docs], mode)

    def search(self, query, k=5):
        return [(h.doc_id, h.score) for h in self.index.search(query, top_k=k, filter='batch == "base"')[0]]

    async def asearch(self, query, k=5):
        return await asyncio.to_thread(self.search, query, k)

    def ids(self):
        return sorted(d["doc_id"] for d in self.index.documents())

    def get(self, ids):
        return {d["doc_id"]: d["text"] for d in self.index.documents(ids)}

    def close(self):
        self.index.close()


class LangChainDoor(Door):
    def open(self):
        from hmde.integrations.langchain import HmdeVectorStore

        self.store = HmdeVectorStore(index=self.path, model=self.model, **self.settings)
        return self

    def write(self, docs, mode="upsert"):
        return len(self.store.add_texts([d["text"] for d in docs], [{"batch": d["batch"]} for d in docs],
                                        ids=[d["doc_id"] for d in docs]))

    def search(self, query, k=5):
        found = self.store.similarity_search_with_relevance_scores(query, k=k, filter={"batch": "base"})
        return [(d.id, score) for d, score in found]

    async def asearch(self, query, k=5):
        found = await self.store.asimilarity_search_with_relevance_scores(query, k=k, filter={"batch": "base"})
        return [(d.id, score) for d, score in found]

    def ids(self):
        return sorted(d["doc_id"] for d in self.store.client.documents())

    def get(self, ids):
        return {d.id: d.page_content for d in self.store.get_by_ids(ids)}

    def close(self):
        self.store.close()


class LlamaIndexDoor(Door):
    def open(self):
        from hmde.integrations.llama_index import HmdeVectorStore

        self.store = HmdeVectorStore(index=self.path, model=self.model, **self.settings)
        return self

    def write(self, docs, mode="upsert"):
        from llama_index.core.schema import TextNode

        return len(self.store.add([TextNode(id_=d["doc_id"], text=d["text"], metadata={"batch": d["batch"]})
                                   for d in docs]))

    def _query(self, query, k):
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

        return VectorStoreQuery(query_str=query, similarity_top_k=k,
                                filters=MetadataFilters(filters=[MetadataFilter(key="batch", value="base")]))

    def search(self, query, k=5):
        found = self.store.query(self._query(query, k))
        return list(zip(found.ids, found.similarities))

    async def asearch(self, query, k=5):
        found = await self.store.aquery(self._query(query, k))
        return list(zip(found.ids, found.similarities))

    def ids(self):
        return sorted(n.node_id for n in self.store.get_nodes())

    def get(self, ids):
        return {n.node_id: n.get_content() for n in self.store.get_nodes(node_ids=list(ids))}

    def close(self):
        self.store.client.close()


class HaystackDoor(Door):
    FILTER = {"field": "meta.batch", "operator": "==", "value": "base"}

    def open(self):
        from hmde.integrations.haystack import HmdeDocumentStore

        self.store = HmdeDocumentStore(index=self.path, model=self.model, **self.settings)
        return self

    def write(self, docs, mode="upsert"):
        from haystack import Document
        from haystack.document_stores.types import DuplicatePolicy

        policy = {"upsert": DuplicatePolicy.OVERWRITE, "add": DuplicatePolicy.FAIL, "skip": DuplicatePolicy.SKIP}[mode]
        return self.store.write_documents([Document(id=d["doc_id"], content=d["text"], meta={"batch": d["batch"]})
                                           for d in docs], policy)

    def search(self, query, k=5):
        return [(d.id, d.score) for d in self.store.search(query, k, self.FILTER)]

    async def asearch(self, query, k=5):
        from hmde.integrations.haystack import HmdeRetriever

        found = await HmdeRetriever(document_store=self.store, top_k=k).run_async(query, filters=self.FILTER)
        return [(d.id, d.score) for d in found["documents"]]

    def ids(self):
        return sorted(d.id for d in self.store.filter_documents())

    def get(self, ids):
        wanted = {"field": "id", "operator": "in", "value": list(ids)}
        return {d.id: d.content for d in self.store.filter_documents(wanted)}

    def close(self):
        self.store.client.close()


def same_ranking(got, reference, tolerance: float = 1e-5) -> bool:
    """Whether a ranking of (id, score) equals the reference: the same scores (to ``tolerance``, or 1% of a small
    relevance: queries embedded together with other callers' may differ in their last bits, and a relevance reads
    them through the spread of the query's candidates), and the same ids in the same order, except that documents
    whose scores tie may come in any order (and a tie at the cut may bring another of the tied)."""
    import math

    def close(a, b):
        return math.isclose(a, b, rel_tol=1e-2, abs_tol=tolerance)

    if len(got) != len(reference) or not all(close(a[1], b[1]) for a, b in zip(got, reference)):
        return False
    start = 0
    while start < len(reference):
        end = start + 1
        while end < len(reference) and abs(reference[end][1] - reference[end - 1][1]) <= tolerance:
            end += 1
        if end < len(reference) and {x for x, _ in got[start:end]} != {x for x, _ in reference[start:end]}:
            return False
        start = end
    return True


DOORS = {"index": IndexDoor, "langchain": LangChainDoor, "llama_index": LlamaIndexDoor, "haystack": HaystackDoor}

# -- a child process of the races: one door, rounds at a barrier of files -----------------------------------------------
RACER = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, {tests!r})
    from concurrency_contract import DOORS, new_documents
    door, race, folder, model, settings, tag, rounds = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4],
                                                        json.loads(sys.argv[5]), sys.argv[6], int(sys.argv[7]))
    import hmde.encoders.model_loading  # everything imported before the first barrier
    for k in range(rounds):
        for race_ in race.split(","):  # several races, one process start (each race its own index folder)
            path = os.path.join(folder, f"idx{{k}}-{{race_}}")
            open(os.path.join(folder, f"ready-{{k}}-{{race_}}-{{tag}}"), "w").close()
            while len([n for n in os.listdir(folder) if n.startswith(f"ready-{{k}}-{{race_}}-")]) < 2:
                time.sleep(0.001)
            try:
                opened = DOORS[door](path, model, settings).open()
                if race_ == "create":  # both make the same new index and write their own documents
                    written = opened.write(new_documents(tag, 5))
                else:  # one id: the policy decides (add: one refused; skip: one passed over; upsert: one replaces)
                    written = opened.write([{{"doc_id": "race", "text": f"written by {{tag}}", "batch": tag}}],
                                           race_)
                opened.close()
                print(json.dumps({{"round": k, "race": race_, "written": written}}), flush=True)
            except Exception as exc:
                print(json.dumps({{"round": k, "race": race_, "error": type(exc).__name__,
                                   "message": str(exc)[:300]}}), flush=True)
""")


class ConcurrencyContract:
    door = "index"
    store = "local"
    readers = 64  # callers at once: half threads, half asyncio tasks
    race_rounds = 20

    def settings(self, tmp_path) -> dict:
        settings = {"language_debias": ""}  # a base document's score then depends on the base documents alone
        if self.store == "milvus":
            pytest.importorskip("milvus_lite", reason="the Milvus store needs the extra: pip install 'hmde[milvus]'")
            settings["store"] = f"milvus:{tmp_path / 'milvus.db'}"
        return settings

    def opened(self, path, model, settings):
        return DOORS[self.door](str(path), str(model), settings).open()

    def test_many_callers_at_once_equal_the_same_calls_one_after_another(self, hmde_dir, tmp_path):
        door = self.opened(tmp_path / "idx", hmde_dir, self.settings(tmp_path))
        try:
            door.write(base_documents())
            reference = {q: door.search(q) for q in QUERIES}
            texts = door.get([d["doc_id"] for d in base_documents()])
            assert len(texts) == BASE and all(reference.values())
            errors, mismatches, reads = [], [], [0]
            lock = threading.Lock()
            writers = [f"w{i}" for i in range(4)]

            def check(query, got):
                with lock:
                    reads[0] += 1
                    if not same_ranking(got, reference[query]):
                        mismatches.append((query, got, reference[query]))

            def thread_reader(i):
                rng = random.Random(i)
                for _ in range(3):
                    try:
                        query = rng.choice(QUERIES)
                        check(query, door.search(query))
                        if rng.random() < 0.5:
                            assert door.get(list(texts)[:5]) == {x: texts[x] for x in list(texts)[:5]}
                    except Exception as exc:  # noqa: BLE001 - every error is a failure of the promise
                        errors.append(f"{type(exc).__name__}: {exc}")

            async def task_reader(i):
                rng = random.Random(1000 + i)
                for _ in range(3):
                    try:
                        query = rng.choice(QUERIES)
                        check(query, await door.asearch(query))
                    except Exception as exc:  # noqa: BLE001
                        errors.append(f"{type(exc).__name__}: {exc}")

            def writer(tag):
                try:
                    for part in range(2):
                        door.write(new_documents(f"{tag}p{part}", 3))
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"writer {tag}: {type(exc).__name__}: {exc}")

            async def tasks():
                await asyncio.gather(*(task_reader(i) for i in range(self.readers // 2)))

            with ThreadPoolExecutor(self.readers // 2 + len(writers)) as pool:
                started = [pool.submit(writer, tag) for tag in writers]
                started += [pool.submit(thread_reader, i) for i in range(self.readers // 2)]
                asyncio.run(tasks())
                for future in started:
                    future.result()
            assert not errors, errors[:5]
            assert not mismatches, mismatches[:3]
            assert reads[0] == 3 * self.readers
            written = sorted(d["doc_id"] for tag in writers for p in range(2) for d in new_documents(f"{tag}p{p}", 3))
            assert door.ids() == sorted([d["doc_id"] for d in base_documents()] + written)  # no committed write lost
        finally:
            door.close()

    # -- two processes racing on one folder ---------------------------------------------------------------------------
    def race(self, tmp_path, hmde_dir, race: str) -> list[list[dict]]:
        if self.store == "milvus":  # an open index holds its Lite folder: a second process waits, then gives up
            pytest.skip("Milvus Lite serves a folder to one process at a time (a Milvus server serves many: "
                        "hmde's client code is the same)")
        folder = tmp_path / "races"
        folder.mkdir()
        settings = self.settings(tmp_path)
        procs = [subprocess.Popen([sys.executable, "-c", RACER.format(tests=os.path.dirname(__file__)), self.door,
                                   race, str(folder), str(hmde_dir), json.dumps(settings), tag,
                                   str(self.race_rounds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for tag in ("a", "b")]
        outcomes = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-2000:]
            outcomes.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
        assert all(len(o) == self.race_rounds * len(race.split(",")) for o in outcomes), outcomes
        return outcomes

    def held(self, tmp_path, hmde_dir, k: int, race: str):
        door = self.opened(tmp_path / "races" / f"idx{k}-{race}", hmde_dir, self.settings(tmp_path))
        try:
            return door.ids(), door.get(["race"])
        finally:
            door.close()

    def test_two_processes_making_one_new_index_both_write_into_it(self, hmde_dir, tmp_path):
        a, b = self.race(tmp_path, hmde_dir, "create")
        assert [r.get("error") for r in a + b] == [None] * (2 * self.race_rounds), [r for r in a + b if "error" in r]
        expected = sorted(d["doc_id"] for tag in "ab" for d in new_documents(tag, 5))
        for k in range(self.race_rounds):
            assert self.held(tmp_path, hmde_dir, k, "create")[0] == expected, k


class DuplicatePolicyRaces:
    """The duplicate policies raced by two processes (a door that has them: Haystack's FAIL and SKIP; upsert for
    every door)."""

    policies = ("add", "skip", "upsert")

    def test_two_processes_writing_one_id_get_exactly_what_each_policy_promises(self, hmde_dir, tmp_path):
        a, b = self.race(tmp_path, hmde_dir, ",".join(self.policies))  # 20 rounds of each, one pair of processes
        for x, y in zip(a, b):
            k, policy = x["round"], x["race"]
            assert (y["round"], y["race"]) == (k, policy)
            ids, texts = self.held(tmp_path, hmde_dir, k, policy)
            assert ids == ["race"], (k, ids)
            if policy == "add":  # one written, one refused with the framework's duplicate error
                assert [x.get("error"), y.get("error")].count(None) == 1, (k, x, y)
                assert {x.get("error"), y.get("error")} == {None, self.duplicate_error}, (k, x, y)
                winner = "a" if "error" not in x else "b"
            elif policy == "skip":  # one written, one passed over
                assert sorted([x["written"], y["written"]]) == [0, 1], (k, x, y)
                winner = "a" if x["written"] == 1 else "b"
            else:  # both written; the one committed last is held
                assert "error" not in x and "error" not in y, (k, x, y)
                winner = texts["race"][-1]
            assert texts == {"race": f"written by {winner}"}, (k, texts, x, y)


KILLED = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from concurrency_contract import DOORS, new_documents
    door = DOORS[sys.argv[1]](sys.argv[2], sys.argv[3], json.loads(sys.argv[4])).open()
    print("ready", flush=True)
    door.write(new_documents("killed", 40))
    print("done", flush=True)
""")


class KilledWriterContract:
    """A writer killed with SIGKILL while threads of this process read: they read on without an error, each read sees
    the version before or after, and so does the next one."""

    def test_a_writer_killed_during_concurrent_reads_leaves_the_version_before_or_after(self, hmde_dir, tmp_path):
        path, settings = tmp_path / "idx", self.settings(tmp_path)
        door = self.opened(path, hmde_dir, settings)
        door.write(base_documents())
        before = tuple(door.ids())
        after = tuple(sorted(before + tuple(d["doc_id"] for d in new_documents("killed", 40))))
        reference = {q: door.search(q) for q in QUERIES}
        errors, seen, stop = [], set(), threading.Event()

        def reader(i):
            rng = random.Random(i)
            while not stop.is_set():
                try:
                    query = rng.choice(QUERIES)
                    assert same_ranking(door.search(query), reference[query]), (query, reference[query])
                    seen.add(tuple(door.ids()))
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        try:
            for trial in range(3):  # a writer of 40 documents, killed part way (or after its commit)
                proc = subprocess.Popen([sys.executable, "-c", KILLED.format(tests=os.path.dirname(__file__)),
                                         self.door, str(path), str(hmde_dir), json.dumps(settings)],
                                        stdout=subprocess.PIPE, text=True)
                assert proc.stdout.readline().strip() == "ready"
                time.sleep(random.Random(trial).uniform(0.0, 1.5))
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
            final = tuple(door.ids())
            door.close()
        assert not errors, errors[:5]
        assert seen and seen <= {before, after}, [len(x) for x in seen]
        assert final in (before, after)
