"""The frameworks' own filter languages as hmde's filter tree (:mod:`hmde.index.filters`), so that a filter written
for LangChain, LlamaIndex or Haystack is pushed down into every store as ``hmde search --filter`` is (issue 76).

:func:`to_tree` takes any of them (and hmde's own expression, or a tree):

- **hmde's expression** (a string): parsed as ``hmde search --filter`` parses it.
- **LangChain's dict filters**, in the form its popular stores accept (Chroma, PGVector, Pinecone):
  ``{"section": "sport"}``, ``{"year": {"$gte": 2020, "$lt": 2024}}``, ``$eq $ne $gt $gte $lt $lte $in $nin``,
  ``$exists``, ``$between``, and ``$and``, ``$or``, ``$not``; several keys in one dict are all required. They keep
  hmde's own semantics (SQL's, as PGVector's): a comparison is unknown where a document lacks the field, so
  ``{"year": {"$ne": 2020}}`` keeps documents that have a year other than 2020.
- **Haystack's filter dicts** (``{"field": "meta.year", "operator": ">=", "value": 2020}``, ``{"operator": "AND",
  "conditions": [...]}``): every comparison and logical operator its document stores implement, with its semantics:
  a comparison is false where the field is missing or holds another kind (``!=`` and ``not in`` are then true),
  ``== None`` matches a missing field, ``> None`` nothing, ``NOT`` is the negation of all its conditions together,
  and ``>``, ``>=``, ``<``, ``<=`` take numbers or ISO dates (compared as strings: write them in one format).
- **LlamaIndex's** ``MetadataFilters`` (read by their attributes: no import of LlamaIndex here): ``==``, ``!=``,
  ``>``, ``>=``, ``<``, ``<=``, ``in``, ``nin``, ``is_empty`` and the conditions ``and``, ``or``, ``not`` (none of its
  filters matches), nested, with its semantics (as Haystack's: a missing field matches only ``!=`` and ``nin``).
  ``contains``, ``any``, ``all``, ``text_match`` and ``text_match_insensitive`` compare inside lists and texts, which
  hmde's filters do not: each is refused in one line naming it.

Where the frameworks' semantics are two-valued (Haystack, LlamaIndex), each comparison is written guarded by a kind
test of its field (``year is number and year == 2020``): false where the field is missing or of another kind, and
never refused for a field no document has yet. Every refusal is a :class:`hmde.index.filters.FilterError` of one line
naming the operator or key, raised before any model loads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .filter_checks import value_kind
from .filters import MAX_DEPTH, And, Compare, FilterError, In, IsKind, Not, Or, check_tree, parse

TREES = (Compare, In, IsKind, Not, And, Or)
# a form's own nesting is bounded at MAX_DEPTH as it is read (_deeper); its tree may be deeper by the kind guards and
# negations that keep the frameworks' two-valued semantics (a NOT is Not(And(...)), a comparison And(IsKind, ...))
TREE_DEPTH = 2 * MAX_DEPTH + 3
_LANGCHAIN_OPS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_HAYSTACK_FIELDS = {"id": "doc_id"}  # and meta.KEY -> KEY


def to_tree(filter: Any):
    """Any filter form above as a tree, checked by one rule whatever its form (:func:`hmde.index.filters.check_tree`:
    depth, values, fields); None for no filter (None, or an empty dict or list)."""
    tree = _converted(filter)
    if tree is not None and not isinstance(filter, str):  # the expression's parser checks as it reads
        check_tree(tree, TREE_DEPTH)
    return tree


def _deeper(depth: int) -> int:
    """The next level of a framework's nesting, refused past hmde's bound before Python's own."""
    if depth >= MAX_DEPTH:
        raise FilterError(f"filter: nested deeper than {MAX_DEPTH} levels of and, or and not")
    return depth + 1


def _converted(filter: Any):
    if filter is None or isinstance(filter, TREES):
        return filter
    if isinstance(filter, str):
        return parse(filter)
    if hasattr(filter, "filters") and hasattr(filter, "condition"):
        return from_llama_index(filter)
    if isinstance(filter, dict):
        if not filter:
            return None
        if "conditions" in filter or ("field" in filter and "operator" in filter) or \
                filter.get("operator") in ("AND", "OR", "NOT"):
            return from_haystack(filter)
        return from_langchain(filter)
    raise FilterError(f"filter: expected hmde's expression (a string), a LangChain or Haystack filter dict, or "
                      f"LlamaIndex's MetadataFilters, got {type(filter).__name__}")


def _nothing(field: str):
    """A condition no document meets (a field is null and is not)."""
    return And((IsKind(field, "null"), IsKind(field, "null", negated=True)))


def _scalar(value, where: str):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise FilterError(f"filter: {where}: {value!r} is no string, number or true/false")


# -- LangChain: hmde's own (SQL's) semantics -------------------------------------------------------------------
def from_langchain(filter: dict, depth: int = 0):
    parts = []
    for key, value in filter.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"filter: {key} takes a non-empty list of filters, got {value!r}")
            inner = tuple(from_langchain(_dict(v, key), _deeper(depth)) for v in value)
            parts.append(inner[0] if len(inner) == 1 else (And(inner) if key == "$and" else Or(inner)))
        elif key == "$not":
            parts.append(Not(from_langchain(_dict(value, key), _deeper(depth))))
        elif key.startswith("$"):
            raise FilterError(f"filter: the operator {key} is not one hmde's LangChain filters take at the top "
                              "($and, $or, $not, or a field name)")
        else:
            parts.append(_langchain_field(key, value))
    if not parts:
        raise FilterError("filter: an empty filter dict inside $and, $or or $not")
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise FilterError(f"filter: {where} takes filter dicts, got {value!r}")
    return value


def _langchain_field(field: str, value):
    if not isinstance(value, dict):
        value = _scalar(value, field)
        return IsKind(field, "null") if value is None else Compare(field, "==", value)
    if not value:
        raise FilterError(f"filter: {field}: an empty operator dict")
    parts = []
    for op, operand in value.items():
        where = f"{field}: {op}"
        if op in _LANGCHAIN_OPS:
            operand = _scalar(operand, where)
            if operand is None:
                parts.append(IsKind(field, "null", negated=op == "$ne") if op in ("$eq", "$ne") else _nothing(field))
            else:
                parts.append(Compare(field, _LANGCHAIN_OPS[op], operand))
        elif op in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise FilterError(f"filter: {where} takes a list, got {operand!r}")
            values = tuple(_scalar(v, where) for v in operand if v is not None)
            parts.append(In(field, values, negated=op == "$nin") if values else
                         (_nothing(field) if op == "$in" else IsKind(field, "null", negated=True)))
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise FilterError(f"filter: {where} takes true or false, got {operand!r}")
            parts.append(IsKind(field, "null", negated=operand))
        elif op == "$between":
            if not isinstance(operand, list) or len(operand) != 2:
                raise FilterError(f"filter: {where} takes [low, high], got {operand!r}")
            parts.append(And((Compare(field, ">=", _scalar(operand[0], where)),
                              Compare(field, "<=", _scalar(operand[1], where)))))
        else:
            raise FilterError(f"filter: {where}: hmde's filters do not take the operator {op} (they take "
                              f"{', '.join([*_LANGCHAIN_OPS, '$in', '$nin', '$exists', '$between'])})")
    return parts[0] if len(parts) == 1 else And(tuple(parts))


# -- two-valued comparisons (Haystack, LlamaIndex) ----------------------------------------------------------------
def _guarded(field: str, op: str, value):
    """``field op value`` true or false, never unknown: false where the field is missing or of another kind."""
    return And((IsKind(field, value_kind(value)), Compare(field, op, value)))


def _guarded_in(field: str, values: list):
    by_kind: dict[str, list] = {}
    for v in values:
        by_kind.setdefault(value_kind(v), []).append(v)
    parts = tuple(And((IsKind(field, kind), In(field, tuple(vs)))) for kind, vs in by_kind.items())
    return _nothing(field) if not parts else parts[0] if len(parts) == 1 else Or(parts)


def _two_valued(field: str, op: str, value, where: str):
    """A framework's comparison: ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``not in``."""
    if op in ("in", "not in"):
        if not isinstance(value, list):
            raise FilterError(f"filter: {where}: '{op}' takes a list, got {value!r}")
        values = [_scalar(v, where) for v in value]
        inside = _guarded_in(field, [v for v in values if v is not None])
        if None in values:
            inside = Or((inside, IsKind(field, "null")))
        return Not(inside) if op == "not in" else inside
    value = _scalar(value, where)
    if op in ("==", "!="):
        if value is None:
            return IsKind(field, "null", negated=op == "!=")
        equal = _guarded(field, "==", value)
        return Not(equal) if op == "!=" else equal
    if value is None:
        return _nothing(field)
    if isinstance(value, bool):
        raise FilterError(f"filter: {where}: '{op}' compares numbers and ISO dates, not true/false")
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise FilterError(f"filter: {where}: '{op}' compares numbers and ISO dates; {value!r} is a string that "
                              "is no ISO date") from None
    return _guarded(field, op, value)


# -- Haystack ------------------------------------------------------------------------------------------------------
def from_haystack(filter: dict, depth: int = 0):
    if not isinstance(filter, dict):
        raise FilterError(f"filter: a Haystack filter is a dict, got {filter!r}")
    if "field" in filter:
        for key in ("operator", "value"):
            if key not in filter:
                raise FilterError(f"filter: the condition on '{filter['field']}' has no '{key}' key")
        field, op = filter["field"], filter["operator"]
        if not isinstance(field, str):
            raise FilterError(f"filter: a condition's field must be a string, got {field!r}")
        if op not in ("==", "!=", ">", ">=", "<", "<=", "in", "not in"):
            raise FilterError(f"filter: '{field}': Haystack's operator {op!r} is not one hmde takes (==, !=, >, >=, "
                              "<, <=, in, not in; AND, OR, NOT)")
        return _two_valued(_haystack_field(field), op, filter["value"], field)
    if "operator" not in filter:
        raise FilterError("filter: a logical condition has no 'operator' key (AND, OR, NOT)")
    op = filter["operator"]
    if op not in ("AND", "OR", "NOT"):
        raise FilterError(f"filter: {op!r} is no logical operator (AND, OR, NOT), and a comparison needs a 'field'")
    conditions = filter.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise FilterError(f"filter: the {op} condition needs a non-empty list under 'conditions'")
    parts = tuple(from_haystack(c, _deeper(depth)) for c in conditions)
    joined = parts[0] if len(parts) == 1 else (Or(parts) if op == "OR" else And(parts))
    return Not(joined) if op == "NOT" else joined


def _haystack_field(field: str) -> str:
    if field.startswith("meta."):
        return field[len("meta."):]
    if field in _HAYSTACK_FIELDS:
        return _HAYSTACK_FIELDS[field]
    if field in ("content", "embedding", "sparse_embedding", "blob", "score"):
        raise FilterError(f"filter: '{field}': hmde filters documents by their metadata (meta.KEY) and id, not by "
                          f"their {field}")
    return field  # a bare key: the metadata's, as Haystack's in-memory store reads it


# -- LlamaIndex ----------------------------------------------------------------------------------------------------
_LLAMA_OPS = {"==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "in": "in", "nin": "not in"}


def from_llama_index(filters, depth: int = 0):
    condition = str(getattr(filters.condition, "value", filters.condition) or "and").lower()
    if condition not in ("and", "or", "not"):
        raise FilterError(f"filter: LlamaIndex's condition {condition!r} is not one hmde takes (and, or, not)")
    parts = []
    for one in filters.filters:
        if hasattr(one, "filters") and hasattr(one, "condition"):
            parts.append(from_llama_index(one, _deeper(depth)))
            continue
        op = str(getattr(one.operator, "value", one.operator))
        field = str(one.key)
        if op == "is_empty":  # missing, null or the empty string (an empty list is not told apart here)
            parts.append(Or((IsKind(field, "null"), _guarded(field, "==", ""))))
        elif op in _LLAMA_OPS:
            parts.append(_two_valued(field, _LLAMA_OPS[op], one.value, field))
        else:
            raise FilterError(f"filter: '{field}': LlamaIndex's operator {op} compares inside lists or texts, which "
                              "hmde's filters do not (they take ==, !=, >, >=, <, <=, in, nin, is_empty)")
    if not parts:
        return None
    if condition == "not":  # LlamaIndex: none of the filters matches
        return Not(parts[0] if len(parts) == 1 else Or(tuple(parts)))
    return parts[0] if len(parts) == 1 else (And(tuple(parts)) if condition == "and" else Or(tuple(parts)))
