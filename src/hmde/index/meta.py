"""An index's record: ``index.json`` (:class:`IndexMeta`), read field by field and written as the last step of every
version (:func:`finish_version`); shared by every store (hmde's own files, Milvus) and the writes."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import HmdeError, InputError
from ..ground.atomic import carry_foreign_entries
from .language_debias import MODES as DEBIAS_MODES

SENTENCE_DTYPES = ("float32", "float16")  # how sentences.npy may store each sentence vector

INDEX_FORMAT = "hmde-index/1"
INDEX_TYPES = ("flat", "hnsw", "ivf", "ivfpq")
PQ_BITS = 8  # 256 centroids per sub-quantiser: one byte per sub-vector


@dataclass
class IndexMeta:
    """An index's record (``index.json``): what wrote it, what it holds, where its vectors live."""

    model: str
    model_sha256: str | None
    dim: int
    method: str
    index_type: str
    count: int
    format: str = INDEX_FORMAT
    hnsw_m: int = 32
    ivf_lists: int = 0
    pq_m: int = 0  # ivfpq: sub-quantisers, i.e. bytes per stored vector
    bm25: bool = False  # a BM25 index of the texts in bm25/ (hmde.index.lexical), for hybrid search
    backend: str = "torch"  # what encoded it (hmde.encoders.backends; earlier indexes: torch): search and --add
    # default to one that gives the same vectors (hmde.encoders.backends.for_reading)
    # multi-vector: sentences.npy holds contextualised sentence vectors, searched through sentences.faiss;
    # docs.duckdb's table sentences maps each to its document row and position (hmde.index.multivector)
    multi_vector: bool = False
    # what sentences.faiss holds: "lower" (the sentence encoder's vectors, the default since issue 42) or
    # "context" (HMDE's contextualised vectors); indexes from before the field held only the latter
    sentence_vectors: str = "context"
    sentence_lists: int = 0  # ivf/ivfpq multi-vector indexes: the inverted lists of sentences.faiss
    # a flat multi-vector index written since issue 96 keeps its sentence vectors once, in sentences.npy: its flat
    # FAISS index of them is made from that file when the index opens (sentences.faiss held a second copy)
    sentences_once: bool = False
    # how sentences.npy stores each sentence vector: "float32" (every index before issue 96's item 3) or "float16"
    # (half the bytes on disk and in a flat index's memory; a flat index searches it as FAISS's fp16 scalar codes)
    sentence_dtype: str = "float32"
    # rows of the FAISS indexes whose documents were deleted or replaced (docs.duckdb's table deleted): masked at
    # search time until `compact` drops them; ``count`` counts every row, ``count - deleted`` the live documents
    deleted: int = 0
    # where the vectors live: "" (this folder's FAISS and DuckDB files) or "milvus" (hmde.index.milvus_store: the
    # client's URI and the collections' prefix)
    store: str = ""
    store_uri: str = ""
    store_prefix: str = ""
    # "subspace": each query loses the span of the indexed languages' centred means (hmde.index.language_debias,
    # issue 56); "subspace+calibrate" (the default of new indexes): then the documents in the query's language
    # are calibrated (hmde.index.calibration); "": none (indexes built before issue 56)
    language_debias: str = ""
    # a Milvus-stored index's commits (hmde.index.milvus_write): the last committed write's generation (rows of a
    # later one are a cut-off write's: invisible, and removed by the next writer), the next free document and
    # sentence row numbers, the rows of replaced or deleted documents whose removal from Milvus may not have
    # finished (invisible), and the metadata keys its documents have (what a filter may name)
    generation: int = 0
    next_row: int = 0
    next_sentence_row: int = 0
    retired_rows: list = field(default_factory=list)
    metadata_keys: list = field(default_factory=list)
    # the commit this record is (a Milvus store keeps the id of its last commit: hmde.index.milvus_commits), and the
    # collection prefixes in the store that are this index's but not this version's (an --overwrite build's old
    # collections, or a cut-off one's new ones): the next writer drops them
    commit_id: str = ""
    stale_prefixes: list = field(default_factory=list)
    # a Milvus-stored index's metadata keys with the kinds of value each holds (hmde.index.filter_checks.value_kind), so
    # that a filter comparing a field with a value of a kind it never holds is refused (hmde's own files ask DuckDB)
    metadata_types: dict = field(default_factory=dict)

    @property
    def live(self) -> int:
        return self.count - self.deleted


# everything an index build writes: any other entry of an index folder is the user's and is kept
INDEX_ENTRIES = {"index.json", "vectors.faiss", "sentences.npy", "docs.duckdb", "sentences.faiss", "bm25",
                 "languages.npz"}


def finish_version(path: Path, tmp: Path, meta: IndexMeta) -> None:
    """The last step of every write before the swap: the new version's ``index.json``, and the entries of the
    folder that hmde did not write (a user's notes) carried over."""
    (tmp / "index.json").write_text(json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8")
    carry_foreign_entries(path, tmp, INDEX_ENTRIES)


def first_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    return lines[-1] if lines else type(exc).__name__


def read_index_meta(path: Path) -> IndexMeta:
    """``index.json``, checked field by field: a damaged file is a one-line error naming it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not readable JSON ({first_line(exc)}); rebuild the index", path=str(path)) from None
    if not isinstance(raw, dict):
        raise InputError("must hold a JSON object", path=str(path))
    if raw.get("format") != INDEX_FORMAT:
        raise InputError(f"index format {raw.get('format')!r}, expected {INDEX_FORMAT!r}", path=str(path))
    fields = {f.name: f for f in dataclasses.fields(IndexMeta)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise InputError("unknown field", path=str(path), field=unknown[0])
    for name in ("model", "dim", "method", "index_type", "count"):
        if name not in raw:
            raise InputError("missing field", path=str(path), field=name)
    for name in ("dim", "count", "hnsw_m", "ivf_lists", "pq_m", "sentence_lists", "deleted", "generation", "next_row",
                 "next_sentence_row"):
        if name in raw and (not isinstance(raw[name], int) or isinstance(raw[name], bool) or raw[name] < 0):
            raise InputError(f"must be a whole number >= 0, got {raw[name]!r}", path=str(path), field=name)
    for name in ("model", "method", "index_type", "store", "store_uri", "store_prefix", "language_debias",
                 "commit_id"):
        if name in raw and not isinstance(raw[name], str):
            raise InputError(f"must be a string, got {raw[name]!r}", path=str(path), field=name)
    for name, kind in (("retired_rows", int), ("metadata_keys", str), ("stale_prefixes", str)):
        value = raw.get(name, [])
        if not isinstance(value, list) or any(not isinstance(x, kind) or isinstance(x, bool) for x in value):
            raise InputError(f"must be a list of {'whole numbers' if kind is int else 'strings'}", path=str(path),
                             field=name)
    types = raw.get("metadata_types", {})
    if not isinstance(types, dict) or any(not isinstance(v, list) or any(not isinstance(x, str) for x in v)
                                          for v in types.values()):
        raise InputError("must map each metadata key to a list of kinds", path=str(path), field="metadata_types")
    for name in ("bm25", "multi_vector"):
        if name in raw and not isinstance(raw[name], bool):
            raise InputError(f"must be true or false, got {raw[name]!r}", path=str(path), field=name)
    if raw.get("sentence_vectors", "context") not in ("lower", "context", ""):
        raise InputError(f"must be 'lower' or 'context', got {raw['sentence_vectors']!r}", path=str(path),
                         field="sentence_vectors")
    if raw.get("language_debias", "") not in DEBIAS_MODES:
        raise InputError(f"unknown language_debias {raw['language_debias']!r} (subspace+calibrate, subspace, or "
                         "none)",
                         path=str(path), field="language_debias")
    if raw.get("sentence_dtype", "float32") not in SENTENCE_DTYPES:
        raise InputError(f"must be {' or '.join(map(repr, SENTENCE_DTYPES))}, got {raw['sentence_dtype']!r}",
                         path=str(path), field="sentence_dtype")
    if raw.get("store", "") not in ("", "milvus"):
        raise InputError(f"unknown store {raw['store']!r} (milvus, or none)", path=str(path), field="store")
    if raw["index_type"] not in INDEX_TYPES:
        raise InputError(f"unknown index type {raw['index_type']!r} ({', '.join(INDEX_TYPES)})", path=str(path),
                         field="index_type")
    return IndexMeta(**raw)


def check_adding(meta: IndexMeta, path, multi_vector: bool | None, sentence_vectors: str | None,
                 sentence_dtype: str | None) -> None:
    """An add (``hmde index build --add``) that names settings other than the index's own is one line (None: the
    index's)."""
    if multi_vector and not meta.multi_vector:
        raise HmdeError(f"index {path} stores one vector per document; --multi-vector needs an index built "
                        "with it (rebuild, or add without --multi-vector)")
    if multi_vector is False and meta.multi_vector:
        raise HmdeError(f"index {path} stores every sentence's vector; add to it without --single-vector")
    if sentence_vectors and meta.multi_vector and sentence_vectors != meta.sentence_vectors:
        raise HmdeError(f"index {path} stores '{meta.sentence_vectors}' sentence vectors; add to it with "
                        f"--sentence-vectors {meta.sentence_vectors} (or leave it out)")
    if sentence_dtype and sentence_dtype != meta.sentence_dtype:
        raise HmdeError(f"index {path} stores {meta.sentence_dtype} sentence vectors; add to it with "
                        f"--sentence-dtype {meta.sentence_dtype} (or leave it out)")


def check_compatible(meta: IndexMeta, model_sha256: str | None, dim: int, path: Path) -> None:
    """An index is searched and extended only with the model it was built with."""
    if meta.dim != dim:
        raise HmdeError(f"index {path} was built with {meta.dim}-dimensional vectors, this model gives {dim}: "
                        f"use the index's model ({meta.model})")
    from ..encoders.registry import same_model_hash

    if not same_model_hash(meta.model_sha256, model_sha256):
        raise HmdeError(f"index {path} was built with another model ({meta.model}, sha256 {meta.model_sha256[:12]}…); "
                        "search it with that model or rebuild the index")
