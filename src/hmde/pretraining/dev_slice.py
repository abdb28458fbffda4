"""What training leaves out, for the sentence stage and the pairs it draws (:mod:`hmde.pretraining.sentence_stage`,
:mod:`hmde.pretraining.tail_pairs`): the languages held out of training and the development slice of ``docs/``."""

from __future__ import annotations

import hashlib

from ..text.coverage import DATA_HELD_OUT, RECIPE_HELD_OUT

HELD_OUT = RECIPE_HELD_OUT + DATA_HELD_OUT  # held out of document training: kept out of the sentence stage too
DEV_CONCEPT_EVERY = 3  # one docs/ concept in 3 is kept out of the stage, for the README's keyword rows
VALIDATION_EVERY = 4  # of the rest, one item in 4 is kept out of a routed run that chooses its route (below)
VALIDATION_SALT = "held"  # UDHR's 22 articles outside the development slice give 6 to validation (a quarter; the
# salt "validation" gave 8 of the 22, more than a routed run can spare of its 22 articles a language)
# the Bible chapters of benchmarks/sentence_alignment.py's verse documents (sentence alignment's dev table, issue 55):
# kept out of every Bible pair a run trains on
ALIGNMENT_DEV_CHAPTERS = ("MAT.5", "MRK.4", "LUK.15", "JHN.3", "ACT.2", "ROM.8", "1CO.13", "GAL.5", "HEB.11", "REV.21",
                          "MAT.13", "LUK.24", "JHN.11", "ACT.27", "JAS.3")
PARTS = ("all", "training", "validation")  # what a pair sampler takes of the items validation_item divides


def dev_concept(source: str, concept: str) -> bool:
    """Whether a ``docs/`` concept belongs to the development slice that the title and heading pairs never use:
    the README's keyword rows (English help-page titles -> the page's body in another language,
    benchmarks/contextual_retrieval.py) take their queries from it, so a model trained on these pairs is measured
    on pages it did not see. A third of the concepts, by a hash of ``source/concept`` (the same on every machine)."""
    digest = hashlib.sha256(f"{source}/{concept}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % DEV_CONCEPT_EVERY == 0


def validation_item(source: str, key: str) -> bool:
    """Whether an item a routed encoder's pairs could use (a UDHR article or a Bible chapter by its concept, a
    translation pair by its English text) is in the **validation slice**: kept out of a routed run that chooses its
    route (``hmde sentence-stage --select-route``), so that each language is routed only where texts the run never
    saw say it gains (:mod:`hmde.pretraining.route_validation`). One item in 4 of those outside the development
    slice, by a hash of ``source/key``: the two slices never meet, so choosing the route never sees what
    ``benchmarks/languages.py --udhr-articles dev`` scores."""
    if dev_concept(source, key):
        return False
    digest = hashlib.sha256(f"{VALIDATION_SALT}/{source}/{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % VALIDATION_EVERY == 0


def in_part(part: str, source: str, key: str) -> bool:
    """Whether an item belongs to ``part`` of :data:`PARTS`: every item, those outside the validation slice (what a
    run that chooses its route trains on), or the validation slice alone."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    return part == "all" or validation_item(source, key) == (part == "validation")
