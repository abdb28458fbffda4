"""What training leaves out, for the sentence stage and the pairs it draws (:mod:`hmde.pretraining.sentence_stage`,
:mod:`hmde.pretraining.tail_pairs`): the languages held out of training and the development slice of ``docs/``."""

from __future__ import annotations

import hashlib

from ..text.coverage import DATA_HELD_OUT, RECIPE_HELD_OUT

HELD_OUT = RECIPE_HELD_OUT + DATA_HELD_OUT  # held out of document training: kept out of the sentence stage too
DEV_CONCEPT_EVERY = 3  # one docs/ concept in 3 is kept out of the stage, for the README's keyword rows


def dev_concept(source: str, concept: str) -> bool:
    """Whether a ``docs/`` concept belongs to the development slice that the title and heading pairs never use:
    the README's keyword rows (English help-page titles -> the page's body in another language,
    benchmarks/contextual_retrieval.py) take their queries from it, so a model trained on these pairs is measured
    on pages it did not see. A third of the concepts, by a hash of ``source/concept`` (the same on every machine)."""
    digest = hashlib.sha256(f"{source}/{concept}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % DEV_CONCEPT_EVERY == 0
