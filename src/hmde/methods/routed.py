"""Texts of some languages embedded by a routed encoder, every other text by the model (issue 80).

A routed encoder (``hmde sentence-stage --english-side teacher``; docs/languages.md) is a copy of a model's lower
encoder trained for a few languages alone, its vectors of them pulled into the model's own space: so a document or
query in one of those languages is embedded by it, and everything else (English, every language of the head) by the
model, exactly as without the route. :class:`LanguageRoute` says which texts go where (by their language, as
documents' ``lang`` fields and ``--lang`` name them); :class:`RoutedVectorizer` embeds documents and queries
through it, each text by one encoder, the rows in input order. A route may ``blend``: a routed text's vector is
then ``blend`` x the routed encoder's plus ``1 - blend`` x the model's (re-normalised where both were unit
vectors), an ensemble of the two in their one space, for languages where the routed encoder is no sure gain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError
from ..pretraining.tail_pairs import ROUTE_FILE


def route_key(lang: str | None) -> tuple[str, str | None] | None:
    """A language as a route compares it: its code (:func:`hmde.text.language_codes.language_code`: ``jav`` and
    ``jv`` are one) and its script subtag where one is named (``jav_Java`` and ``jv-Java`` are one, and neither is
    ``jav``: the route of a script serves that script alone); None for no language."""
    from ..text.language_codes import language_code

    if not lang or lang == "unknown":
        return None
    parts = str(lang).replace("-", "_").split("_")
    script = next((p.title() for p in parts[1:] if len(p) == 4 and p.isalpha()), None)
    return language_code(parts[0]), script


class LanguageRoute:
    """The languages a routed encoder serves. ``languages``: codes as the data names them (``quc``, ``jav_Java``);
    ``blend``: the routed encoder's weight in a routed text's vector (1: its vector alone; module docstring)."""

    def __init__(self, languages: Iterable[str], blend: float = 1.0):
        if isinstance(blend, bool) or not isinstance(blend, (int, float)) or not 0 < blend <= 1:
            raise HmdeError(f"a route's blend is the routed encoder's weight, in (0, 1]; got {blend!r}")
        self.languages = sorted(set(languages))
        self.blend = float(blend)
        self._keys = {route_key(lang) for lang in self.languages} - {None}

    @classmethod
    def read(cls, folder: str | Path, blend: float | None = None) -> "LanguageRoute":
        """The route of a routed encoder's folder (its ``route.json``: ``{"languages": [...]}``, with an optional
        ``"blend"``); ``blend``: this one instead of the file's."""
        path = Path(folder) / ROUTE_FILE
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            languages = record["languages"]
        except FileNotFoundError:
            raise HmdeError(f"{path}: no route here (a routed encoder's folder has one: hmde sentence-stage "
                            "--english-side teacher writes it)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise HmdeError(f"{path}: not a route ({exc}); expected {{\"languages\": [codes]}}") from None
        if not isinstance(languages, list) or not all(isinstance(x, str) for x in languages):
            raise HmdeError(f"{path}: languages must be a list of language codes")
        try:
            return cls(languages, record.get("blend", 1.0) if blend is None else blend)
        except HmdeError as exc:
            raise HmdeError(f"{path}: {exc}") from None

    def __contains__(self, lang: str | None) -> bool:
        return route_key(lang) in self._keys

    def __len__(self) -> int:
        return len(self.languages)

    def split(self, langs: Sequence[str | None]) -> tuple[list[int], list[int]]:
        """(the positions the model embeds, those the routed encoder embeds)."""
        routed = [i for i, lang in enumerate(langs) if lang in self]
        chosen = set(routed)
        return [i for i in range(len(langs)) if i not in chosen], routed


def _unit(rows: np.ndarray) -> bool:
    """Whether every row is a unit vector (a blend of unit vectors is re-normalised)."""
    return bool(np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-3))


class RoutedVectorizer:
    """Document and query vectors with a route: ``main`` (a :class:`hmde.methods.vectorizer.DocumentVectorizer` of
    the model) for every language but the route's, ``routed`` (one of the routed encoder, the same method) for
    those. Both vectorizers' models share a space, so their rows mix in one index."""

    def __init__(self, main, routed, route: LanguageRoute):
        if main.method != routed.method:
            raise HmdeError(f"a route's two vectorizers must use one method, not {main.method} and {routed.method}")
        self.main, self.routed, self.route = main, routed, route

    def _by_route(self, texts: Sequence, langs: Sequence[str | None], embed) -> np.ndarray:
        if len(langs) != len(texts):
            raise HmdeError(f"got {len(texts)} texts but {len(langs)} languages")
        stay, go = self.route.split(langs)
        blend = self.route.blend
        if blend < 1:  # the model embeds every text; the routed encoder's vectors are mixed into the routed rows
            stay = list(range(len(texts)))
        main = embed(self.main, [texts[i] for i in stay], [langs[i] for i in stay]) if stay else None
        routed = embed(self.routed, [texts[i] for i in go], [langs[i] for i in go]) if go else None
        if main is None and routed is None:
            return np.zeros((0, self.main.lower.dim), np.float32)
        out = np.zeros((len(texts), (routed if main is None else main).shape[1]), np.float32)
        if main is not None:
            out[stay] = main
        if routed is not None and blend < 1:
            mixed = blend * routed + (1 - blend) * out[go]
            routed = normalize(mixed) if _unit(routed) and _unit(out[go]) else mixed
        if routed is not None:
            out[go] = routed
        return out

    def encode(self, docs: Sequence, langs: Sequence[str | None], normalize_embeddings: bool = False) -> np.ndarray:
        """Document vectors, each document by the encoder its language routes to."""
        return self._by_route(docs, list(langs), lambda v, d, lg: np.asarray(
            v.encode(d, lg, normalize_embeddings=normalize_embeddings), np.float32))

    def queries(self, texts: Sequence, langs: Sequence[str | None], **options) -> np.ndarray:
        """Query vectors (:func:`hmde.methods.vectorizer.encode_query_texts`), each by the encoder its language
        routes to; a query of no known language goes to the model."""
        from .vectorizer import encode_query_texts

        return self._by_route(texts, list(langs), lambda v, t, _: encode_query_texts(v.model, t, **options))
