"""A filter's tree (:mod:`hmde.index.filters`) as a Milvus boolean expression, with the same answers as the local
index's DuckDB (and :func:`hmde.index.filter_eval.matches`, the reference).

Milvus's logic differs from SQL's where a document's field is missing or of another type: ``!=`` and ``not`` count a
value of another type as different (``metadata["year"] != 2020`` keeps ``"2020"``), ``in`` takes no JSON key
(Milvus Lite: "left side of 'in' must be a field reference"), ``true`` is the number 1 (``flag == true`` matched
documents whose flag is 1, ``flag > 0`` those whose flag is true), and ``not`` over a comparison drops rows it should
keep (``not (f >= "")`` kept nothing). So the tree is first put in negation normal form (``not`` pushed down to the
comparisons, each flipped: ``not a < b`` is ``a >= b``, which in three-valued logic differs only where the answer is
unknown, and an unknown answer keeps a document out either way), ``in`` written as ``==`` joined by ``or``, and
every comparison guarded by the kind of its value as the row's ``kinds`` field records it (hmde writes each metadata
key's kind beside the metadata: ``kinds["year"] == "number"``), which also answers the kind tests (``year is
number``, ``year is null``). Collections written before ``kinds`` existed keep the older guards (a string is
``>= ""``, a number ``< 0 or >= 0``; they cannot tell ``true`` from 1) and refuse kind tests in one line. Values are
written as Milvus literals (:func:`literal`), never pasted.
"""

from __future__ import annotations

from .filter_checks import value_kind
from .filters import BUILT_IN, And, Compare, FilterError, In, IsKind, Not, Or

KINDS_FIELD = "kinds"  # each row's metadata keys with the kind of their values (hmde.index.filter_checks.value_kind)

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
    if isinstance(tree, IsKind):
        return IsKind(tree.field, tree.kind, tree.negated != negate)
    if isinstance(tree, In):
        inside = tree.negated != negate  # "not in", or "in" under a not: every value differs
        leaves = tuple(Compare(tree.field, "!=" if inside else "==", v) for v in tree.values)
        return leaves[0] if len(leaves) == 1 else (And(leaves) if inside else Or(leaves))
    parts = tuple(negation_normal_form(p, negate) for p in tree.parts)
    flips = isinstance(tree, And) == negate  # De Morgan
    return Or(parts) if flips else And(parts)


def kinds_of(metadata: dict) -> dict:
    """A row's ``kinds``: each metadata key's kind (the field a filter's guards read)."""
    return {str(k): value_kind(v) for k, v in (metadata or {}).items()}


def _field(name: str) -> str:
    return name if name in BUILT_IN else f"metadata[{literal(name)}]"


ALL = "generation >= 0"  # true for every row
_OPPOSITE = {NOTHING: ALL, ALL: NOTHING, 'lang != ""': 'lang == ""', 'lang == ""': 'lang != ""'}


def _kind_test(field: str, kind: str, negated: bool) -> str:
    """``field is KIND`` (``negated``: is not) from the row's ``kinds``; ``null``: absent or null."""
    if field in BUILT_IN:  # strings; a document without a language keeps '' in Milvus (its null)
        if field == "lang":
            test = 'lang != ""' if kind == "string" else 'lang == ""' if kind == "null" else NOTHING
        else:
            test = ALL if kind == "string" else NOTHING
        return _OPPOSITE[test] if negated else test
    recorded = f"{KINDS_FIELD}[{literal(field)}]"
    if kind == "null":  # absent (no key), or recorded as a null
        return f"({recorded} is not null and {recorded} != \"null\")" if negated else \
            f"({recorded} is null or {recorded} == \"null\")"
    return f"({recorded} is null or {recorded} != {literal(kind)})" if negated else f"({recorded} == {literal(kind)})"


def _legacy_guard(field: str, value) -> str:
    """The guards of a collection without ``kinds``: true where the field holds ``value``'s type, or a number for a
    boolean."""
    if isinstance(value, bool):
        return f"({field} == true or {field} == false)"
    if isinstance(value, (int, float)):
        return f"({field} < 0 or {field} >= 0)"
    return f'{field} >= ""'


def _leaf(node, typed: bool) -> str:
    if isinstance(node, IsKind):
        if not typed and node.field not in BUILT_IN:
            raise FilterError(f"filter: '{node.field} is {node.kind}': this Milvus index was written before kind tests "
                              "(its rows record no kinds); rebuild it (hmde index build ... --overwrite)")
        return _kind_test(node.field, node.kind, node.negated)
    if node.field in BUILT_IN:
        if not isinstance(node.value, str):
            return NOTHING  # doc_id and lang are strings: a number or a boolean compares unknown
        # a document without a language keeps '' in Milvus, and the reference answers unknown for it
        return f'({node.field} {node.op} {literal(node.value)} and {node.field} != "")'
    field = _field(node.field)
    parts = [f"{field} {node.op} {literal(node.value)}"]
    if typed:
        parts.append(_kind_test(node.field, value_kind(node.value), False))
    elif node.op == "!=" or isinstance(node.value, bool):
        parts.append(_legacy_guard(field, node.value))
    return f"({' and '.join(parts)})"


def to_milvus(tree, typed: bool = True) -> str:
    """The expression of a filter's tree for Milvus's scalar filtering (fields ``doc_id``, ``lang``, ``metadata``
    and, ``typed``, ``kinds``)."""
    def walk(node) -> str:
        if isinstance(node, (Compare, IsKind)):
            return _leaf(node, typed)
        joiner = " and " if isinstance(node, And) else " or "
        return "(" + joiner.join(walk(p) for p in node.parts) + ")"

    return walk(negation_normal_form(tree))
