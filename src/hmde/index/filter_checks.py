"""What a filter may name and compare, checked against an index's documents before any search
(:func:`check_fields`): a field no document has is refused (a typo matched nothing, silently), and so is a
comparison with a value of a kind the field never holds (``year == "2019"`` where every year is a number), each in one
line naming the field; a comparison guarded by a kind test of its field is never refused. The kinds of a metadata
value (:func:`value_kind`) are JSON's, integers and decimals one kind: numbers."""

from __future__ import annotations

import difflib
import json
from typing import Sequence

from .filters import BUILT_IN, And, Compare, FilterError, In, IsKind, Not, Or


def fields(tree) -> set[str]:
    """The field names a tree reads."""
    if isinstance(tree, (Compare, In, IsKind)):
        return {tree.field}
    if isinstance(tree, Not):
        return fields(tree.part)
    return set().union(*(fields(p) for p in tree.parts))


def _checked(tree, guarded: frozenset = frozenset()):
    """The comparisons :func:`check_fields` checks: every one but those guarded by a kind test of their field in the
    same ``and`` (``year is number and year > 2019``), which are false where the field is absent or of another kind;
    kind tests themselves name fields that may be absent."""
    if isinstance(tree, (Compare, In)):
        if tree.field not in guarded:
            yield tree
    elif isinstance(tree, Not):
        yield from _checked(tree.part)
    elif isinstance(tree, (And, Or)):
        inner = guarded if isinstance(tree, Or) else frozenset(
            p.field for p in tree.parts if isinstance(p, IsKind) and not p.negated and p.kind != "null")
        for part in tree.parts:
            yield from _checked(part, inner if isinstance(tree, And) else frozenset())


# what a metadata value is, as the stores tell (JSON's types; integers and decimals are one kind: numbers)
KIND_NAMES = {"string": "strings", "number": "numbers", "boolean": "true/false", "list": "lists",
              "object": "objects", "null": "nulls"}
_DUCKDB_KINDS = {"VARCHAR": "string", "BIGINT": "number", "UBIGINT": "number", "DOUBLE": "number",
                 "BOOLEAN": "boolean", "ARRAY": "list", "OBJECT": "object", "NULL": "null"}


def value_kind(value) -> str:
    """The kind of a metadata value (or a filter's literal)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "list" if isinstance(value, (list, tuple)) else "object"


def duckdb_kind(json_type: str) -> str:
    return _DUCKDB_KINDS.get(json_type, "object")


def _literal_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else json.dumps(value, ensure_ascii=False)


def _leaves(tree):
    for node in _checked(tree):
        if isinstance(node, Compare):
            yield node.field, node.op, node.value
        else:
            for value in node.values:
                yield node.field, "not in" if node.negated else "in", value


def _unknown_field(name: str, known: Sequence[str]) -> FilterError:
    """One line naming the field, the nearest names, and at most 20 of the others (an index may have 10,000 keys)."""
    names = sorted(set(BUILT_IN) | set(known))
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {' or '.join(repr(x) for x in close)}? " if close else ""
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20:,} more" if len(names) > 20 else "")
    return FilterError(f"filter: no document has the field '{name}' ({hint}fields: {shown})")


def check_fields(tree, known) -> None:
    """Refuse a field that no document has (a typo would match nothing, silently), and, where ``known`` maps each
    metadata key to the kinds of value it holds (:func:`value_kind`), a comparison with a value of a kind the field
    never holds (``year == "2019"`` where every year is a number matched nothing, silently): one line naming the
    field and both kinds. ``doc_id`` and ``lang`` hold strings."""
    kinds = {name: {"string"} for name in BUILT_IN}
    if isinstance(known, dict):
        kinds.update((k, set(v)) for k, v in known.items())
    unknown = sorted({node.field for node in _checked(tree)} - set(BUILT_IN) - set(known))
    if unknown:
        raise _unknown_field(unknown[0], list(known))
    for name, op, value in _leaves(tree):
        held = kinds.get(name)
        kind = value_kind(value)
        if held is None or kind in held:
            continue
        text = _literal_text(value)
        comparable = sorted(held & {"string", "number", "boolean"})
        if not comparable:
            raise FilterError(f"filter: {name} {op} {text}: the field '{name}' holds "
                              f"{' and '.join(KIND_NAMES[k] for k in sorted(held))}, which a filter does not compare")
        hint = ""
        if comparable == ["number"] and kind == "string":
            try:
                hint = f" (e.g. {name} {op} {_literal_text(json.loads(value))})" if value_kind(json.loads(value)) == \
                    "number" else ""
            except (TypeError, ValueError):
                hint = ""
        elif comparable == ["string"] and kind != "string":
            hint = f" (e.g. {name} {op} {json.dumps(_literal_text(value))})"
        raise FilterError(f"filter: {name} {op} {text}: the field '{name}' holds "
                          f"{' and '.join(KIND_NAMES[k] for k in comparable)}, never {KIND_NAMES[kind]}, so this "
                          f"compares with no document: compare it with a value of its kind{hint}")


# -- what a filter may name ---------------------------------------------------------------------------------
def metadata_fields(index) -> dict[str, list[str]]:
    """The metadata keys any document of an open index has, each with the kinds of value it holds (each store
    answers, once per snapshot): every filtered search checks its fields against them before any model or query
    work."""
    return index.metadata_fields()
