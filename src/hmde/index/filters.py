"""Metadata filters of a search: one syntax for ``hmde search --filter``, ``Index.search(filter=)`` and ``/search``.

The subset of Milvus's boolean expressions that users of vector stores know::

    section == "sport" and date >= "2024-01-01"
    lang in ["deu", "fra"] or not (author == "AP")
    year > 2019 and doc_id not in ["a", "b"]

- comparisons ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` of a field with a string (``"..."`` or ``'...'``, JSON
  escapes) or a number (so ISO dates compare as strings); ``true``/``false`` with ``==``/``!=``;
- ``FIELD in [v, ...]``, ``FIELD not in [v, ...]``;
- ``and``, ``or``, ``not``, parentheses (``&&``, ``||`` and ``!`` too);
- fields: the metadata's keys, ``lang`` and ``doc_id``.

hmde parses an expression into a tree (:func:`parse`) and each store translates the tree, never the text: the
local index into a DuckDB ``WHERE`` clause whose every value is a parameter (:func:`to_duckdb`), Milvus into its own
boolean expression (:func:`hmde.index.milvus_filters.to_milvus`). A document
whose field is missing or of another type matches no comparison (SQL's unknown: ``not`` keeps it out too), in
:func:`matches` (Python) as in DuckDB.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import HmdeError

BUILT_IN = ("doc_id", "lang")  # fields every document has; the others are its metadata's keys
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
MAX_LENGTH = 10_000  # characters of an expression


class FilterError(HmdeError):
    """A malformed filter, or one naming a field no document has: refused before any search."""


@dataclass(frozen=True)
class Compare:
    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class In:
    field: str
    values: tuple
    negated: bool = False


@dataclass(frozen=True)
class And:
    parts: tuple


@dataclass(frozen=True)
class Or:
    parts: tuple


@dataclass(frozen=True)
class Not:
    part: Any


_TOKEN = re.compile(r"""\s*(?:(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
                       |(?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
                       |(?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\)|\[|\]|,)
                       |(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*))""", re.X)
_KEYWORDS = {"and": "and", "or": "or", "not": "not", "in": "in", "AND": "and", "OR": "or", "NOT": "not", "IN": "in",
             "&&": "and", "||": "or", "!": "not"}


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FilterError(f"filter: cannot read {text[pos:].strip()[:20]!r} at character {pos + 1}")
        at = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        if m.group("string") is not None:
            raw = m.group("string")
            body = raw[1:-1] if raw[0] == '"' else raw[1:-1].replace('\\"', '"').replace("\\'", "'").replace('"', '\\"')
            try:
                out.append(("value", json.loads('"' + body + '"'), at))
            except json.JSONDecodeError:
                raise FilterError(f"filter: bad escape in the string at character {at + 1}") from None
        elif m.group("number") is not None:
            number = m.group("number")
            out.append(("value", float(number) if any(c in number for c in ".eE") else int(number), at))
        elif m.group("op") is not None:
            op = m.group("op")
            out.append(("keyword", _KEYWORDS[op], at) if op in _KEYWORDS else ("op", op, at))
        else:
            name = m.group("name")
            if name in _KEYWORDS:
                out.append(("keyword", _KEYWORDS[name], at))
            elif name in ("true", "false", "True", "False"):
                out.append(("value", name.lower() == "true", at))
            else:
                out.append(("name", name, at))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, self.i = text, _tokens(text), 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", None, len(self.text))

    def take(self, kind: str, value=None):
        token = self.peek()
        if token[0] != kind or (value is not None and token[1] != value):
            want = value or {"name": "a field name", "value": "a value"}.get(kind, kind)
            got = "the end" if token[0] == "end" else repr(token[1])
            raise FilterError(f"filter: expected {want} at character {token[2] + 1}, found {got}")
        self.i += 1
        return token

    def expression(self):
        parts = [self.conjunction()]
        while self.peek()[:2] == ("keyword", "or"):
            self.i += 1
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self):
        parts = [self.negation()]
        while self.peek()[:2] == ("keyword", "and"):
            self.i += 1
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def negation(self):
        if self.peek()[:2] == ("keyword", "not"):
            self.i += 1
            return Not(self.negation())
        if self.peek()[:2] == ("op", "("):
            self.i += 1
            inner = self.expression()
            self.take("op", ")")
            return inner
        return self.condition()

    def condition(self):
        name = self.take("name")[1]
        token = self.peek()
        if token[:2] == ("keyword", "not"):
            self.i += 1
            self.take("keyword", "in")
            return In(name, self.values(), negated=True)
        if token[:2] == ("keyword", "in"):
            self.i += 1
            return In(name, self.values())
        if token[0] != "op" or token[1] not in OPERATORS:
            got = "the end" if token[0] == "end" else repr(token[1])
            raise FilterError(f"filter: expected a comparison (==, !=, <, <=, >, >=, in, not in) after '{name}' at "
                              f"character {token[2] + 1}, found {got}")
        self.i += 1
        value = self.take("value")[1]
        if isinstance(value, bool) and token[1] not in ("==", "!="):
            raise FilterError(f"filter: {name} {token[1]} {str(value).lower()}: true and false compare with == or != only")
        return Compare(name, token[1], value)

    def values(self) -> tuple:
        self.take("op", "[")
        values = []
        if self.peek()[:2] != ("op", "]"):
            values.append(self.take("value")[1])
            while self.peek()[:2] == ("op", ","):
                self.i += 1
                values.append(self.take("value")[1])
        self.take("op", "]")
        if not values:
            raise FilterError("filter: an empty list after 'in'")
        return tuple(values)


def parse(text: str):
    """The tree of a filter expression; :class:`FilterError` (one line, where it went wrong) if malformed."""
    if not isinstance(text, str) or not text.strip():
        raise FilterError("filter: an empty expression (e.g. section == \"sport\")")
    if len(text) > MAX_LENGTH:
        raise FilterError(f"filter: {len(text):,} characters; at most {MAX_LENGTH:,}")
    parser = _Parser(text)
    tree = parser.expression()
    if parser.peek()[0] != "end":
        token = parser.peek()
        raise FilterError(f"filter: unexpected {token[1]!r} at character {token[2] + 1}")
    return tree


def fields(tree) -> set[str]:
    """The field names a tree reads."""
    if isinstance(tree, (Compare, In)):
        return {tree.field}
    if isinstance(tree, Not):
        return fields(tree.part)
    return set().union(*(fields(p) for p in tree.parts))


def check_fields(tree, known: Sequence[str]) -> None:
    """Refuse a field that no document has (a typo would match nothing, silently)."""
    unknown = sorted(fields(tree) - set(BUILT_IN) - set(known))
    if unknown:
        listed = ", ".join(sorted(set(BUILT_IN) | set(known)))
        raise FilterError(f"filter: no document has the field '{unknown[0]}' (fields: {listed})")


# -- evaluation in Python (SQL's three-valued logic: None is unknown) ---------------------------------------
def _compare(value, op: str, literal):
    if value is None:
        return None
    if isinstance(literal, bool) or isinstance(value, bool):
        if not (isinstance(literal, bool) and isinstance(value, bool)):
            return None
    elif isinstance(literal, (int, float)):
        if not isinstance(value, (int, float)):
            return None
    elif not isinstance(value, str):
        return None
    return {"==": value == literal, "!=": value != literal, "<": value < literal, "<=": value <= literal,
            ">": value > literal, ">=": value >= literal}[op]


def _truth(tree, record: dict):
    if isinstance(tree, Compare):
        return _compare(record.get(tree.field), tree.op, tree.value)
    if isinstance(tree, In):
        answers = [_compare(record.get(tree.field), "==", v) for v in tree.values]
        found = True if any(a is True for a in answers) else None if any(a is None for a in answers) else False
        return None if found is None else (not found if tree.negated else found)
    if isinstance(tree, Not):
        inner = _truth(tree.part, record)
        return None if inner is None else not inner
    answers = [_truth(p, record) for p in tree.parts]
    if isinstance(tree, And):
        return False if any(a is False for a in answers) else None if any(a is None for a in answers) else True
    return True if any(a is True for a in answers) else None if any(a is None for a in answers) else False


def matches(tree, doc_id: str, lang: str | None, metadata: dict | None) -> bool:
    """Whether a document passes the filter (what the stores compute, in Python: the brute-force reference)."""
    return _truth(tree, {**(metadata or {}), "doc_id": doc_id, "lang": lang}) is True


# -- the local index: a DuckDB WHERE clause, every value a parameter ----------------------------------------------
def _json_path(field: str) -> str:
    return "$." + json.dumps(field)  # $."key": any key, quoted as JSON


def _duckdb_value_sql(field: str, literal, params: list) -> str:
    """The SQL of a field's value, typed as the literal it is compared with (NULL where the type differs)."""
    if field in BUILT_IN:
        return field if isinstance(literal, str) else "NULL"
    if isinstance(literal, bool):
        kinds, value = "('BOOLEAN')", "json_extract(metadata, ?)::BOOLEAN"
    elif isinstance(literal, (int, float)):
        kinds, value = "('BIGINT', 'UBIGINT', 'DOUBLE')", "json_extract(metadata, ?)::DOUBLE"
    else:
        kinds, value = "('VARCHAR')", "json_extract_string(metadata, ?)"
    params.extend([_json_path(field), _json_path(field)])
    return f"(CASE WHEN json_type(metadata, ?) IN {kinds} THEN {value} END)"


def to_duckdb(tree) -> tuple[str, list]:
    """``(sql, params)``: a condition on the table ``docs`` (columns ``doc_id``, ``lang``, ``metadata`` as JSON
    text); the expression's values are parameters only."""
    params: list = []

    def walk(node) -> str:
        if isinstance(node, Compare):
            field = _duckdb_value_sql(node.field, node.value, params)
            params.append(float(node.value) if isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
                          else node.value)
            return f"({field} {'=' if node.op == '==' else '<>' if node.op == '!=' else node.op} ?)"
        if isinstance(node, In):
            ors = [walk(Compare(node.field, "==", v)) for v in node.values]
            inner = "(" + " OR ".join(ors) + ")"
            return f"(NOT {inner})" if node.negated else inner
        if isinstance(node, Not):
            return f"(NOT {walk(node.part)})"
        joiner = " AND " if isinstance(node, And) else " OR "
        return "(" + joiner.join(walk(p) for p in node.parts) + ")"

    return walk(tree), params


# -- what a filter may name ---------------------------------------------------------------------------------
def metadata_keys(index) -> list[str]:
    """The metadata keys any document of an open index has (each store answers, once per snapshot): every filtered
    search checks its fields against them before any model or query work."""
    return index.metadata_keys()
