"""Build (page, page in another language, hard negative) triples out of core with DuckDB.

Input pages have ``doc_id``, ``concept`` (shared across languages, e.g. a Wikidata
id), ``lang``, ``text`` and ``categories``. For every concept, every cross-lingual
pair of its pages is a positive pair; each side gets a hard negative: a page in the
same language sharing a category, never of the same concept. Every random choice is
a hash of (seed, ids), so a build is deterministic for a seed and needs no state.

Output: ``PAIRS.parquet`` (ids and languages) and ``PAIRS.docs.parquet`` (doc_id,
lang, text of every page used), with the format version in the Parquet metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..ground.atomic import atomic_path
from ..errors import HmdeError, InputError
from ..io.sql import sql_path
from .wiki40b import is_wiki40b, language_of
from .wiki40b import pages_sql as wiki40b_pages_sql

PAIRS_FORMAT = "hmde-pairs/1"
REQUIRED = ("doc_id", "concept", "lang", "text", "categories")
# a page's own sentence list, when it has one (pseudo-documents: sentences; Bible chapters: verses): parallel
# pages with lists of equal length are aligned sentence by sentence (hmde train --sentence-loss-weight)
SENTENCE_COLUMNS = ("sentences", "verses")
# a punctuation-based sentence count, cheap enough for tens of millions of pages in SQL
SENTENCE_END = r"[.!?。！？؟।]+(\s|$)"


@dataclass
class PairOptions:
    languages: Sequence[str] | None = None  # kept languages; codes compared after normalisation (deu = de)
    exclude_languages: Sequence[str] = ()  # left out (held-out languages), also normalised: est drops UDHR's ekk
    min_sentences: int = 0  # public code: pages with <= 5 sentences dropped (use 6)
    deny_categories: Sequence[str] = ()  # exact names or SQL LIKE patterns (with %)
    alpha: float | None = None  # language-pair sampling exponent (public code: 0.3); None = keep all
    max_pairs: int | None = None
    # a source is a CORPUS argument's folder (a folder given, or the folder of a file given: bible/eng.jsonl.gz
    # is source "bible"); each source is sampled on its own, so that none drowns the others
    source_max_pairs: int | None = None  # every source's cap
    source_caps: dict = field(default_factory=dict)  # {source: cap}, over source_max_pairs
    max_per_language_pair: int | None = None  # no language pair of a source above this
    seed: int = 0
    no_negative: str = "drop"  # drop | keep (in-batch negatives only)
    wiki40b_categories: str | None = None  # concept -> category table for Wiki-40B files
    wiki40b_lang: str | None = None  # language of Wiki-40B files (default: their folder name)


@dataclass
class PairSummary:
    pairs: int = 0
    per_language_pair: dict = field(default_factory=dict)
    per_source: dict = field(default_factory=dict)
    per_language: dict = field(default_factory=dict)  # pairs with a page in the language
    without_negative: int = 0
    dropped_without_negative: int = 0
    pages: int = 0

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def documents_path(pairs_path: str | Path) -> Path:
    """``PAIRS.docs.parquet``, the documents file written beside ``PAIRS.parquet``."""
    pairs_path = Path(pairs_path)
    return pairs_path.with_name(pairs_path.name[: -len(".parquet")] + ".docs.parquet")


def _source_sql(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return f"read_parquet({sql_path(path)})"
    if name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        return f"read_json({sql_path(path)}, format='newline_delimited')"
    raise InputError("unknown corpus format; expected .jsonl(.gz) or .parquet", str(path))


CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json", ".json.gz")


def corpus_files(corpus: Sequence[str | Path]) -> list[tuple[str, Path]]:
    """(source, file) for every CORPUS argument: a folder stands for its corpus files, and names their
    source; a file's source is the folder it lies in."""
    files = []
    for path in map(Path, corpus):
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(CORPUS_SUFFIXES))
            if not inside:
                raise InputError(f"the folder holds no corpus file ({', '.join(CORPUS_SUFFIXES)})", str(path))
            files += [(path.resolve().name, p) for p in inside]
        elif not path.exists():
            raise InputError("file not found", str(path))
        else:
            files.append((path.resolve().parent.name, path))
    return files


def _language_filter(con, options: PairOptions) -> str:
    """SQL keeping the pages of ``options.languages`` and none of ``options.exclude_languages``, both
    compared as normalised codes (so that est also drops UDHR's ekk, and deu keeps de)."""
    from ..text.coverage import language_code

    keep = {language_code(c) for c in options.languages or ()}
    drop = {language_code(c) for c in options.exclude_languages}
    if not keep and not drop:
        return "TRUE"
    present = [r[0] for r in con.execute("SELECT DISTINCT lang FROM all_pages WHERE lang IS NOT NULL").fetchall()]
    kept = [lang for lang in present if (not keep or language_code(lang) in keep) and language_code(lang) not in drop]
    return "lang IN (" + ",".join(sql_path(lang) for lang in kept) + ")" if kept else "FALSE"


def load_pages(con, corpus: Sequence[str | Path], options: PairOptions) -> None:
    """Create the ``pages`` view and the ``page_categories`` table."""
    parts = []
    for source, path in corpus_files(corpus):
        try:
            columns = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {_source_sql(path)}").fetchall()]
        except Exception as exc:  # duckdb raises its own error types
            raise InputError(f"cannot read ({str(exc).splitlines()[0]})", str(path)) from None
        if is_wiki40b(columns):
            lang = options.wiki40b_lang or language_of(path)
            parts.append(f"SELECT *, {sql_path(source)} source FROM ({wiki40b_pages_sql(path, lang, options.wiki40b_categories)})")
            continue
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise InputError(f"missing column(s) {missing}; found {columns}", str(path))
        split = next((c for c in SENTENCE_COLUMNS if c in columns), None)  # pre-split sentences, kept for alignment
        sentences = f"CAST({split} AS VARCHAR[])" if split else "CAST(NULL AS VARCHAR[])"
        parts.append(f"SELECT CAST(doc_id AS VARCHAR) doc_id, CAST(concept AS VARCHAR) concept, "
                     f"CAST(lang AS VARCHAR) lang, text, CAST(categories AS VARCHAR[]) categories, "
                     f"{sentences} sentences, {sql_path(source)} source FROM {_source_sql(path)}")
    con.execute(f"CREATE TEMP VIEW all_pages AS {' UNION ALL '.join(parts)}")
    where = ["text IS NOT NULL", "length(trim(text)) > 0", _language_filter(con, options)]
    if options.min_sentences > 0:
        where.append(f"len(regexp_extract_all(text || ' ', '{SENTENCE_END}')) >= {int(options.min_sentences)}")
    con.execute(f"CREATE TEMP TABLE pages AS SELECT * FROM all_pages WHERE {' AND '.join(where)}")
    twice = con.execute("SELECT doc_id, min(source), max(source) FROM pages GROUP BY doc_id "
                        "HAVING count(DISTINCT source) > 1 LIMIT 1").fetchone()
    if twice:
        raise InputError(f"doc_id {twice[0]!r} is in two sources ({twice[1]}, {twice[2]}); doc_ids must be unique",
                         str(corpus[0]))
    deny = " AND ".join(f"cat NOT LIKE {sql_path(c)}" for c in options.deny_categories) or "TRUE"
    # a category belongs to its source: two sources' categories of one name share no page
    con.execute(f"""
        CREATE TEMP TABLE page_categories AS
        SELECT DISTINCT doc_id, lang, concept, source || chr(31) || cat cat
        FROM (SELECT doc_id, lang, concept, source, unnest(categories) cat FROM pages)
        WHERE cat IS NOT NULL AND {deny}""")
    con.execute("""
        CREATE TEMP TABLE cat_members AS
        SELECT lang, cat, doc_id, concept,
               row_number() OVER (PARTITION BY lang, cat ORDER BY doc_id) - 1 AS k,
               count(*) OVER (PARTITION BY lang, cat) AS n
        FROM page_categories""")


def build_pairs(corpus: Sequence[str | Path], output: str | Path, options: PairOptions | None = None,
                show_progress: bool = True) -> PairSummary:
    """Build the pairs file; returns a summary (pairs per language pair, negative coverage)."""
    import duckdb

    options = options or PairOptions()
    output = Path(output)
    if not output.name.endswith(".parquet"):
        raise HmdeError(f"--output must end in .parquet, got '{output}'")
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    if show_progress:
        con.execute("PRAGMA enable_progress_bar")
    load_pages(con, corpus, options)
    n_pages = con.execute("SELECT count(*) FROM pages").fetchone()[0]
    if n_pages == 0:
        raise HmdeError("the corpus holds no pages (after the language and length filters)")
    seed = int(options.seed)
    con.execute(f"""
        CREATE TEMP TABLE raw_pairs AS
        SELECT a.doc_id doc_a, b.doc_id doc_b, a.lang lang_a, b.lang lang_b, a.concept, a.source,
               hash(a.doc_id, b.doc_id, {seed}) h
        FROM pages a JOIN pages b ON a.concept = b.concept AND a.lang < b.lang""")
    if options.alpha is not None or options.max_pairs or options.source_max_pairs or options.source_caps \
            or options.max_per_language_pair:
        counts = {(source, lp): n for source, lp, n in con.execute(
            "SELECT source, lang_a || '-' || lang_b, count(*) FROM raw_pairs GROUP BY 1, 2").fetchall()}
        con.execute("CREATE TEMP TABLE keep_rate(source VARCHAR, lp VARCHAR, rate DOUBLE)")
        con.executemany("INSERT INTO keep_rate VALUES (?, ?, ?)",
                        [(*key, rate) for key, rate in keep_rates(counts, options).items()])
        con.execute("""
            CREATE TEMP TABLE sampled AS SELECT r.* FROM raw_pairs r
            JOIN keep_rate k ON k.source = r.source AND k.lp = r.lang_a || '-' || r.lang_b
            WHERE (r.h % 1000000) / 1000000.0 < k.rate""")
    else:
        con.execute("CREATE TEMP VIEW sampled AS SELECT * FROM raw_pairs")
    # a hard negative per side: a random category of the page, then a random member of it
    # in the same language; if that member is the same concept, the next member instead.
    negative_sql = """
        WITH pick AS (
            SELECT s.doc_a, s.doc_b, pc.cat, s.{side}_lang_key lang,
                   row_number() OVER (PARTITION BY s.doc_a, s.doc_b ORDER BY hash(pc.cat, {seed}, s.h)) r
            FROM sampled s JOIN page_categories pc ON pc.doc_id = s.doc_{side}),
        chosen AS (SELECT p.doc_a, p.doc_b, p.cat, p.lang, c.n FROM pick p
                   JOIN (SELECT DISTINCT lang, cat, n FROM cat_members) c ON c.lang = p.lang AND c.cat = p.cat
                   WHERE p.r = 1 AND c.n > 1),
        first_try AS (SELECT ch.*, hash(ch.doc_a, ch.doc_b, '{side}', {seed}) % ch.n k FROM chosen ch)
        SELECT f.doc_a, f.doc_b,
               CASE WHEN m.concept <> s.concept THEN m.doc_id ELSE m2.doc_id END neg
        FROM first_try f
        JOIN sampled s ON s.doc_a = f.doc_a AND s.doc_b = f.doc_b
        JOIN cat_members m ON m.lang = f.lang AND m.cat = f.cat AND m.k = f.k
        JOIN cat_members m2 ON m2.lang = f.lang AND m2.cat = f.cat AND m2.k = (f.k + 1) % f.n
        WHERE m.concept <> s.concept OR m2.concept <> s.concept"""
    con.execute("CREATE TEMP VIEW sampled_keys AS SELECT *, lang_a a_lang_key, lang_b b_lang_key FROM sampled")
    for side in ("a", "b"):
        sql = negative_sql.format(side=side, seed=seed).replace("FROM sampled s", "FROM sampled_keys s")
        con.execute(f"CREATE TEMP TABLE neg_{side} AS {sql}")
    con.execute("""
        CREATE TEMP TABLE triples AS
        SELECT s.concept, s.lang_a, s.lang_b, s.doc_a, s.doc_b, na.neg neg_a, nb.neg neg_b, s.h, s.source
        FROM sampled s
        LEFT JOIN neg_a na ON na.doc_a = s.doc_a AND na.doc_b = s.doc_b
        LEFT JOIN neg_b nb ON nb.doc_a = s.doc_a AND nb.doc_b = s.doc_b""")
    summary = PairSummary(pages=n_pages)
    summary.without_negative = con.execute(
        "SELECT count(*) FROM triples WHERE neg_a IS NULL OR neg_b IS NULL").fetchone()[0]
    if options.no_negative == "drop":
        con.execute("DELETE FROM triples WHERE neg_a IS NULL OR neg_b IS NULL")
        summary.dropped_without_negative = summary.without_negative
    elif options.no_negative != "keep":
        raise HmdeError(f"unknown no-negative policy '{options.no_negative}' (drop or keep)")
    summary.pairs = con.execute("SELECT count(*) FROM triples").fetchone()[0]
    if summary.pairs == 0:
        raise HmdeError("no pairs: no concept has pages in two of the selected languages"
                        + (" with a hard negative" if options.no_negative == "drop" else ""))
    summary.per_language_pair = dict(con.execute(
        "SELECT lang_a || '-' || lang_b, count(*) FROM triples GROUP BY 1 ORDER BY 1").fetchall())
    summary.per_source = dict(con.execute("SELECT source, count(*) FROM triples GROUP BY 1 ORDER BY 1").fetchall())
    summary.per_language = dict(con.execute(
        "SELECT lang, count(*) FROM (SELECT lang_a lang FROM triples UNION ALL SELECT lang_b FROM triples) "
        "GROUP BY 1 ORDER BY 2 DESC, 1").fetchall())
    meta = json.dumps({"format": PAIRS_FORMAT, "options": options.__dict__ | {"languages": list(options.languages or [])},
                       "corpus": [str(c) for c in corpus], "summary": summary.to_dict()}, default=list)
    docs_out = documents_path(output)
    with atomic_path(docs_out) as tmp_docs:
        con.execute(f"""COPY (SELECT DISTINCT p.doc_id, p.lang, p.text, p.sentences FROM pages p JOIN (
                          SELECT doc_a d FROM triples UNION SELECT doc_b FROM triples UNION
                          SELECT neg_a FROM triples UNION SELECT neg_b FROM triples) u ON u.d = p.doc_id)
                        TO {sql_path(tmp_docs)} (FORMAT parquet)""")
    with atomic_path(output) as tmp:
        con.execute(f"""COPY (SELECT row_number() OVER (ORDER BY h, doc_a, doc_b) - 1 AS pair_id, concept, lang_a, lang_b,
                                     doc_a, doc_b, neg_a, neg_b FROM triples ORDER BY pair_id)
                        TO {sql_path(tmp)} (FORMAT parquet, KV_METADATA {{hmde: '{meta.replace("'", "''")}'}})""")
    return summary


def keep_rates(counts: dict, options: PairOptions) -> dict:
    """The fraction of each (source, language pair)'s pairs to keep: within a source, language pairs
    share its budget (its cap, else all its pairs) in proportion to count^alpha, none above
    ``max_per_language_pair``; the rates are then scaled down together to ``max_pairs``."""
    alpha = 1.0 if options.alpha is None else options.alpha
    rates = {}
    for source in sorted({s for s, _ in counts}):
        mine = {k: n for k, n in counts.items() if k[0] == source}
        total = sum(mine.values())
        cap = options.source_caps.get(source, options.source_max_pairs)
        budget = min(cap or total, total)
        if options.max_pairs and not (options.source_max_pairs or options.source_caps):
            budget = min(budget, options.max_pairs)  # one budget for one source: the sampling of before
        norm = sum(n ** alpha for n in mine.values())
        for key, n in mine.items():
            wanted = budget * n ** alpha / norm
            if options.max_per_language_pair:
                wanted = min(wanted, options.max_per_language_pair)
            rates[key] = min(1.0, wanted / n)
    expected = sum(rates[k] * counts[k] for k in counts)
    if options.max_pairs and expected > options.max_pairs:
        rates = {k: r * options.max_pairs / expected for k, r in rates.items()}
    return rates


PAIR_COLUMNS = ("pair_id", "doc_a", "doc_b", "neg_a", "neg_b")
DOC_COLUMNS = ("doc_id", "lang", "text")


def _read_rows(pq, path: Path, columns: Sequence[str], strings: Sequence[str] = ()) -> list[dict]:
    """A Parquet file's rows, refused in one line when it is damaged, lacks a column hmde reads, or holds
    another type than text in one of ``strings`` (a non-string ``text`` failed deep inside training)."""
    import pyarrow as pa

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"cannot read it as Parquet ({str(exc).splitlines()[0]})", str(path)) from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InputError(f"lacks the column(s) {', '.join(missing)}; rebuild it with `hmde build-pairs`", str(path))
    for name in strings:
        kind = table.schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)):
            raise InputError(f"must hold text, holds {kind}; rebuild it with `hmde build-pairs`", str(path), None,
                             name)
    return table.to_pylist()


def read_pairs(path: str | Path, presplit: bool = False):
    """Load a pairs file and its documents; checks the format version.

    ``docs[doc_id]`` is ``(text, lang)``; with ``presplit``, ``text`` is the page's own sentence
    list where it has one (files built before sentence lists were kept have none)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise InputError("file not found", str(path))
    import pyarrow as pa

    try:
        meta = (pq.read_metadata(path).metadata or {}).get(b"hmde")
        info = json.loads(meta) if meta else {}
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"not a Parquet pairs file ({str(exc).splitlines()[0]}); build one with `hmde build-pairs`",
                         str(path)) from None
    if info.get("format") != PAIRS_FORMAT:
        raise InputError(f"not a pairs file of this hmde version (format {info.get('format')!r}, expected "
                         f"{PAIRS_FORMAT!r}); rebuild it with `hmde build-pairs`", str(path))
    docs_path = documents_path(path)
    if not docs_path.exists():
        raise InputError("its documents file is missing", str(docs_path))
    pairs = _read_rows(pq, path, PAIR_COLUMNS)
    docs = {r["doc_id"]: (r.get("sentences") if presplit and r.get("sentences") else r["text"], r["lang"])
            for r in _read_rows(pq, docs_path, DOC_COLUMNS, strings=("doc_id", "text", "lang"))}
    return pairs, docs, info


def page_languages(pairs: list[dict], docs: dict) -> dict[str, str | None]:
    """Each training page's language (hmde.text.coverage's reading of its ``lang``), once per page."""
    from ..text.coverage import document_language

    pages = {d for p in pairs for d in (p["doc_a"], p["doc_b"])}
    return {d: document_language(docs[d][1], docs[d][0]) for d in sorted(pages)}


def pairs_in_languages(pairs: list[dict], docs: dict, languages: set) -> list[dict]:
    """The pairs whose two pages are in ``languages`` (``hmde train --covered-pairs-only``), in their order."""
    of = page_languages(pairs, docs)
    return [p for p in pairs if of[p["doc_a"]] in languages and of[p["doc_b"]] in languages]


def merge_pairs(inputs: Sequence[str | Path], output: str | Path) -> int:
    """One pairs file from several (e.g. Bible pairs sampled with p^alpha over ~1,000 language pairs,
    and news pairs with a budget of their own, so that neither drowns the other). Pair ids are
    renumbered in input order; documents shared by two inputs are kept once. Returns the pair count."""
    import duckdb

    output = Path(output)
    if not output.name.endswith(".parquet"):
        raise HmdeError(f"the merged pairs file must end in .parquet, got '{output}'")
    for path in inputs:
        read_pairs(path)  # checks the format of each input before anything is written
    docs = [documents_path(p) for p in inputs]
    con = duckdb.connect()
    union = " UNION ALL ".join(f"SELECT *, {i} AS part FROM read_parquet({sql_path(p)})" for i, p in enumerate(inputs))
    n = con.execute(f"SELECT count(*) FROM ({union})").fetchone()[0]
    meta = json.dumps({"format": PAIRS_FORMAT, "merged": [str(p) for p in inputs], "summary": {"pairs": n}})
    docs_out = documents_path(output)
    doc_union = " UNION ".join(f"SELECT doc_id, lang, text, sentences FROM read_parquet({sql_path(d)})" for d in docs)
    with atomic_path(docs_out) as tmp_docs:
        con.execute(f"COPY ({doc_union}) TO {sql_path(tmp_docs)} (FORMAT parquet)")
    with atomic_path(output) as tmp:
        con.execute(f"""COPY (SELECT row_number() OVER (ORDER BY part, pair_id) - 1 AS pair_id, concept, lang_a, lang_b,
                                     doc_a, doc_b, neg_a, neg_b FROM ({union}) ORDER BY 1)
                        TO {sql_path(tmp)} (FORMAT parquet, KV_METADATA {{hmde: '{meta.replace("'", "''")}'}})""")
    return n
