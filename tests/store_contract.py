"""The promises every store of an hmde index keeps (issue 61), as one test class that each store's tests subclass
with a fixture (as Haystack's ``DocumentStoreBaseTests``): writes, upserts, deletes and counts; metadata kept and
returned; filters pushed down (the top-k of the matching documents); the same ranking as a brute-force reference of
hmde's scoring (the language subspace, the query-language calibration, best sentences + document vector); and
commits: a writer killed at any moment leaves the version before or the one after.

A subclass defines ``store_meta(self, path) -> dict``: the fields of ``index.json`` that put an index at ``path``
in its store (``{}``: hmde's own files).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from hmde.index.filter_eval import matches
from hmde.index.filters import parse
from hmde.index.store import DocumentBatch, DocumentIndex, IndexMeta

DIM = 16
LANGS = ("eng", "deu", "fra")
SECTIONS = ("sport", "politics", "science")


def world(n: int = 36, seed: int = 0, version: int = 0) -> list[dict]:
    """Documents in three languages (each with its own offset: a language subspace to remove), 2-4 sentences each,
    metadata of every kind (missing keys, a number written as a string, booleans)."""
    rng = np.random.default_rng(seed)
    offsets = {lang: rng.normal(size=DIM) * 0.6 for lang in LANGS}
    docs = []
    for i in range(n):
        lang = LANGS[i % 3]
        count = 2 + i % 3
        sentences = rng.normal(size=(count, DIM)) + offsets[lang]
        sentences /= np.linalg.norm(sentences, axis=1, keepdims=True)
        meta = {"section": SECTIONS[i % 3 if i % 4 else (i + 1) % 3], "year": 2015 + i % 9,
                "date": f"2024-{1 + i % 12:02d}-{1 + i % 27:02d}"}
        if i % 5 == 0:
            meta["year"] = str(meta["year"])  # a number written as a string: no numeric comparison
        if i % 4 == 0:
            meta["breaking"] = i % 8 == 0
        if i % 7 == 0:
            del meta["section"]
        if i % 3 == 0:  # true beside 1, false beside 0: Milvus took true for 1 (issue 77)
            meta["flag"] = (True, 1, False, 0, 1.0)[i // 3 % 5]
        meta["score"] = (5, -1.7e308, 2.5, "5", 1e308, -3)[i % 6]  # a number below -1e308 was lost by != on Milvus
        docs.append({"doc_id": f"d{i:03d}", "lang": lang, "metadata": meta,
                     "sentences": [f"v{version} sentence {j} of d{i:03d}" for j in range(count)],
                     "text": " ".join(f"v{version} sentence {j} of d{i:03d}" for j in range(count)),
                     "sentence_vectors": sentences.astype(np.float32)})
    return docs


def batch(docs) -> DocumentBatch:
    vectors = np.stack([d["sentence_vectors"].mean(0) for d in docs]).astype(np.float32)
    return DocumentBatch([d["doc_id"] for d in docs], [d["lang"] for d in docs], [d["text"] for d in docs], vectors,
                         [d["sentences"] for d in docs], [d["sentence_vectors"] for d in docs],
                         [d["metadata"] for d in docs])


def meta_for(debias: str, multi_vector: bool = True, **store) -> IndexMeta:
    return IndexMeta(model="synthetic", model_sha256=None, dim=DIM, method="mean", index_type="flat", count=0,
                     multi_vector=multi_vector, sentence_vectors="lower" if multi_vector else "",
                     language_debias=debias, **store)


# -- the reference: hmde's scoring, by brute force over every vector ------------------------------------------
def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def reference(docs, q, top_k, debias, multi, top_sentences=1, doc_weight=0.5, query_lang=None, tree=None):
    """The documented ranking over ``docs`` (all live, in row order), computed from the raw vectors."""
    from hmde.text.coverage import language_code

    sentences = {lang: np.concatenate([d["sentence_vectors"] for d in docs if d["lang"] == lang]).astype(np.float64)
                 for lang in LANGS if any(d["lang"] == lang for d in docs)}
    basis = np.zeros((0, DIM))
    if debias and len(sentences) >= 2:
        means = np.stack([v.mean(0) for v in sentences.values() if len(v) >= 20])
        _, s, vt = np.linalg.svd(means - means.mean(0), full_matrices=False)
        basis = vt[s > 1e-6 * s.max()]
    q = _unit(np.asarray(q, np.float64))
    q = _unit(q - q @ basis.T @ basis)

    def cos(v):
        v = np.asarray(v, np.float64)
        return (v @ q) / np.sqrt(np.maximum((v * v).sum(1) - ((v @ basis.T) ** 2).sum(1), 1e-6))

    def score(d):
        doc = cos(_unit(d["sentence_vectors"].mean(0).astype(np.float32))[None].astype(np.float64))[0]
        if not multi:
            return doc
        return np.sort(cos(d["sentence_vectors"]))[::-1][:top_sentences].sum() + doc_weight * doc

    scores = {d["doc_id"]: score(d) for d in docs}
    chosen = [d for d in docs if tree is None or matches(tree, d["doc_id"], d["lang"], d["metadata"])]
    if debias == "subspace+calibrate" and query_lang and len({language_code(x) for x in sentences}) >= 2:
        baseline = np.mean(list(scores.values()))  # the sample is every live document below 256
        top = max(scores[d["doc_id"]] for d in chosen) if chosen else 0.0
        strength = max(top - baseline, 0.0)
        scores = {d["doc_id"]: scores[d["doc_id"]] - 0.15 * strength * (language_code(d["lang"]) ==
                                                                          language_code(query_lang)) for d in docs}
    ranked = sorted(chosen, key=lambda d: -scores[d["doc_id"]])[:top_k]
    return [(d["doc_id"], float(scores[d["doc_id"]])) for d in ranked]


def ids_of(index, rows) -> list[str]:
    records = index.records(list(rows)) if len(rows) else {}
    return sorted(records[r][0] for r in rows)


FILTERS = [None, 'section == "sport"', 'year > 2018 and not (section == "politics")', 'breaking != true',
           'section not in ["sport", "science"] or lang == "fra"', 'date >= "2024-06-01"', 'year != 2019',
           'year in [2016, "2020", 2023]', 'not (breaking == false)', 'doc_id in ["d001", "d004", "d030"]',
           'flag == true', 'not flag == false', 'flag != 1', 'flag > 0', 'score != 5', 'score < 0 or score == "5"',
           # kind tests, and comparisons they guard (never refused: false where the field is absent or of another kind)
           'flag is boolean', 'score is not number', 'section is null', 'breaking is not null and not breaking == true',
           'not (year is number and year == 2019)', 'nope is number and nope > 3 or lang is string',
           'flag is number and flag == 1 or doc_id is null',
           # as deep as a filter may nest (32 levels), alternating or / and / not
           "(" * 10 + "".join(f'year != {2000 + i} and (section == "sport" or (not ' for i in range(7))
           + "flag == true" + ")" * 14 + ")" * 10 + ' or score > 2']

CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    from store_contract import world, batch, meta_for
    from hmde.index.mutations import delete_documents
    from hmde.index.store import DocumentIndex
    op, path, version, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    docs = world(n, seed=version, version=version)
    print("ready", flush=True)
    started = time.perf_counter()
    if op in ("upsert", "overwrite"):
        batches = [batch(docs[i:i + 500]) for i in range(0, n, 500)]
        meta = meta_for("subspace+calibrate", **json.loads(sys.argv[5]))
        DocumentIndex.write_batches(path, meta, iter(batches), add=op == "upsert", replace=True).close()
    else:
        delete_documents(path, [d["doc_id"] for d in docs[::version]], ignore_missing=True)
    print(f"done {{time.perf_counter() - started:.4f}}", flush=True)
""")


def run_writer(arguments: list[str], kill_after: float | None = None) -> float | None:
    """:data:`CHILD` with ``arguments``: its write's duration, or (``kill_after``) SIGKILL that many seconds after it is
    ready."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=os.path.dirname(__file__)), *arguments],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    if kill_after is None:
        line = proc.stdout.readline()
        assert proc.wait(timeout=300) == 0
        return float(line.split()[1])
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return None


class StoreContract:
    """Subclass with ``store_meta(self, path) -> dict``."""

    def store_meta(self, path) -> dict:
        raise NotImplementedError

    def build(self, path, docs, debias="subspace+calibrate", multi_vector=True):
        meta = meta_for(debias, multi_vector, **self.store_meta(path))
        return DocumentIndex.write_batches(path, meta, [batch(docs[:20]), batch(docs[20:])])

    # -- writes and counts --------------------------------------------------------------------------------------
    def test_writes_upserts_deletes_and_counts(self, tmp_path):
        docs = world()
        with self.build(tmp_path / "idx", docs) as index:
            assert index.meta.live == 36 and sorted(index.doc_ids()) == [d["doc_id"] for d in docs]
            assert index.known_ids(["d001", "zz", "d035"]) == ["d001", "d035"]
        changed = world(4, seed=9, version=1)
        changed[0]["metadata"] = {"section": "weather"}
        with DocumentIndex.write_batches(tmp_path / "idx", meta_for(""), [batch(changed)], add=True,
                                         replace=True) as index:
            assert index.replaced == 4 and index.meta.live == 36
        with pytest.raises(Exception, match="'d002' is already in the index"):
            DocumentIndex.write_batches(tmp_path / "idx", meta_for(""), [batch(changed[2:3])], add=True)
        from hmde.index.mutations import delete_documents

        assert delete_documents(tmp_path / "idx", ["d003", "d010"]) == 2
        with DocumentIndex.open(tmp_path / "idx") as index:
            assert index.meta.live == 34 and "d003" not in index.doc_ids() and "d010" not in index.doc_ids()
            live = changed[:3] + [d for d in docs[4:] if d["doc_id"] != "d010"]
            q = np.random.default_rng(1).normal(size=(3, DIM)).astype(np.float32)
            hits = index.search(q, top_k=50)
            assert all(sorted(h.doc_id for h in x) == sorted(d["doc_id"] for d in live) for x in hits)
            by_id = {d["doc_id"]: d for d in live}
            for h in hits[0]:  # text, sentences and metadata: of the current version only
                assert (h.text, h.metadata) == (by_id[h.doc_id]["text"], by_id[h.doc_id]["metadata"])
                assert {t for t, _ in h.evidence} <= set(by_id[h.doc_id]["sentences"])
            rows, _, _ = index.live_rows_and_languages()
            assert len(rows) == 34
            weather = index.search(q, top_k=5, filter='section == "weather"')
            assert [[h.doc_id for h in x] for x in weather] == [["d000"]] * 3

    # -- the ranking ------------------------------------------------------------------------------------------
    @pytest.mark.parametrize("debias", ["", "subspace+calibrate"])
    @pytest.mark.parametrize("multi", [True, False])
    def test_the_ranking_equals_the_brute_force_reference(self, tmp_path, debias, multi):
        docs = world()
        q = np.random.default_rng(3).normal(size=(4, DIM)).astype(np.float32)
        with self.build(tmp_path / "idx", docs, debias, multi_vector=multi) as index:
            settings = [dict(), dict(query_lang="en"), dict(query_lang="de", top_sentences=2, doc_weight=0.0)]
            for options in settings:
                for expression in FILTERS if options == settings[1] else FILTERS[:2]:
                    tree = None if expression is None else parse(expression)
                    query_langs = [options.get("query_lang")] * len(q) if options.get("query_lang") else None
                    kwargs = {k: v for k, v in options.items() if k != "query_lang"}
                    got = index.search(q, top_k=5, query_langs=query_langs, filter=expression,
                                       multi_vector=multi, **kwargs)
                    for qi in range(len(q)):
                        want = reference(docs, q[qi], 5, debias, multi, tree=tree,
                                         query_lang=options.get("query_lang"), **kwargs)
                        assert [h.doc_id for h in got[qi]] == [d for d, _ in want], (expression, options)
                        assert all(abs(h.score - s) <= 1e-4 for h, (_, s) in zip(got[qi], want))
            in_german = index.search(q, top_k=5, lang="de")  # a language given as another code of it
            assert all(h.lang == "deu" for x in in_german for h in x) and all(len(x) == 5 for x in in_german)
            assert index.search(q, top_k=5, filter='section == "none"') == [[]] * 4

    def test_a_filter_naming_an_unknown_field_is_one_line(self, tmp_path):
        from hmde.index.filters import FilterError

        with self.build(tmp_path / "idx", world()) as index:
            with pytest.raises(FilterError, match="no document has the field 'sectoin' \\(did you mean 'section'\\? "
                                                  "fields: breaking, date, doc_id, flag, lang, score, section, year\\)$"):
                index.search(np.ones((1, DIM), np.float32), filter='sectoin == "sport"')

    REFUSED = [  # issue 77: each one line, the same on every store, before any search
        ("(" * 33 + "year > 1" + ")" * 33, "nested deeper than 32 levels of parentheses and 'not' at character 33"),
        ("not " * 2400 + "year > 1", "nested deeper than 32 levels of parentheses and 'not' at character 129"),
        ("score == 1e999", "1e999 at character 10 is not a finite number"),
        ("year == 99999999999999999999", "beyond a 64-bit integer"),
        ('section == "\\ud800"', "the string at character 12 holds a lone surrogate \\(U\\+D800\\)"),
        ('section == "\ud800x"', "a lone surrogate \\(U\\+D800\\) at character 13"),
        ('date == 2024', "date == 2024: the field 'date' holds strings, never numbers, so this compares with no "
                         'document: compare it with a value of its kind \\(e.g. date == "2024"\\)'),
        ('section in ["sport", true]', "section in true: the field 'section' holds strings, never true/false"),
        ('breaking == 1', "the field 'breaking' holds true/false, never numbers"),
        ('lang == 5', "the field 'lang' holds strings, never numbers"),
    ]

    def test_filters_no_store_can_answer_are_one_line_alike(self, tmp_path):
        from hmde.index.filters import FilterError

        docs = world()
        for d in docs:
            d["metadata"]["year"] = int(d["metadata"]["year"])
        with self.build(tmp_path / "idx", docs) as index:
            for expression, message in self.REFUSED:
                with pytest.raises(FilterError, match=message):
                    index.search(np.ones((1, DIM), np.float32), filter=expression)
            with pytest.raises(FilterError, match="the field 'year' holds numbers, never strings, .*"
                                                  "\\(e.g. year == 2019\\)"):
                index.search(np.ones((1, DIM), np.float32), filter='year == "2019"')

    # -- commits ----------------------------------------------------------------------------------------------
    def state(self, path) -> dict:
        """What a reader sees: each live document's (text, metadata, sentences); a search answers from them only."""
        with DocumentIndex.open(path) as index:
            rows, _, _ = index.live_rows_and_languages()
            records = index.records([int(r) for r in rows])
            docs = {r[0]: (r[2], json.dumps(r[5], sort_keys=True), tuple(r[3])) for r in records.values()}
            assert index.meta.live == len(docs)
            for hits in index.search(np.eye(DIM, dtype=np.float32)[:2], top_k=5):  # opens and searches: never torn
                assert all(h.doc_id in docs and {t for t, _ in h.evidence} <= set(docs[h.doc_id][2]) for h in hits)
            return docs

    def test_a_writer_killed_at_any_moment_leaves_the_version_before_or_after(self, tmp_path):
        """SIGKILL at 10 random moments of an upsert of 800 documents (two batches) and of a delete, one after
        another on the same index: each time, the index opens and is exactly the version before or the version
        after."""
        n = 800
        path = tmp_path / "idx"
        meta = meta_for("subspace+calibrate", **self.store_meta(path))
        DocumentIndex.write_batches(path, meta, [batch(world(n, seed=1, version=1))]).close()

        def run(op, version, kill_after=None):
            return run_writer([op, str(path), str(version), str(n), "{}"], kill_after)

        def expected(op, version, before):
            if op == "delete":
                gone = {d["doc_id"] for d in world(n, seed=version, version=version)[::version]}
                return {k: v for k, v in before.items() if k not in gone}
            return {d["doc_id"]: (d["text"], json.dumps(d["metadata"], sort_keys=True), tuple(d["sentences"]))
                    for d in world(n, seed=version, version=version)}

        rng = np.random.default_rng(0)
        seen = []
        current = self.state(path)
        for op in ("upsert", "delete"):
            took = run(op, 2)  # the whole write once: its duration
            current, before = self.state(path), current
            assert current == expected(op, 2, before)
            for i, moment in enumerate(rng.uniform(0.0, took * 1.1, 10)):
                version = 3 + i if op == "upsert" else (3, 5, 7, 11, 13, 17, 19, 23, 29, 31)[i]  # each deletes more
                after = expected(op, version, current)
                assert after != current
                run(op, version, kill_after=moment)
                got = self.state(path)
                assert got in (current, after), (op, moment)
                seen.append(got == after)
                current = got
        assert len(seen) == 20

    def litter(self, path) -> list:
        """What the store holds for the index at ``path`` beyond its current version (a subclass names it)."""
        return []

    def test_an_overwrite_killed_at_any_moment_leaves_the_old_index_or_the_new(self, tmp_path):
        """``index build --overwrite`` killed at 10 random moments: the index opens as the old version or the new one,
        never neither (issue 77: Milvus lost both); a finished overwrite leaves nothing of the old versions."""
        n = 700
        path = tmp_path / "idx"
        store = self.store_meta(path)
        DocumentIndex.write_batches(path, meta_for("subspace+calibrate", **store),
                                    [batch(world(n, seed=1, version=1))]).close()

        def run(version, kill_after=None):
            return run_writer(["overwrite", str(path), str(version), str(n), json.dumps(store)], kill_after)

        def version(v):
            return {d["doc_id"]: (d["text"], json.dumps(d["metadata"], sort_keys=True), tuple(d["sentences"]))
                    for d in world(n, seed=v, version=v)}

        took = run(2)
        current = self.state(path)
        assert current == version(2) and self.litter(path) == []
        seen = []
        for i, moment in enumerate(np.random.default_rng(1).uniform(0.0, took * 1.1, 10)):
            run(3 + i, kill_after=moment)
            got = self.state(path)
            assert got in (current, version(3 + i)), moment
            seen.append(got == current)
            current = got
        run(20)
        assert self.state(path) == version(20) and self.litter(path) == []
        assert len(seen) == 10

    # -- the frameworks' own filter languages (issue 76), against the frameworks' own evaluation ----------------
    HAYSTACK_FILTERS = [
        {"field": "meta.section", "operator": "==", "value": "sport"},
        {"field": "meta.section", "operator": "!=", "value": "sport"},  # a missing section is != "sport"
        {"field": "meta.section", "operator": "==", "value": None},
        {"field": "meta.breaking", "operator": "!=", "value": None},
        {"field": "meta.date", "operator": ">=", "value": "2024-06-01"},
        {"field": "meta.date", "operator": "<", "value": "2024-03-15"},  # ISO dates compare as strings: one format
        {"field": "meta.section", "operator": "in", "value": ["sport", "science"]},
        {"field": "meta.section", "operator": "not in", "value": ["sport", "science"]},
        {"field": "meta.score", "operator": ">", "value": None},
        {"field": "id", "operator": "in", "value": ["d001", "d004", "d030"]},
        {"operator": "NOT", "conditions": [{"field": "meta.section", "operator": "==", "value": "politics"},
                                           {"field": "meta.breaking", "operator": "==", "value": True}]},
        {"operator": "OR", "conditions": [
            {"field": "meta.breaking", "operator": "==", "value": False},
            {"operator": "AND", "conditions": [{"field": "meta.section", "operator": "!=", "value": "sport"},
                                               {"field": "meta.date", "operator": "<=", "value": "2024-02-09"}]}]},
        {"field": "meta.nope", "operator": "==", "value": 3},  # no document has it: nothing, never an error
        {"field": "meta.nope", "operator": "!=", "value": 3},
    ]

    def test_haystack_filters_match_haystacks_own_store(self, tmp_path):
        """Each Haystack filter selects exactly what Haystack's InMemoryDocumentStore selects from the same
        documents (its semantics: a missing field is != a value, == None; NOT negates all its conditions)."""
        pytest.importorskip("haystack")
        from haystack import Document
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        from hmde.index.filter_forms import to_tree

        docs = world()
        reference = InMemoryDocumentStore()
        reference.write_documents([Document(id=d["doc_id"], content=d["text"], meta=d["metadata"]) for d in docs])
        with self.build(tmp_path / "idx", docs) as index:
            for filters in self.HAYSTACK_FILTERS:
                want = sorted(d.id for d in reference.filter_documents(filters))
                assert ids_of(index, index.rows_where(to_tree(filters))) == want, filters
                q = np.ones((1, DIM), np.float32)
                assert sorted(h.doc_id for h in index.search(q, top_k=50, filter=to_tree(filters))[0]) == want

    LLAMA_FILTERS = [
        ("and", [("section", "==", "sport"), ("year", ">", 2017)]),
        ("or", [("section", "!=", "sport"), ("year", "<=", 2016)]),
        ("not", [("section", "==", "sport"), ("section", "==", "science")]),
        ("and", [("section", "nin", ["sport"]), ("date", "<=", "2024-05-05")]),
        ("and", [("section", "in", ["politics", "science"])]),
        ("and", [("breaking", "is_empty", None)]),
    ]

    def test_llama_index_filters_match_llama_indexs_own_evaluation(self, tmp_path):
        pytest.importorskip("llama_index.core")
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
        from llama_index.core.vector_stores.utils import build_metadata_filter_fn

        from hmde.index.filter_forms import to_tree

        docs = [d for d in world() if not isinstance(d["metadata"].get("year"), str)]  # Python's > on mixed kinds
        by_id = {d["doc_id"]: d["metadata"] for d in docs}
        with self.build(tmp_path / "idx", docs) as index:
            for condition, parts in self.LLAMA_FILTERS:
                filters = MetadataFilters(filters=[MetadataFilter(key=k, operator=op, value=v) for k, op, v in parts],
                                          condition=condition)
                keep = build_metadata_filter_fn(lambda node_id: by_id[node_id], filters)
                want = sorted(x for x in by_id if keep(x))
                got = ids_of(index, index.rows_where(to_tree(filters)))
                assert got == want, (condition, parts)

    LANGCHAIN_FORMS = [  # a LangChain dict filter and the hmde expression it is
        ({"section": "sport"}, 'section == "sport"'),
        ({"year": {"$gte": 2017, "$lt": 2021}}, "year >= 2017 and year < 2021"),
        ({"$or": [{"section": {"$in": ["sport", "science"]}}, {"breaking": True}]},
         'section in ["sport", "science"] or breaking == true'),
        ({"$not": {"section": {"$ne": "sport"}}, "date": {"$between": ["2024-02-01", "2024-08-01"]}},
         'not (section != "sport") and date >= "2024-02-01" and date <= "2024-08-01"'),
        ({"breaking": {"$exists": False}, "section": {"$nin": ["politics"]}},
         'breaking is null and section not in ["politics"]'),
    ]

    def test_langchain_filters_are_hmdes_expressions(self, tmp_path):
        from hmde.index.filter_forms import to_tree
        from hmde.index.filters import parse

        with self.build(tmp_path / "idx", world()) as index:
            for form, expression in self.LANGCHAIN_FORMS:
                assert index.rows_where(to_tree(form)) == index.rows_where(parse(expression)), form
                assert index.rows_where(to_tree(form)), form  # each selects something

    def test_a_framework_operator_hmde_cannot_honour_is_one_line(self):
        from hmde.index.filter_forms import to_tree
        from hmde.index.filters import FilterError

        refused = [({"tags": {"$contains": "x"}}, "hmde's filters do not take the operator $contains"),
                   ({"field": "meta.year", "operator": "contains", "value": 2}, "Haystack's operator 'contains'"),
                   ({"field": "meta.year", "operator": ">", "value": "1"}, "'>' compares numbers and ISO dates; '1'"),
                   ({"field": "meta.year", "operator": "in", "value": 9}, "'in' takes a list, got 9"),
                   ({"field": "meta.year", "operator": "in", "value": (9, 10)}, "'in' takes a list"),
                   ({"conditions": [{"field": "meta.year", "operator": "==", "value": 1}]}, "no 'operator' key"),
                   ({"operator": "AND"}, "needs a non-empty list under 'conditions'"),
                   ({"operator": "AND", "conditions": [{"operator": "==", "value": 1}]}, "a comparison needs"),
                   ({"field": "content", "operator": "==", "value": "x"}, "not by their content")]
        for form, message in refused:
            with pytest.raises(FilterError, match=re.escape(message)):
                to_tree(form)
        pytest.importorskip("llama_index.core")
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

        for op in ("contains", "any", "all", "text_match", "text_match_insensitive"):
            with pytest.raises(FilterError, match=f"LlamaIndex's operator {op} compares inside lists or texts"):
                to_tree(MetadataFilters(filters=[MetadataFilter(key="tags", operator=op, value="x" if op in (
                    "contains", "text_match", "text_match_insensitive") else ["x"])]))
