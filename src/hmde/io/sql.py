"""Values pasted into DuckDB SQL where its functions take no parameters (``read_parquet(...)``, ``COPY ...
TO ...``): as string literals with their quotes doubled, so that a path such as ``it's/pairs.parquet``
is read as a path and never as SQL."""


def sql_path(value) -> str:
    """``value`` (a path or string) as a SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"
