"""A filter's tree (:mod:`hmde.index.filters`) as a Milvus boolean expression, with the same answers as the local
index's DuckDB (and :func:`hmde.index.filters.matches`, the reference).

Milvus's logic differs from SQL's where a document's field is missing or of another type: ``!=`` and ``not`` count a
value of another type as different (``metadata["year"] != 2020`` keeps ``"2020"``), ``in`` takes no JSON key
(Milvus Lite: "left side of 'in' must be a field reference"), and ``true`` is the number 1 (``flag == true`` matched
documents whose flag is 1, ``flag > 0`` those whose flag is true). So the tree is first put in negation normal form
(``not`` pushed down to the comparisons, each flipped: ``not a < b`` is ``a >= b``, which in three-valued logic
differs only where the answer is unknown, and an unknown answer keeps a document out either way), ``in`` written as
``==`` joined by ``or``, every ``!=`` guarded by its value's type (a string is ``>= ""``, a number ``< 0 or >= 0``:
``>= -1e308`` left out the numbers below it), and every comparison with ``true``/``false`` or a number by the row's
``bool_keys`` (the keys whose values are booleans, which hmde writes beside the metadata). Collections written before
``bool_keys`` existed cannot tell ``true`` from 1 (``typed=False``). Values are written as Milvus literals
(:func:`literal`), never pasted.
"""

from __future__ import annotations

from .filters import BUILT_IN, And, Compare, In, Not, Or

BOOL_KEYS = "bool_keys"  # each row's metadata keys whose values are true or false

_FLIP = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
NOTHING = "generation < 0"  # false for every row (a comparison SQL answers unknown for all of them)


def literal(value) -> str:
    """A Milvus literal: strings read backslash escapes of the backslash, the double quote, newline, carriage return
    and tab, any other character as written (JSON's u-escapes were refused: "unknown escape sequence")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return '"' + "".join(_ESCAPES.get(c, c) for c in str(value)) + '"'


def negation_normal_form(tree, negate: bool = False):
    """The tree with ``not`` only on comparisons, as flipped operators; ``in`` as ``==`` / ``!=`` leaves."""
    if isinstance(tree, Not):
        return negation_normal_form(tree.part, not negate)
    if isinstance(tree, Compare):
        return Compare(tree.field, _FLIP[tree.op], tree.value) if negate else tree
    if isinstance(tree, In):
        inside = tree.negated != negate  # "not in", or "in" under a not: every value differs
        leaves = tuple(Compare(tree.field, "!=" if inside else "==", v) for v in tree.values)
        return leaves[0] if len(leaves) == 1 else (And(leaves) if inside else Or(leaves))
    parts = tuple(negation_normal_form(p, negate) for p in tree.parts)
    flips = isinstance(tree, And) == negate  # De Morgan
    return Or(parts) if flips else And(parts)


def _field(name: str) -> str:
    return name if name in BUILT_IN else f"metadata[{literal(name)}]"


def _type_guard(field: str, value) -> str:
    """True where the field holds a value of ``value``'s type, or a number for a boolean (a missing field passes no
    comparison anyway)."""
    if isinstance(value, bool):
        return f"({field} == true or {field} == false)"
    if isinstance(value, (int, float)):
        return f"({field} < 0 or {field} >= 0)"
    return f'{field} >= ""'


def _leaf(node: Compare, typed: bool) -> str:
    if node.field in BUILT_IN:
        if not isinstance(node.value, str):
            return NOTHING  # doc_id and lang are strings: a number or a boolean compares unknown
        # a document without a language keeps '' in Milvus, and the reference answers unknown for it
        return f'({node.field} {node.op} {literal(node.value)} and {node.field} != "")'
    field = _field(node.field)
    parts = [f"{field} {node.op} {literal(node.value)}"]
    if node.op == "!=" or (isinstance(node.value, bool) and not typed):
        parts.append(_type_guard(field, node.value))
    if typed and isinstance(node.value, (bool, int, float)):
        boolean = f"json_contains({BOOL_KEYS}, {literal(node.field)})"
        parts.append(boolean if isinstance(node.value, bool) else f"not {boolean}")
    return f"({' and '.join(parts)})"


def to_milvus(tree, typed: bool = True) -> str:
    """The expression of a filter's tree for Milvus's scalar filtering (fields ``doc_id``, ``lang``, ``metadata``
    and, ``typed``, ``bool_keys``)."""
    def walk(node) -> str:
        if isinstance(node, Compare):
            return _leaf(node, typed)
        joiner = " and " if isinstance(node, And) else " or "
        return "(" + joiner.join(walk(p) for p in node.parts) + ")"

    return walk(negation_normal_form(tree))
