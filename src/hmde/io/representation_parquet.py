"""hmde's whole representation of documents in one Parquet file: what vector stores and data lakes ingest.

One row per document::

    doc_id            string
    lang              string (null: unknown)
    text              string (the document as one string; a list of sentences joined by spaces)
    vector            fixed_size_list<float32>[dim]   the document vector (the method's, not normalised: the mean of
                                                      unit sentence vectors has norm ~0.9; ``hmde.vector_norm`` says so)
    sentences         list<string>                    the units the sentence encoder embedded, in order
    sentence_start    list<int32>                     each unit's first character in ``text`` (-1: not found)
    sentence_end      list<int32>                     one past its last character
    sentence_vectors  list<fixed_size_list<float32>[dim]>
    metadata          string (JSON: the document's other fields, title, url, date...; null: none)

The schema's metadata (``hmde.*``) records the format, the model (name and SHA-256), the method, the dimension
and what the sentence vectors are, so that ``hmde index build FILE.parquet`` builds an index from it without
embedding again (the same vectors, bit for bit) and refuses a file of another model on ``--add``. Written in row
groups of 4,096 documents (memory holds one row group) into a temporary file renamed into place at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..errors import HmdeError, InputError

FORMAT = "hmde-representation/1"
# what a reader must know before an inner-product search over the document vectors (issue 63): they are the
# method's, as an index receives them (mean: the mean of unit sentence vectors, norm ~0.9), while /v1 and Milvus
# hand out unit vectors
VECTOR_NORM = ("vector: not normalised (mean: the mean of unit sentence vectors, norm <= 1); L2-normalise it for "
               "inner-product search, as hmde's indexes do; sentence_vectors: as the sentence encoder gives them (unit length "
               "for hmde's models)")
COLUMNS = ("doc_id", "lang", "text", "vector", "sentences", "sentence_start", "sentence_end", "sentence_vectors")
METADATA = "metadata"  # each document's other fields, as JSON text (files written before issue 61 lack it)


@dataclass
class RepresentationInfo:
    model: str
    model_sha256: str | None
    method: str
    dim: int
    sentence_vectors: str = "lower"  # or "context": HMDE's contextualised sentence vectors
    rows: int = 0
    # the family of vectors (hmde.encoders.backends.recorded): "onnx-int8" for the int8 graph, else fp32 ("torch"
    # in files written before the int8 default); an index built from the file records it
    backend: str = "torch"


def schema(dim: int, info: RepresentationInfo):
    import pyarrow as pa

    vector = pa.list_(pa.float32(), dim)
    fields = [pa.field("doc_id", pa.string(), nullable=False), pa.field("lang", pa.string()),
              pa.field("text", pa.string()), pa.field("vector", vector),
              pa.field("sentences", pa.list_(pa.string())), pa.field("sentence_start", pa.list_(pa.int32())),
              pa.field("sentence_end", pa.list_(pa.int32())), pa.field("sentence_vectors", pa.list_(vector)),
              pa.field(METADATA, pa.string())]
    meta = {"hmde.format": FORMAT, "hmde.model": info.model, "hmde.model_sha256": info.model_sha256 or "",
            "hmde.method": info.method, "hmde.dim": str(dim), "hmde.sentence_vectors": info.sentence_vectors,
            "hmde.vector_norm": VECTOR_NORM, "hmde.backend": info.backend}
    return pa.schema(fields, metadata={k: v.encode("utf-8") for k, v in meta.items()})


def spans(text: str, units: Sequence[str]) -> tuple[list[int], list[int]]:
    """Each unit's [start, end) in ``text``, found in order (-1, -1 where the unit is not a substring)."""
    starts, ends, pos = [], [], 0
    for unit in units:
        at = text.find(unit, pos)
        if at < 0:
            at = text.find(unit)
        if at < 0:
            starts.append(-1)
            ends.append(-1)
            continue
        starts.append(at)
        ends.append(at + len(unit))
        pos = at + len(unit)
    return starts, ends


class RepresentationWriter:
    """``with RepresentationWriter(path, info) as w: w.write(ids, langs, texts, vectors, units, sentence_vectors)``.

    Batches are gathered into row groups of ``row_group_rows`` documents (or ``row_group_bytes``, whichever comes
    first): a row group per encode batch of 32 made 6,250 row groups for 200,000 documents, whose metadata the
    writer keeps until it closes (+70 MB at 200k documents) and every reader then walks."""

    row_group_rows = 4096
    row_group_bytes = 64 << 20

    def __init__(self, path: str | Path, info: RepresentationInfo):
        self.path, self.info = Path(path), info
        self._atomic = self._writer = None
        self._pending: list = []
        self.row_groups = 0

    def __enter__(self) -> "RepresentationWriter":
        import pyarrow.parquet as pq

        from ..ground.atomic import atomic_path
        from ..ground.stale_files import remove_dead_writers_temporaries, writer_tag

        remove_dead_writers_temporaries(self.path, ".parquet")  # a SIGKILLed writer's .Z.parquet.*.parquet.HOST-PID.tmp
        self._atomic = atomic_path(self.path, ".parquet" + writer_tag())
        tmp = self._atomic.__enter__()
        self._writer = pq.ParquetWriter(str(tmp), schema(self.info.dim, self.info), compression="zstd")
        return self

    def write(self, ids: Sequence[str], langs: Sequence[str | None], texts: Sequence[str], vectors: np.ndarray,
              units: Sequence[Sequence[str]], sentence_vectors: Sequence[np.ndarray],
              metadata: Sequence[dict] | None = None) -> None:
        """These documents, gathered into the current row group."""
        import pyarrow as pa

        table = pa.table(representation_columns(ids, langs, texts, vectors, units, sentence_vectors, self.info.dim,
                                                metadata), schema=schema(self.info.dim, self.info))
        self._pending.append(table)
        self.info.rows += len(ids)
        if sum(t.num_rows for t in self._pending) >= self.row_group_rows or \
                sum(t.nbytes for t in self._pending) >= self.row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._pending:
            table = pa.concat_tables(self._pending)
            self._pending = []
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
            self.row_groups += 1

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._flush()
        self._pending = []
        self._writer.close()
        return self._atomic.__exit__(exc_type, exc, tb)


def representation_columns(ids: Sequence[str], langs: Sequence[str | None], texts: Sequence[str], vectors: np.ndarray,
                           units: Sequence[Sequence[str]], sentence_vectors: Sequence[np.ndarray], dim: int,
                           metadata: Sequence[dict] | None = None) -> dict:
    """The columns of :data:`COLUMNS` for these documents, as pyarrow arrays (the writer's and the Ray actors')."""
    import pyarrow as pa

    vectors = np.ascontiguousarray(np.asarray(vectors, np.float32).reshape(len(ids), dim))
    located = [spans(t, u) for t, u in zip(texts, units)]
    flat = [np.asarray(v, np.float32).reshape(-1, dim) for v in sentence_vectors]
    counts = np.array([len(v) for v in flat], np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    stacked = np.concatenate(flat) if flat and counts.sum() else np.zeros((0, dim), np.float32)
    sentence_column = pa.ListArray.from_arrays(
        offsets, pa.FixedSizeListArray.from_arrays(pa.array(stacked.reshape(-1), pa.float32()), dim))
    return {"doc_id": pa.array(list(ids), pa.string()), "lang": pa.array(list(langs), pa.string()),
            "text": pa.array(list(texts), pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
            "sentences": pa.array([list(u) for u in units], pa.list_(pa.string())),
            "sentence_start": pa.array([s for s, _ in located], pa.list_(pa.int32())),
            "sentence_end": pa.array([e for _, e in located], pa.list_(pa.int32())),
            "sentence_vectors": sentence_column,
            METADATA: pa.array(metadata_texts(metadata, len(ids)), pa.string())}


def metadata_texts(metadata: Sequence[dict] | None, n: int) -> list[str | None]:
    """Each document's metadata as JSON text (None: none), as the Parquet file and the index store it."""
    import json

    return [json.dumps(m, ensure_ascii=False) if m else None for m in (metadata or [None] * n)]


def metadata_dicts(texts: Sequence[str | None]) -> list[dict]:
    import json

    return [json.loads(t) if t else {} for t in texts]


def table_documents(table, dim: int) -> tuple:
    """(ids, langs, texts, vectors, sentences, sentence vectors per document, metadata) of a table with
    :data:`COLUMNS` (and, where it has it, the metadata column)."""
    vectors = table.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim)
    sentence_lists = table.column("sentence_vectors").combine_chunks()
    offsets = sentence_lists.offsets.to_numpy()
    stacked = sentence_lists.flatten().flatten().to_numpy().reshape(-1, dim)
    offsets = offsets - offsets[0]  # a sliced list column starts past 0; flatten() starts at its first value
    per_doc = [stacked[offsets[i]:offsets[i + 1]] for i in range(len(table))]
    metadata = metadata_dicts(table.column(METADATA).to_pylist()) if METADATA in table.column_names \
        else [{} for _ in range(len(table))]
    return (table.column("doc_id").to_pylist(), table.column("lang").to_pylist(), table.column("text").to_pylist(),
            vectors.astype(np.float32, copy=False), table.column("sentences").to_pylist(), per_doc, metadata)


def read_info(path: str | Path) -> RepresentationInfo | None:
    """The file's record if it is an hmde representation file, else None (any other Parquet file)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(str(path)).metadata or {}
    except Exception:  # noqa: BLE001 - not Parquet at all: the document readers say so
        return None
    meta = {k.decode("utf-8"): v.decode("utf-8") for k, v in meta.items()}
    if meta.get("hmde.format") != FORMAT:
        return None
    try:
        return RepresentationInfo(meta["hmde.model"], meta.get("hmde.model_sha256") or None, meta["hmde.method"],
                                  int(meta["hmde.dim"]), meta.get("hmde.sentence_vectors", "lower"),
                                  pq.ParquetFile(str(path)).metadata.num_rows, meta.get("hmde.backend", "torch"))
    except (KeyError, ValueError) as exc:
        raise InputError(f"damaged hmde metadata ({exc}); encode the documents again", str(path)) from None


def read_batches(path: str | Path, info: RepresentationInfo) -> Iterator[tuple]:
    """(ids, langs, texts, vectors, sentences, sentence vectors, metadata) a row group at a time; the vectors as
    written."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(str(path))
    missing = [c for c in COLUMNS if c not in handle.schema_arrow.names]
    if missing:
        raise InputError("missing column in an hmde representation file", str(path), field=missing[0])
    dim = info.dim
    columns = list(COLUMNS) + ([METADATA] if METADATA in handle.schema_arrow.names else [])
    for group in range(handle.num_row_groups):
        yield table_documents(handle.read_row_group(group, columns=columns), dim)


def check_vectors(path: str | Path, info: RepresentationInfo) -> None:
    """Before anything is written from it: the file's vector columns hold ``info.dim``-d float vectors, every value
    finite; one line naming the file, the row (1-based) and the column otherwise (a NaN vector was indexed and
    searched as ``nan``; another dimension ended in a reshape traceback)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(str(path))
    names = handle.schema_arrow.names
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError("missing column in an hmde representation file", str(path), field=missing[0])
    for column in ("vector", "sentence_vectors"):
        kind = handle.schema_arrow.field(column).type
        inner = kind.value_type if column == "sentence_vectors" and pa.types.is_list(kind) else kind
        if not pa.types.is_fixed_size_list(inner) or not pa.types.is_floating(inner.value_type):
            raise HmdeError(f"{path}, column '{column}': holds {kind}, not vectors of {info.dim} floats; encode the "
                            "documents again")
        if inner.list_size != info.dim:
            raise HmdeError(f"{path}, column '{column}': holds {inner.list_size}-d vectors, but the file's metadata "
                            f"says hmde.dim = {info.dim}; encode the documents again")
    first = 0
    for group in range(handle.num_row_groups):
        table = handle.read_row_group(group, columns=["vector", "sentence_vectors"])
        vectors = table.column("vector").combine_chunks()
        if vectors.null_count:
            row = first + int(np.flatnonzero(vectors.is_null().to_numpy(zero_copy_only=False))[0])
            raise HmdeError(f"{path}, row {row + 1}, column 'vector': no vector (null); encode the documents again")
        values = vectors.flatten().to_numpy().reshape(-1, info.dim)
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if bad.size:
            raise HmdeError(f"{path}, row {first + int(bad[0]) + 1}, column 'vector': not a finite vector (NaN or "
                            "infinity); encode the documents again")
        lists = table.column("sentence_vectors").combine_chunks()
        offsets = lists.offsets.to_numpy()
        stacked = lists.flatten().flatten().to_numpy(zero_copy_only=False).reshape(-1, info.dim)
        bad = np.flatnonzero(~np.isfinite(stacked).all(axis=1))
        if bad.size:
            row = int(np.searchsorted(offsets - offsets[0], bad[0], side="right")) - 1
            raise HmdeError(f"{path}, row {first + row + 1}, column 'sentence_vectors': sentence {bad[0] - (offsets[row] - offsets[0]) + 1} "
                            "is not a finite vector (NaN or infinity); encode the documents again")
        first += table.num_rows
