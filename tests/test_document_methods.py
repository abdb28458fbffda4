"""The document-method registry (hmde.methods): every method is one class found by
name, and what callers ask of a method (does it need an hmde model, is it fitted, can it be
fine-tuned, does it give contextualised sentences) is said by the class, not by its name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hmde.encoders.config import DOCUMENT_METHODS
from hmde.methods import REGISTRY, default_method, method_class
from hmde.errors import HmdeError

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hmde"


def test_the_registry_serves_exactly_the_names_the_flags_offer():
    assert tuple(REGISTRY) == DOCUMENT_METHODS
    assert all(cls.name == name and cls.summary for name, cls in REGISTRY.items())


def test_what_each_method_declares():
    declared = {name: (c.needs_hmde_model, c.fitted, c.fine_tunable, c.contextual) for name, c in REGISTRY.items()}
    assert declared == {"hmde": (True, False, True, True), "first": (False, False, True, False),
                        "seg": (False, False, True, False), "mean": (False, False, True, False),
                        "lawdr": (False, True, False, False), "longformer": (False, False, True, False)}


def test_unknown_method_is_one_line_naming_the_choices():
    with pytest.raises(HmdeError, match=r"unknown method 'avg' \(choose from hmde, first, seg, mean, lawdr, "
                                        r"longformer\)"):
        method_class("avg")


def test_default_method_is_hmde_on_an_hmde_model_and_mean_on_a_sentence_encoder():
    assert (default_method(True), default_method(False)) == ("hmde", "mean")


def method_name_branches(source: str) -> list[int]:
    """Lines that compare something named like a method (``method``, ``args.method``,
    ``getattr(args, "method")``) with a method's name: ==, !=, in, not in."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        constants = [e for side in sides for e in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set))
                                                   else [side])
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        named = any("method" in ast.unparse(side) for side in sides if not isinstance(side, ast.Constant))
        if named and {c.value for c in constants} & set(DOCUMENT_METHODS):
            found.append(node.lineno)
    return found


def test_the_finder_sees_a_branch_on_a_method_name_and_not_other_words():
    source = ('if method == "lawdr":\n    pass\nif args.method not in (None, "hmde"):\n    pass\n'
              'if kind == "hmde":\n    pass\nif reduction != "mean":\n    pass\n')
    assert method_name_branches(source) == [1, 3]


def test_no_branch_on_a_method_name_outside_the_registry():
    branches = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
                if not (path.parent.name == "methods" and path.name != "vectorizer.py")
                for line in method_name_branches(path.read_text(encoding="utf-8"))]
    assert branches == []
