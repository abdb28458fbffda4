"""Texts of a route's languages embedded by the routed encoder, every other text by the model, rows in input order
(issue 80, hmde.methods.routed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.errors import HmdeError
from hmde.methods.routed import LanguageRoute, RoutedVectorizer, route_key


def test_a_route_matches_a_language_whatever_code_names_it_and_its_script_alone():
    route = LanguageRoute(["quc", "jav_Java", "tuk_Cyrl", "ayr"])
    assert "quc" in route and "jav_Java" in route and "jv-Java" in route and "tuk_Cyrl" in route
    assert "jav" not in route and "jv" not in route and "tuk" not in route  # the Latin scripts are not routed
    assert "eng" not in route and None not in route and "unknown" not in route and "" not in route
    assert route_key("jv-java") == route_key("jav_Java") == ("jv", "Java")
    assert route.split(["eng", "quc", None, "jav_Java", "deu"]) == ([0, 2, 4], [1, 3])


def test_the_route_file_is_read_and_a_bad_one_named(tmp_path):
    (tmp_path / "route.json").write_text(json.dumps({"languages": ["quc", "kab"], "trained_for": ["quc", "kab", "x"]}))
    assert LanguageRoute.read(tmp_path).languages == ["kab", "quc"]
    with pytest.raises(HmdeError, match="no route here"):
        LanguageRoute.read(tmp_path / "nothing")
    (tmp_path / "route.json").write_text(json.dumps({"languages": "quc"}))
    with pytest.raises(HmdeError, match="languages must be a list"):
        LanguageRoute.read(tmp_path)
    (tmp_path / "route.json").write_text("{")
    with pytest.raises(HmdeError, match="not a route"):
        LanguageRoute.read(tmp_path)


class Fake:
    """A vectorizer whose every vector says which encoder made it and of which text."""

    def __init__(self, mark, method="mean"):
        self.mark, self.method, self.model = mark, method, self
        self.lower = self
        self.dim = 2
        self.calls = []

    def encode(self, docs, langs, normalize_embeddings=False):
        self.calls.append((list(docs), list(langs)))
        return np.array([[self.mark, float(d)] for d in docs], np.float32)


def test_documents_go_to_the_encoder_of_their_language_and_come_back_in_order():
    main, tail = Fake(1.0), Fake(2.0)
    routed = RoutedVectorizer(main, tail, LanguageRoute(["quc"]))
    vectors = routed.encode(["0", "1", "2", "3"], ["eng", "quc", "deu", "quc"])
    assert vectors.tolist() == [[1, 0], [2, 1], [1, 2], [2, 3]]
    assert main.calls == [(["0", "2"], ["eng", "deu"])] and tail.calls == [(["1", "3"], ["quc", "quc"])]
    assert routed.encode([], []).shape == (0, 2)
    with pytest.raises(HmdeError, match="got 2 texts but 1 languages"):
        routed.encode(["a", "b"], ["eng"])
    with pytest.raises(HmdeError, match="one method"):
        RoutedVectorizer(main, Fake(2.0, method="hmde"), LanguageRoute(["quc"]))


class Unit(Fake):
    """Unit vectors: the model's point along x, the routed encoder's along y."""

    def encode(self, docs, langs, normalize_embeddings=False):
        self.calls.append((list(docs), list(langs)))
        return np.array([[1.0, 0.0] if self.mark == 1 else [0.0, 1.0] for _ in docs], np.float32)


def test_a_blended_route_mixes_the_two_encoders_vectors_of_its_languages_alone():
    main, tail = Unit(1.0), Unit(2.0)
    vectors = RoutedVectorizer(main, tail, LanguageRoute(["quc"], blend=0.25)).encode(["0", "1"], ["eng", "quc"])
    # quc: 0.25 x (0, 1) + 0.75 x (1, 0), re-normalised since both were unit vectors; eng: the model's alone
    assert np.allclose(vectors, [[1, 0], [0.75 / np.hypot(0.75, 0.25), 0.25 / np.hypot(0.75, 0.25)]])
    assert main.calls == [(["0", "1"], ["eng", "quc"])] and tail.calls == [(["1"], ["quc"])]
    main, tail = Fake(1.0), Fake(3.0)  # vectors not of unit length are mixed as they are
    vectors = RoutedVectorizer(main, tail, LanguageRoute(["quc"], blend=0.5)).encode(["4", "6"], ["quc", "deu"])
    assert vectors.tolist() == [[2, 4], [1, 6]]
    for bad in (0, 1.5, float("nan"), True):
        with pytest.raises(HmdeError, match="blend is the routed encoder's weight"):
            LanguageRoute(["quc"], blend=bad)


def test_the_route_files_blend_is_read_and_a_given_one_wins(tmp_path):
    (tmp_path / "route.json").write_text(json.dumps({"languages": ["quc"], "blend": 0.5}))
    assert LanguageRoute.read(tmp_path).blend == 0.5 and LanguageRoute.read(tmp_path, 0.75).blend == 0.75
    (tmp_path / "route.json").write_text(json.dumps({"languages": ["quc"]}))
    assert LanguageRoute.read(tmp_path).blend == 1.0
    (tmp_path / "route.json").write_text(json.dumps({"languages": ["quc"], "blend": 2}))
    with pytest.raises(HmdeError, match=r"route.json: a route's blend .* got 2"):
        LanguageRoute.read(tmp_path)


def test_a_route_over_the_models_own_weights_gives_the_models_vectors_exactly(hmde_dir):
    """Routing to the same weights changes nothing: every row is the model's, queries and documents (to float
    rounding: the batches hold other texts)."""
    from hmde.encoders.model_loading import load_model
    from hmde.methods.vectorizer import DocumentVectorizer, encode_query_texts

    model = load_model(str(hmde_dir), "cpu")[1]
    copy = load_model(str(hmde_dir), "cpu")[1]
    main = DocumentVectorizer(model, "mean")
    routed = RoutedVectorizer(main, DocumentVectorizer(copy, "mean"), LanguageRoute(["quc"]))
    docs = ["Rights of every person. They are born free.", "Ri winaq man k'o ta. Xa jun.", "Alle Menschen."]
    langs = ["eng", "quc", "deu"]
    np.testing.assert_allclose(routed.encode(docs, langs), main.encode(docs, langs), atol=1e-5)
    np.testing.assert_allclose(routed.queries(docs, langs), encode_query_texts(model, docs), atol=1e-5)
    assert not np.allclose(routed.encode(docs, langs)[0], routed.encode(docs, langs)[1], atol=1e-3)  # not all one
