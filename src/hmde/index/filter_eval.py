"""A filter's tree evaluated: in Python (:func:`matches`, the brute-force reference every store is tested
against: SQL's three-valued logic, a missing field or one of another kind unknown) and as a DuckDB ``WHERE`` clause
of hmde's own index (:func:`to_duckdb`, every value a parameter). Milvus's expression: :mod:`hmde.index.milvus_filters`.
"""

from __future__ import annotations

import json

from .filter_checks import value_kind
from .filters import BUILT_IN, And, Compare, In, IsKind, Not


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
    if isinstance(tree, IsKind):
        return (value_kind(record.get(tree.field)) == tree.kind) != tree.negated
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


_DUCKDB_KIND_SQL = ("(CASE {0} WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'number' WHEN 'UBIGINT' THEN 'number' "
                    "WHEN 'DOUBLE' THEN 'number' WHEN 'BOOLEAN' THEN 'boolean' WHEN 'ARRAY' THEN 'list' "
                    "WHEN 'OBJECT' THEN 'object' WHEN 'NULL' THEN 'null' END)")  # duckdb_kind, in SQL


def to_duckdb(tree) -> tuple[str, list]:
    """``(sql, params)``: a condition on the table ``docs`` (columns ``doc_id``, ``lang``, ``metadata`` as JSON
    text); the expression's values are parameters only."""
    params: list = []

    def walk(node) -> str:
        if isinstance(node, IsKind):
            if node.field in BUILT_IN:
                kind = f"(CASE WHEN {node.field} IS NULL THEN 'null' ELSE 'string' END)"
            else:
                params.append(_json_path(node.field))
                kind = f"coalesce({_DUCKDB_KIND_SQL.format('json_type(metadata, ?)')}, 'null')"
            params.append(node.kind)
            return f"({kind} {'<>' if node.negated else '='} ?)"
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


