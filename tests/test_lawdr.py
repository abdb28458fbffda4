"""LAWDR: language-subspace removal, KDE weights, m selection, saved statistics."""

import numpy as np
import pytest

from hmde.errors import HmdeError
from hmde.methods.lawdr_statistics import LawdrStats, choose_m, fit_lawdr, language_directions


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
    m, trace = choose_m(by_lang, method="logreg-cv")
    assert trace[0] == (0, pytest.approx(trace[0][1])) and trace[0][1] > 0.9  # raw vectors: language is obvious
    assert m >= 1 and trace[-1][1] < 0.55


@pytest.mark.parametrize("kde", ["per-language", "pooled"])
def test_document_vector_is_the_weighted_sum_and_dense_sentences_weigh_less(kde):
    from sklearn.neighbors import KernelDensity

    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs, m=1, kde=kde)
    assert sorted(stats.densities) == (["aaa", "bbb"] if kde == "per-language" else ["*"])
    doc = docs[0]
    cleaned = stats.clean(doc, "aaa")
    d = stats.density_of("aaa")
    kde_fit = KernelDensity(kernel="tophat", bandwidth=d.bandwidth).fit(d.kde_points)
    density = np.exp(kde_fit.score_samples((cleaned - d.pca_mean) @ d.pca_components.T))
    expected = ((d.b / (d.b + density))[:, None] * cleaned).sum(0)
    np.testing.assert_allclose(stats.document_vectors([doc], ["aaa"])[0], expected, rtol=1e-5, atol=1e-6)
    centre = np.zeros((1, doc.shape[1]))  # the densest point of the cleaned cloud
    far = np.full((1, doc.shape[1]), 50.0)
    assert stats.weights(centre, "aaa")[0] < stats.weights(far, "aaa")[0] == pytest.approx(1.0)


def test_per_language_densities_are_fitted_on_that_language_only():
    """The paper fits the KDE per language (issue 16, item 8): 'aaa''s density must equal one
    fitted on 'aaa''s cleaned sentences alone, whatever 'bbb' holds."""
    from hmde.methods.lawdr_statistics import fit_density

    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs, m=1)
    aaa = np.concatenate([d for d, lang in zip(docs, langs) if lang == "aaa"])
    alone = fit_density(stats.clean(aaa, "aaa"), 16, 20000, 2000, 0)
    np.testing.assert_allclose(stats.densities["aaa"].kde_points, alone.kde_points)
    assert stats.densities["aaa"].b == alone.b and stats.densities["aaa"].bandwidth == alone.bandwidth
    changed = [d * 3 if lang == "bbb" else d for d, lang in zip(docs, langs)]
    assert fit_lawdr(changed, langs, m=1).densities["aaa"].b == stats.densities["aaa"].b


def test_m_is_chosen_by_a_linear_svm_on_an_8_2_split():
    """The paper's procedure: LinearSVC trained on 80%, accuracy on the held-out 20%."""
    from sklearn.model_selection import train_test_split
    from sklearn.svm import LinearSVC

    from hmde.methods.lawdr_statistics import language_classifier_accuracy

    docs, langs, _ = _two_languages()
    by_lang = {lang: np.concatenate([d for d, l2 in zip(docs, langs) if l2 == lang]) for lang in ("aaa", "bbb")}
    x = np.concatenate(list(by_lang.values()))
    y = np.repeat([0, 1], [len(v) for v in by_lang.values()])
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    assert len(xte) == 80  # 20% of 400
    expected = LinearSVC(random_state=0).fit(xtr, ytr).score(xte, yte)
    assert language_classifier_accuracy(by_lang, 0, "svm") == expected
    m_svm, trace = choose_m(by_lang, method="svm")
    assert trace[-1][1] < 0.55 and all(a >= 0.55 for _, a in trace[:-1]) and m_svm == trace[-1][0]
    stats = fit_lawdr(docs, langs)
    assert stats.info["m_selection"] == "svm" and stats.m == m_svm


def test_older_pooled_statistics_still_load(tmp_path):
    import json

    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs, m=1, kde="pooled")
    d = stats.densities["*"]
    folder = tmp_path / "v1"
    folder.mkdir()
    np.savez(folder / "lawdr.npz", pca_mean=d.pca_mean, pca_components=d.pca_components, kde_points=d.kde_points,
             **{f"dir_{k}": v for k, v in stats.directions.items()})
    (folder / "lawdr.json").write_text(json.dumps({"format": "hmde-lawdr/1", "bandwidth": d.bandwidth, "b": d.b,
                                                   "m": 1, "languages": ["aaa", "bbb"]}))
    loaded = LawdrStats.load(folder)
    np.testing.assert_allclose(loaded.document_vectors(docs[:3], langs[:3]), stats.document_vectors(docs[:3], langs[:3]),
                               rtol=1e-6)


def test_statistics_round_trip_and_unknown_language(tmp_path):
    docs, langs, _ = _two_languages()
    stats = fit_lawdr(docs, langs)
    stats.save(tmp_path / "stats")
    loaded = LawdrStats.load(tmp_path / "stats")
    assert loaded.m == stats.m and loaded.densities["aaa"].b == stats.densities["aaa"].b
    np.testing.assert_array_equal(loaded.document_vectors(docs[:3], langs[:3]), stats.document_vectors(docs[:3], langs[:3]))
    with pytest.raises(HmdeError, match="no language 'zzz'"):
        loaded.document_vectors(docs[:1], ["zzz"])
    with pytest.raises(HmdeError, match="no lawdr.json"):
        LawdrStats.load(tmp_path)


def test_fit_needs_languages():
    docs, _, _ = _two_languages()
    with pytest.raises(HmdeError, match="language of every document"):
        fit_lawdr(docs, [None] * len(docs))
