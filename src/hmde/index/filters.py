"""Metadata filters of a search: one syntax for ``hmde search --filter``, ``Index.search(filter=)`` and ``/search``.

The subset of Milvus's boolean expressions that users of vector stores know::

    section == "sport" and date >= "2024-01-01"
    lang in ["deu", "fra"] or not (author == "AP")
    year > 2019 and doc_id not in ["a", "b"]

- comparisons ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` of a field with a string (``"..."`` or ``'...'``, JSON
  escapes) or a number (so ISO dates compare as strings); ``true``/``false`` with ``==``/``!=``;
- ``FIELD in [v, ...]``, ``FIELD not in [v, ...]``;
- kind tests: ``FIELD is null`` (absent, or null), ``FIELD is not null``, ``FIELD is string`` (``number``,
  ``boolean``, ``list``, ``object``), ``FIELD is not string``... A kind test is always true or false, never unknown;
  a comparison guarded by a kind test of its field in the same ``and`` (``year is number and year > 2019``) is never
  refused for its field (absent from every document, or of another kind): it is false there. The frameworks'
  filters, whose comparisons are false where a field is missing (Haystack, LlamaIndex), are written so
  (:mod:`hmde.integrations.filter_forms`);
- ``and``, ``or``, ``not``, parentheses (``&&``, ``||`` and ``!`` too);
- fields: the metadata's keys, ``lang`` and ``doc_id``.

An expression is refused in one line, before any search, where it is malformed, longer than 10,000 characters,
nested deeper than 32 levels of parentheses and ``not`` (a deeper one crashed Python's and Milvus's parsers), not
valid Unicode (a lone surrogate), or holds a number no store can compare (``1e999``, an integer beyond 64 bits); and
where it names a field no document has, or compares a field with a value of a type the field never holds
(``year == "2019"`` where every year is a number: it would match nothing, silently) (:func:`check_fields`).

hmde parses an expression into a tree (:func:`parse`) and each store translates the tree, never the text: the
local index into a DuckDB ``WHERE`` clause whose every value is a parameter (:func:`to_duckdb`), Milvus into its own
boolean expression (:func:`hmde.index.milvus_filters.to_milvus`). A document
whose field is missing or of another type matches no comparison (SQL's unknown: ``not`` keeps it out too), in
:func:`matches` (Python) as in DuckDB.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import HmdeError
from ..io.documents import surrogate_at

BUILT_IN = ("doc_id", "lang")  # fields every document has; the others are its metadata's keys
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
MAX_LENGTH = 10_000  # characters of an expression
MAX_DEPTH = 32  # nested parentheses and nots (Milvus Lite's parser failed at about 60 of its own levels)
INT64 = (-2 ** 63, 2 ** 63 - 1)  # what Milvus's JSON and DuckDB's BIGINT hold


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


KINDS = ("null", "string", "number", "boolean", "list", "object")


@dataclass(frozen=True)
class IsKind:
    """``field is KIND`` (``negated``: ``is not``): true or false, never unknown; ``null``: absent or null."""

    field: str
    kind: str
    negated: bool = False


_TOKEN = re.compile(r"""\s*(?:(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
                       |(?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
                       |(?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\)|\[|\]|,)
                       |(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*))""", re.X)
_KEYWORDS = {"and": "and", "or": "or", "not": "not", "in": "in", "AND": "and", "OR": "or", "NOT": "not", "IN": "in",
             "is": "is", "IS": "is",
             "&&": "and", "||": "or", "!": "not"}


def value_problem(value) -> str | None:
    """Why no store can compare ``value`` (a lone surrogate, a number that is not finite, an integer beyond 64 bits),
    or None: one rule for every filter form (issue 94: LangChain's ``{"$lt": inf}`` reached Milvus as a field)."""
    if isinstance(value, str):
        bad = surrogate_at(value)
        if bad is not None:
            return f"holds a lone surrogate (U+{ord(value[bad]):04X}), which is not text: a filter must be valid Unicode"
    elif isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        return "is beyond a 64-bit integer, which no store compares"
    return None


def _check_value(value, at: int, raw: str) -> None:
    problem = value_problem(value)
    if problem:
        what = "the string" if isinstance(value, str) else raw
        raise FilterError(f"filter: {what} at character {at + 1} {problem}")


def check_tree(tree, limit: int = MAX_DEPTH) -> None:
    """A tree from any form (a framework's dict, LlamaIndex's filters, a tree built by hand): nested at most ``limit``
    levels, every value one a store can compare, every field a string. Walked without recursion (5,000 nested
    ``$not`` were a RecursionError of 999 frames)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise FilterError(f"filter: nested deeper than {MAX_DEPTH} levels of and, or and not")
        if isinstance(node, (And, Or)):
            stack.extend((part, depth + 1) for part in node.parts)
        elif isinstance(node, Not):
            stack.append((node.part, depth + 1))
        elif isinstance(node, (Compare, In, IsKind)):
            if not isinstance(node.field, str) or surrogate_at(node.field) is not None:
                raise FilterError(f"filter: a field must be a string of valid Unicode, got {node.field!r}")
            for value in ((node.value,) if isinstance(node, Compare) else node.values if isinstance(node, In) else ()):
                problem = value_problem(value)
                if problem:
                    raise FilterError(f"filter: '{node.field}': the value {value!r} {problem}")
        else:
            raise FilterError(f"filter: {node!r} is no part of a filter")


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
                value = json.loads('"' + body + '"')
            except json.JSONDecodeError:
                raise FilterError(f"filter: bad escape in the string at character {at + 1}") from None
            _check_value(value, at, raw)
            out.append(("value", value, at))
        elif m.group("number") is not None:
            number = m.group("number")
            value = float(number) if any(c in number for c in ".eE") else int(number)
            _check_value(value, at, number)
            out.append(("value", value, at))
        elif m.group("op") is not None:
            op = m.group("op")
            out.append(("keyword", _KEYWORDS[op], at) if op in _KEYWORDS else ("op", op, at))
        else:
            name = m.group("name")
            if name in _KEYWORDS:
                out.append(("keyword", _KEYWORDS[name], at))
            elif name in ("true", "false", "True", "False"):
                out.append(("value", name.lower() == "true", at))
            elif name in ("null", "NULL", "None"):
                out.append(("value", None, at))
            else:
                out.append(("name", name, at))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, self.i, self.depth = text, _tokens(text), 0, 0

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
        token = self.peek()
        if token[:2] not in (("keyword", "not"), ("op", "(")):
            return self.condition()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"filter: nested deeper than {MAX_DEPTH} levels of parentheses and 'not' at character "
                              f"{token[2] + 1}: write it flatter (a or b or c needs no parentheses)")
        self.i += 1
        if token[1] == "not":
            inner = Not(self.negation())
        else:
            inner = self.expression()
            self.take("op", ")")
        self.depth -= 1
        return inner

    def condition(self):
        name = self.take("name")[1]
        token = self.peek()
        if token[:2] == ("keyword", "is"):
            self.i += 1
            negated = self.peek()[:2] == ("keyword", "not")
            self.i += negated
            kind = self.peek()
            if kind[0] == "value" and kind[1] is None or kind[0] == "name" and kind[1] in KINDS:
                self.i += 1
                return IsKind(name, "null" if kind[1] is None else kind[1], negated)
            got = "the end" if kind[0] == "end" else repr(kind[1])
            raise FilterError(f"filter: expected a kind after '{name} is' at character {kind[2] + 1} "
                              f"({', '.join(KINDS)}), found {got}")
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
        if value is None:
            raise FilterError(f"filter: {name} {token[1]} null compares with nothing: write '{name} is null' or "
                              f"'{name} is not null'")
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
        if any(v is None for v in values):
            raise FilterError("filter: null in a list after 'in' compares with nothing: write 'FIELD is null'")
        return tuple(values)


def parse(text: str):
    """The tree of a filter expression; :class:`FilterError` (one line, where it went wrong) if malformed."""
    if not isinstance(text, str) or not text.strip():
        raise FilterError("filter: an empty expression (e.g. section == \"sport\")")
    if len(text) > MAX_LENGTH:
        raise FilterError(f"filter: {len(text):,} characters; at most {MAX_LENGTH:,}")
    bad = surrogate_at(text)
    if bad is not None:
        raise FilterError(f"filter: a lone surrogate (U+{ord(text[bad]):04X}) at character {bad + 1}, which is not "
                          "text: a filter must be valid Unicode")
    parser = _Parser(text)
    tree = parser.expression()
    if parser.peek()[0] != "end":
        token = parser.peek()
        raise FilterError(f"filter: unexpected {token[1]!r} at character {token[2] + 1}")
    return tree


def unparse(tree) -> str:
    """The expression of a tree in this module's syntax (``parse(unparse(t)) == t``): how a tree made from a
    framework's filter reaches a server's ``/search``."""
    def value(v) -> str:
        return str(v).lower() if isinstance(v, bool) else json.dumps(v, ensure_ascii=False) if isinstance(v, str) \
            else repr(v)

    if isinstance(tree, Compare):
        return f"{tree.field} {tree.op} {value(tree.value)}"
    if isinstance(tree, In):
        return f"{tree.field} {'not in' if tree.negated else 'in'} [{', '.join(value(v) for v in tree.values)}]"
    if isinstance(tree, IsKind):
        return f"{tree.field} is {'not ' if tree.negated else ''}{tree.kind}"
    if isinstance(tree, Not):
        return f"not ({unparse(tree.part)})"
    joiner = " and " if isinstance(tree, And) else " or "
    return joiner.join(f"({unparse(p)})" for p in tree.parts)
