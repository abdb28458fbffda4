"""Mixed-language collections rank by meaning (issue 56): each query loses the span of the indexed languages'
centred means (hmde.index.language_debias), recorded per language and kept up to date by every write."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.cli.main import main
from hmde.index.build import write_batches
from hmde.index.builder import IndexSettings
from hmde.index.language_debias import LanguageStats, project_out
from hmde.index.mutations import compact_index, delete_documents
from hmde.index.store import DocumentBatch, DocumentIndex, IndexMeta

DIM = 24


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def collection(seed=0, languages=("aaa", "bbb"), topics=6, per_topic_language=4):
    """Documents of a topic in each language: a language direction (strong) + the topic + noise."""
    rng = np.random.default_rng(seed)
    lang_dirs = {lang: 1.2 * unit(rng.standard_normal(DIM)) for lang in languages}
    topic_dirs = unit(rng.standard_normal((topics, DIM)))
    docs = []
    for t in range(topics):
        for lang in languages:
            for k in range(per_topic_language):
                sents = unit(lang_dirs[lang] + topic_dirs[t] + 0.1 * rng.standard_normal((3, DIM))).astype(np.float32)
                docs.append((f"{lang}-{t}-{k}", lang, t, sents))
    return docs, lang_dirs, topic_dirs


def batch(docs):
    return DocumentBatch([d[0] for d in docs], [d[1] for d in docs], [d[0] for d in docs],
                         np.stack([d[3].mean(0) for d in docs]), [[f"s{i}" for i in range(3)] for _ in docs],
                         [d[3] for d in docs])


def meta(debias="subspace"):
    return IndexMeta(model="m", model_sha256=None, dim=DIM, method="mean", index_type="flat", count=0,
                     multi_vector=True, sentence_vectors="lower", language_debias=debias)


def test_a_query_no_longer_prefers_its_own_language(tmp_path):
    docs, lang_dirs, topic_dirs = collection()
    rng = np.random.default_rng(9)
    queries = unit(np.stack([lang_dirs["aaa"] + topic_dirs[t] + 0.1 * rng.standard_normal(DIM) for t in range(6)]))
    shares = {}
    for debias in ("", "subspace"):
        with write_batches(tmp_path / f"idx{debias}", meta(debias), iter([batch(docs)]), add=False) as index:
            hits = index.search(queries, top_k=8)
        right = np.mean([[h.doc_id.split("-")[1] == str(t) for h in q] for t, q in enumerate(hits)])
        own = np.mean([[h.lang == "aaa" for h in q] for q in hits])
        shares[debias] = (right, own)
    assert shares[""][1] >= 0.9, shares  # nearly every hit in the query's language: half the right ones are not
    assert shares["subspace"][0] >= 0.9 and shares["subspace"][0] >= shares[""][0] + 0.3, shares
    assert 0.35 <= shares["subspace"][1] <= 0.65, shares


def test_the_statistics_follow_every_write_and_one_language_changes_nothing(tmp_path):
    docs, _, _ = collection(seed=1)
    path = tmp_path / "idx"
    write_batches(path, meta(), iter([batch(docs[:20])]), add=False).close()
    DocumentIndex.write_batches(path, meta(), iter([batch(docs[20:])]), add=True).close()
    changed = [(d[0], d[1], d[2], unit(d[3] + 0.5)) for d in docs[:5]]
    DocumentIndex.write_batches(path, meta(), iter([batch(changed)]), add=True, replace=True).close()
    delete_documents(path, [d[0] for d in docs[40:44]])
    compact_index(path)
    alive = {d[0]: d for d in docs}
    alive.update({d[0]: d for d in changed})
    for d in docs[40:44]:
        del alive[d[0]]
    fresh = LanguageStats(DIM)
    fresh.update([d[1] for d in alive.values()], [unit(d[3]) for d in alive.values()])
    kept = LanguageStats.load(path, DIM)
    assert kept.counts == fresh.counts
    for lang in fresh.counts:
        np.testing.assert_allclose(kept.sums[lang], fresh.sums[lang], atol=1e-5)
    with DocumentIndex.open(path) as index:
        np.testing.assert_allclose(np.abs(index.language_basis @ fresh.basis().T), np.eye(1), atol=1e-5)
    one = [d for d in docs if d[1] == "aaa"]  # a collection in one language: no direction, the same ranking
    q = unit(np.random.default_rng(3).standard_normal((4, DIM))).astype(np.float32)
    with write_batches(tmp_path / "one", meta(), iter([batch(one)]), add=False) as a, \
            write_batches(tmp_path / "one-none", meta(""), iter([batch(one)]), add=False) as b:
        assert len(a.language_basis) == 0
        assert [[(h.doc_id, h.score) for h in x] for x in a.search(q)] == \
            [[(h.doc_id, h.score) for h in x] for x in b.search(q)]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_flat_index_scores_its_candidates_by_stored_lengths_as_by_their_vectors(tmp_path, monkeypatch, kind):
    """Issue 96, item 1: a flat index's sentence search gives exact inner products of the projected query, so its
    candidates' debiased cosines need only each row's length outside the languages' directions, from a table made
    once per snapshot, not a read of 1,000 vectors a query; the candidate documents' vectors' lengths likewise. The
    tables are those lengths row for row (after an add and a delete too), and the hits, their scores and evidence
    are the ones that projecting the vectors gives."""
    from hmde.index.language_debias import residual_norms
    from hmde.index.local_store import LocalStore

    docs, lang_dirs, topic_dirs = collection(seed=4, languages=("aaa", "bbb", "ccc"))
    path = tmp_path / "idx"
    kept = meta()
    kept.index_type = kind  # HNSW over flat vectors gives exact inner products too
    write_batches(path, kept, iter([batch(docs[:40])]), add=False).close()
    DocumentIndex.write_batches(path, kept, iter([batch(docs[40:])]), add=True).close()
    delete_documents(path, [d[0] for d in docs[10:14]])
    rng = np.random.default_rng(5)
    queries = unit(np.stack([lang_dirs["bbb"] + topic_dirs[t] + 0.3 * rng.standard_normal(DIM) for t in range(6)]))
    with DocumentIndex.open(path) as index:
        assert len(index.language_basis) == 2 and index.meta.index_type == kind
        rows = np.arange(index.sentence_index.ntotal)
        want = residual_norms(index.sentence_vectors_of(rows), index.language_basis)
        assert np.array_equal(index.sentence_residual_norms(rows), want)
        assert np.array_equal(index.sentence_residual_norms(np.array([[rows[-1], -1]]))[0, 0], want[-1])
        assert want.min() < 0.9  # the languages' directions hold part of each vector: the division matters
        documents = np.arange(index.meta.count)  # the document vectors' lengths too (a deleted row's kept)
        want = residual_norms(index.document_vectors(documents), index.language_basis)
        assert np.array_equal(index.document_residual_norms(documents[::-1]), want[::-1]) and want.min() < 0.9
        fast = [[(h.doc_id, h.score, h.evidence) for h in q] for q in index.search(queries, top_k=12)]
        monkeypatch.setattr(LocalStore, "sentence_residual_norms", lambda self, rows: None)
        monkeypatch.setattr(LocalStore, "document_residual_norms", lambda self, rows: None)
        read = [[(h.doc_id, h.score, h.evidence) for h in q] for q in index.search(queries, top_k=12)]
    assert [[d for d, _, _ in q] for q in fast] == [[d for d, _, _ in q] for q in read]
    np.testing.assert_allclose([[s for _, s, _ in q] for q in fast], [[s for _, s, _ in q] for q in read], atol=1e-6)
    assert [[e for _, _, e in q] for q in fast] == [[e for _, _, e in q] for q in read]
    monkeypatch.undo()
    with write_batches(tmp_path / "none", meta(""), iter([batch(docs)]), add=False) as plain:
        assert plain.sentence_residual_norms(np.arange(3)) is None  # nothing removed: the inner products are it
        assert plain.document_residual_norms(np.arange(3)) is None


def test_new_indexes_record_it_and_older_ones_keep_none(hmde_dir, tmp_path):
    assert IndexSettings().language_debias == "subspace+calibrate"  # the default (docs/model.md)
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": f"Sentence {i}. Another {i}.",
                                       "lang": "eng" if i % 2 else "deu"}) + "\n" for i in range(12)))
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "new"), "--no-progress"]) == 0
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "off"), "--no-progress",
                 "--language-debias", "none"]) == 0
    assert json.loads((tmp_path / "new" / "index.json").read_text())["language_debias"] == "subspace+calibrate"
    assert json.loads((tmp_path / "off" / "index.json").read_text())["language_debias"] == ""
    assert not (tmp_path / "off" / "languages.npz").exists()
    raw = json.loads((tmp_path / "off" / "index.json").read_text())
    del raw["language_debias"]  # as written before issue 56
    (tmp_path / "off" / "index.json").write_text(json.dumps(raw))
    with DocumentIndex.open(tmp_path / "off") as index:
        assert index.meta.language_debias == "" and len(index.language_basis) == 0
    q = np.ones((1, DIM), np.float32)
    assert project_out(q, np.zeros((0, DIM), np.float32)) is q
