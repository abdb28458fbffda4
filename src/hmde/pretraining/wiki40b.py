"""Read Wiki-40B as users have it: the Hugging Face ``google/wiki40b`` parquet files.

Those files hold ``wikidata_id``, ``text`` and ``version_id``; the text carries
structure markers (``_START_ARTICLE_``, ``_START_SECTION_``, ``_START_PARAGRAPH_``,
``_NEWLINE_``). The language is not a column: it is the folder the file lies in
(``.../wiki40b/de/train-00000-of-00005.parquet``) or given explicitly. Wiki-40B has no
categories, so a user-given table (TSV/CSV/parquet with columns ``concept`` and
``category``, one row per membership, e.g. exported from Wikidata or a Wikipedia dump)
supplies them; pages without a category simply get no hard negative.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from ..io.sql import sql_path

LANG_DIR = re.compile(r"^[a-z]{2,3}(-[a-z]{2,4})?$")
NOT_LANGS = {"data", "en-us"}


def is_wiki40b(columns: list[str]) -> bool:
    return "wikidata_id" in columns and "text" in columns and "concept" not in columns


def language_of(path: Path) -> str:
    """The language folder of a Wiki-40B file (``zh-cn`` and ``zh-tw`` included)."""
    for part in reversed(path.parent.parts):
        if LANG_DIR.match(part) and part not in NOT_LANGS:
            return part
    raise InputError("cannot tell the language of this Wiki-40B file from its folders; "
                     "give --wiki40b-lang", str(path))


def table_sql(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", str(path))
    name = path.name.lower()
    if name.endswith(".parquet"):
        return f"read_parquet({sql_path(path)})"
    delim = "\\t" if name.endswith((".tsv", ".tsv.gz")) else ","
    return f"read_csv('{path}', delim='{delim}', header=true, all_varchar=true)"


def pages_sql(path: Path, lang: str, categories: str | Path | None) -> str:
    """A SELECT giving (doc_id, concept, lang, text, categories, sentences) for one Wiki-40B file
    (``sentences`` NULL: Wikipedia pages are not translations of each other sentence by sentence)."""
    clean = ("trim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(text, "
             "'_START_ARTICLE_\\n[^\\n]*\\n?', '', 'g'), '_START_SECTION_\\n[^\\n]*\\n?', ' ', 'g'), "
             "'_START_PARAGRAPH_\\n', ' ', 'g'), '(_NEWLINE_|\\s)+', ' ', 'g'))")
    lang = lang.replace("'", "")
    if categories is None:
        cats = "CAST([] AS VARCHAR[])"
        join = ""
    else:
        cats = "coalesce(c.cats, CAST([] AS VARCHAR[]))"
        join = (f"LEFT JOIN (SELECT CAST(concept AS VARCHAR) concept, list(DISTINCT CAST(category AS VARCHAR)) cats "
                f"FROM {table_sql(categories)} GROUP BY 1) c ON c.concept = CAST(w.wikidata_id AS VARCHAR)")
    return (f"SELECT '{lang}/' || CAST(w.wikidata_id AS VARCHAR) doc_id, CAST(w.wikidata_id AS VARCHAR) concept, "
            f"'{lang}' lang, {clean.replace('text', 'w.text', 1)} text, {cats} categories, "
            f"CAST(NULL AS VARCHAR[]) sentences FROM read_parquet({sql_path(path)}) w {join}")
