"""LAWDR: language-subspace removal, KDE weights, m selection, saved statistics."""

import numpy as np
import pytest

from hmde.errors import HmdeError
from hmde.lawdr import LawdrStats, choose_m, fit_lawdr, language_directions


def _two_languages(seed=0, n_docs=40, per_doc=5, dim=24):
    rng = np.random.default_rng(seed)
    offsets = {"aaa": rng.normal(size=dim) * 3, "bbb": rng.normal(size=dim) * 3}
    per_doc_vectors, langs = [], []
    for lang, off in offsets.items():
        for _ in range(n_docs):
            per_doc_vectors.append(rng.normal(size=(per_doc, dim)) + off)
            langs.append(lang)
    return per_doc_vectors, langs, offsets


def test_language_directions_remove_the_language_offset():
    docs, langs, offsets = _two_languages()
    stacked = np.concatenate([d for d, lang in zip(docs, langs) if lang == "aaa"])
    d = language_directions(stacked, 1)
    cosine = abs(d[0] @ offsets["aaa"]) / np.linalg.norm(offsets["aaa"])
    assert cosine > 0.95  # the uncentred SVD's first direction is the language's mean direction
    stats = fit_lawdr(docs, langs, m=1)
    cleaned = stats.clean(stacked, "aaa")
    assert abs((cleaned @ d[0]).mean()) < 1e-8


def test_choose_m_stops_below_55_percent():
    docs, langs, _ = _two_languages()
    by_lang = {lang: np.concatenate([d for d, l2 in zip(docs, langs) if l2 == lang]) for lang in ("aaa", "bbb")}
    m, trace = choose_m(by_lang)
    assert trace[0] == (0, pytest.approx(trace[0][1])) and trace[0][1] > 0.9  # raw vectors: language is obvious
    assert m >= 1 and trace[-1][1] < 0.55


def test_document_vector_is_the_weighted_sum_and_dense_sentences_weigh_less():
    from sklearn.neighbors import KernelDensity

    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs, m=1)
    doc = docs[0]
    cleaned = stats.clean(doc, "aaa")
    kde = KernelDensity(kernel="tophat", bandwidth=stats.bandwidth).fit(stats.kde_points)
    density = np.exp(kde.score_samples((cleaned - stats.pca_mean) @ stats.pca_components.T))
    expected = ((stats.b / (stats.b + density))[:, None] * cleaned).sum(0)
    np.testing.assert_allclose(stats.document_vectors([doc], ["aaa"])[0], expected, rtol=1e-5, atol=1e-6)
    centre = np.zeros((1, doc.shape[1]))  # the densest point of the cleaned cloud
    far = np.full((1, doc.shape[1]), 50.0)
    assert stats.weights(centre)[0] < stats.weights(far)[0] == pytest.approx(1.0)


def test_statistics_round_trip_and_unknown_language(tmp_path):
    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs)
    stats.save(tmp_path / "stats")
    loaded = LawdrStats.load(tmp_path / "stats")
    assert loaded.m == stats.m and loaded.b == stats.b
    np.testing.assert_array_equal(loaded.document_vectors(docs[:3], langs[:3]), stats.document_vectors(docs[:3], langs[:3]))
    with pytest.raises(HmdeError, match="no language 'zzz'"):
        loaded.document_vectors(docs[:1], ["zzz"])
    with pytest.raises(HmdeError, match="no lawdr.json"):
        LawdrStats.load(tmp_path)


def test_fit_needs_languages():
    docs, _, _ = _two_languages()
    with pytest.raises(HmdeError, match="language of every document"):
        fit_lawdr(docs, [None] * len(docs))
