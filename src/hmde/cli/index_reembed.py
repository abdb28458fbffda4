"""``hmde index reembed [MODEL] SRC -o NEW``: an index's documents, as it stores them, embedded again with
another model or method into a new index, without the source files.

The documents stream from SRC's DuckDB table in row order, ``--chunk`` at a time; each chunk is committed
to NEW atomically (the first as a new index, the others as ``--add``), and ``NEW/reembed.json`` records
the run, so that a run cut off resumes after the last committed chunk. NEW takes SRC's index type and
mode (multi-vector, BM25) unless told otherwise; SRC is only read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..encoders.config import DOCUMENT_METHODS
from ..methods import method_class
from ..errors import HmdeError
from .arg_types import positive_int
from .common import add_device_argument

MARKER = "reembed.json"  # in NEW while a re-embedding is under way; removed when it is done


def register(isub) -> None:
    r = isub.add_parser("reembed", help="embed an index's documents again (another model or method) into a new index",
                        description="Reads the documents the index stores; no source file is needed. Resumable: run "
                        "the same command again after an interruption.")
    r.add_argument("model", nargs="?", default=None, metavar="MODEL",
                   help="the model of the new index (default: hmde's default model); MODEL first, as in every "
                   "command (INDEX_DIR MODEL, the order before, is still understood)")
    r.add_argument("source", metavar="INDEX_DIR", help="the index to read (unchanged)")
    r.add_argument("--output", "-o", required=True, metavar="NEW_DIR")
    r.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                   help="document vectors (default: the model's recommended method)")
    r.add_argument("--overwrite", action="store_true", help="replace an index at NEW_DIR (a folder holding anything "
                   "else is never replaced)")
    r.add_argument("--chunk", type=positive_int, default=10_000, help="documents committed at a time (default 10000)")
    add_device_argument(r)
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=run_reembed)


def build_arguments(args: argparse.Namespace, source_meta) -> argparse.Namespace:
    """`hmde index build`'s arguments for NEW: SRC's type and mode, this run's model and method."""
    from ..encoders.registry import DEFAULT_MODEL

    mode = source_meta.multi_vector
    return argparse.Namespace(
        model=args.model or DEFAULT_MODEL, method=args.method, output=args.output, type=source_meta.index_type,
        hnsw_m=source_meta.hnsw_m, ivf_lists=source_meta.ivf_lists or 1024, pq_m=source_meta.pq_m or 48,
        bm25=source_meta.bm25, backend="torch", multi_vector=mode,
        sentence_vectors=("lower" if source_meta.sentence_vectors == "context" and args.method
                          and not method_class(args.method).contextual else source_meta.sentence_vectors)
        if mode else None,
        preset=None, long_documents=None, long_sentences=None, segmentation=None, bf16=False,
        lawdr_stats=None, device=args.device, no_progress=args.no_progress, engine="local", add=False, lang=None,
        language_debias=source_meta.language_debias or "none", sentence_dtype=source_meta.sentence_dtype)


def check_new_output(args: argparse.Namespace, source: Path) -> dict | None:
    """NEW is new (or empty), or a re-embedding of SOURCE cut off before it ended (returns its record)."""
    from ..ground.output_dirs import check_replaceable, check_writable_parent, is_hmde_index

    check_writable_parent(args.output)
    new = Path(args.output)
    marker = new / MARKER
    if marker.is_file():
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            raise HmdeError(f"{marker}: not readable JSON; remove {new} and start again") from None
        if record.get("source") != str(source.resolve()):
            raise HmdeError(f"{new} holds a re-embedding of {record.get('source')}, not of {source}")
        for key in ("model", "method"):
            asked = getattr(args, key)
            if asked is not None and asked != record.get(key):
                raise HmdeError(f"{new} is a re-embedding with {key} {record.get(key)}; resume it with that {key} "
                                "(or name another output)")
        return record
    check_replaceable(new, "hmde index", is_hmde_index, overwrite=args.overwrite)
    return None


def source_chunks(source, size: int, skip: set[str]):
    """SRC's documents as records, ``size`` at a time, in row order, leaving out the ids in ``skip``."""
    from ..io.documents import DocumentRecord

    rows = source._query("SELECT doc_id, text, lang FROM docs ORDER BY row")
    chunk = []
    for doc_id, text, lang in rows:
        if doc_id in skip:
            continue
        chunk.append(DocumentRecord(doc_id, text or "", lang))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def order_arguments(args: argparse.Namespace) -> None:
    """``[MODEL] INDEX_DIR`` as every command takes its model first; ``INDEX_DIR MODEL`` (hmde before issue 57)
    is recognised where only the first of the two is an index."""
    from ..ground.output_dirs import is_hmde_index

    if args.model is not None and is_hmde_index(Path(args.model)) and not is_hmde_index(Path(args.source)):
        args.model, args.source = args.source, args.model


def run_reembed(args: argparse.Namespace) -> int:
    order_arguments(args)
    from tqdm.auto import tqdm

    from ..ground.atomic import write_text_atomic
    from ..evaluation.provenance import model_hash
    from ..index.build import IVF_TRAIN_PER_LIST, PQ_TRAIN, encoded_batches, write_batches
    from ..index.store import DocumentIndex
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions
    from ..encoders.registry import resolve_model_path
    from ..encoders.routing import refuse_for_one_space
    from .index_build import index_meta, load_index_model

    source_dir = Path(args.source)
    refuse_for_one_space(args.model, "an index", "name the new index's model")
    record = check_new_output(args, source_dir)
    source = DocumentIndex.open(source_dir)
    try:
        build = build_arguments(args, source.meta)
        if record is not None:
            build.model, build.method = record["model"], record["method"]
        done: set[str] = set()
        if record is not None and (Path(args.output) / "index.json").is_file():
            with DocumentIndex.open(args.output) as new:
                done = set(new.doc_ids())
        model, method, recorded, dim = load_index_model(build, None)
        build.method = method
        if record is None:
            Path(args.output).mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(args.output) / MARKER, json.dumps(
                {"source": str(source_dir.resolve()), "model": build.model, "method": method}) + "\n")
        vectorizer = DocumentVectorizer(model, method, MethodOptions())
        meta = index_meta(build, recorded, model_hash(resolve_model_path(recorded)), dim, method)
        first = max(args.chunk, build.ivf_lists * IVF_TRAIN_PER_LIST, PQ_TRAIN) if build.type in ("ivf", "ivfpq") \
            else args.chunk  # the first commit trains an IVF index
        total = source.meta.count
        bar = tqdm(total=total, initial=len(done), desc="documents", unit="doc", disable=args.no_progress)
        committed = bool(done)  # else the first commit writes a new index (over an old one, with --overwrite)
        for chunk in source_chunks(source, first if not done else args.chunk, done):
            batches = encoded_batches(vectorizer, [chunk[i:i + 64] for i in range(0, len(chunk), 64)],
                                      bool(build.multi_vector) and build.sentence_vectors == "context", bar.update)
            write_batches(args.output, meta, batches, add=committed).close()
            committed = True
        bar.close()
    finally:
        source.close()
    (Path(args.output) / MARKER).unlink(missing_ok=True)
    with DocumentIndex.open(args.output) as new:
        print(f"re-embedded {source_dir} ({total} documents) with {recorded} ({method}) into {args.output}; it holds "
              f"{new.meta.count}")
    return 0
