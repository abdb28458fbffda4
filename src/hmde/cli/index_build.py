"""``hmde index build``, once its flags are parsed (:mod:`hmde.cli.index`): every check before the model loads (the
output, the ids, an index to extend), then the library fills the index (:mod:`hmde.index.build`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ..text.coverage import languages_of, warn_uncovered
from ..methods import default_method, method_class
from ..errors import HmdeError, InputError
from ..encoders.registry import DEFAULT_MODEL
from ..encoders.routing import refuse_for_one_space, route
from ..encoders.backends import for_adding, for_job
from .common import autocast_dtype, lawdr_fit_options, load_model, pick_device
from .inputs import say_report
from .index_mode import check_multi_vector_model, choose_index_mode
from .preflight import check_memory, check_records
from .ray_arguments import encode_spec, ray_options


def index_meta(args: argparse.Namespace, model: str, model_sha256: str | None, dim: int, method: str,
               encoder=None):
    """The flags as the library's settings (:class:`hmde.index.builder.IndexSettings`), then the index's record
    (with the family of vectors ``encoder`` gives: :func:`hmde.encoders.backends.recorded`)."""
    from ..encoders.backends import recorded
    from ..index.builder import IndexSettings, new_meta
    from ..index.language_debias import debias_mode

    settings = IndexSettings(index_type=args.type, hnsw_m=args.hnsw_m, ivf_lists=args.ivf_lists, pq_m=args.pq_m,
                             bm25=bool(getattr(args, "bm25", False)),
                             multi_vector=bool(getattr(args, "multi_vector", False)),
                             sentence_vectors=getattr(args, "sentence_vectors", None) or "lower",
                             backend=recorded(getattr(args, "backend", None) or "torch", encoder),
                             store=getattr(args, "store", None) or "",
                             language_debias=debias_mode(getattr(args, "language_debias", None)),
                             sentence_dtype=getattr(args, "sentence_dtype", None) or "float32")
    settings.check()
    return new_meta(settings, model, model_sha256, dim, method, args.output)


def write_mode(args: argparse.Namespace) -> str:
    """create, add (``--add``, `index add`) or upsert (`index upsert`)."""
    return getattr(args, "mode", None) or ("add" if args.add else "create")


def check_build_output(args: argparse.Namespace):
    """Before any encoding: the output may be created or replaced (see hmde.ground.output_dirs); with
    ``--add``, the index there opens whole and the model and method agree with it.

    Returns the open index for ``--add`` (closed by the caller), else None. Without
    ``--model``/``--method``, an add uses the index's own.
    """
    from ..index.meta import check_adding
    from ..index.store import DocumentIndex
    from ..ground.output_dirs import check_replaceable, check_writable_parent, is_hmde_index
    from ..encoders.registry import recorded_model, recorded_model_available

    check_writable_parent(args.output)
    choose_index_mode(args)
    if not args.add:
        check_replaceable(args.output, "hmde index", is_hmde_index, args.overwrite)
        if getattr(args, "store", None):  # a bad address or a user's file: refused before the model loads
            from ..index.milvus_client import parse_store

            parse_store(args.store)
        args.model = args.model or DEFAULT_MODEL
        args.backend = for_job(args.backend or "auto", args.multi_vector and args.sentence_vectors)
        check_multi_vector_model(args)
        return None
    if not is_hmde_index(Path(args.output)):
        raise HmdeError(f"{args.output}: --add needs an existing hmde index there")
    refuse_for_one_space(args.model, "an index", "leave the model out of --add")
    index = DocumentIndex.open(args.output)
    try:
        meta = index.meta
        if args.method and args.method != meta.method:
            raise HmdeError(f"index {args.output} holds '{meta.method}' document vectors; add to it with "
                            f"--method {meta.method} (or leave --method out), not {args.method}")
        args.method = meta.method
        args.backend = for_adding(args.backend, meta, args.output)
        check_adding(meta, args.output, args.multi_vector, args.sentence_vectors, getattr(args, "sentence_dtype", None))
        args.multi_vector, args.sentence_vectors = meta.multi_vector, meta.sentence_vectors or None
        if args.model is None:
            model = recorded_model(meta.model)
            if not recorded_model_available(model):
                raise HmdeError(f"index {args.output} was built with {meta.model}, which is not there any more: "
                                "name the model to add with")
            args.model = model
        check_same_model(index, args.model)
        if meta.bm25:
            index.require_bm25()  # a damaged BM25 index is refused like any damaged file of the index
        if method_class(args.method).fitted and not args.lawdr_stats:
            raise HmdeError(f"--method {args.method} with --add needs --lawdr-stats (the statistics the index was "
                            "built with)")
    except BaseException:
        index.close()
        raise
    return index


def check_same_model(index, name: str) -> None:
    """The model's files hash as the index's did (hashing reads files; no model is loaded)."""
    from ..evaluation.provenance import model_hash
    from ..encoders.registry import resolve_model_path, same_model_hash

    sha = model_hash(resolve_model_path(name))
    if not same_model_hash(index.meta.model_sha256, sha):
        raise HmdeError(f"index {index.path} was built with another model ({index.meta.model}, sha256 "
                        f"{index.meta.model_sha256[:12]}…) than {name}; add with that model, or leave the model out")


def check_new_ids(index, lines: dict[str, int | None], args) -> None:
    """On --add, ids already in the index are refused before encoding, naming the first one's input line.
    ``lines``: each input id's line (from :func:`hmde.cli.preflight.check_records`)."""
    if index is None or write_mode(args) == "upsert":  # an upsert replaces the documents it names
        return
    known = index.known_ids(list(lines))
    if known:
        first = min(known, key=lambda i: lines[i] or 0)
        raise InputError(f"the id '{first}' is already in the index {args.output}", str(args.input), lines[first],
                         args.id_field)


def run_build(args: argparse.Namespace) -> int:
    if write_mode(args) == "upsert" and args.engine == "ray":
        raise HmdeError("`hmde index upsert` encodes with --engine local (the Ray engine's shards are added, not "
                        "matched against the index's ids)")
    existing = check_build_output(args)
    try:
        return run_build_ray(args) if args.engine == "ray" else run_build_local(args, existing)
    finally:
        if existing is not None:
            existing.close()


def run_build_local(args: argparse.Namespace, existing) -> int:
    """Stream INPUT into the index a chunk at a time (LAWDR fitted on INPUT takes it whole)."""
    from ..methods.lawdr_statistics import LawdrStats

    stats = LawdrStats.load(args.lawdr_stats) if args.lawdr_stats else None
    if args.method and method_class(args.method).fitted and stats is None:
        return run_build_in_memory(args, existing)
    from collections import Counter

    languages: Counter = Counter()
    count = scan_for_index(args, existing, languages)
    return stream_into_index(args, existing, stats, count, languages)


def scan_for_index(args: argparse.Namespace, existing, languages=None) -> int:
    """A first pass that keeps no text: every check of :mod:`hmde.cli.preflight` and the ids already in the index,
    before any model loads; returns the document count (``languages``: a Counter of the documents' languages)."""
    from collections import Counter

    from ..text.coverage import tally
    from ..index.milvus_client import fitting
    from ..io.documents import ALL_FIELDS
    from .inputs import read_input
    from .preflight import check_index_size, counting_chars

    milvus = getattr(args, "store", None) or (existing is not None and existing.meta.store == "milvus")
    records = counting_chars(read_input(args, ALL_FIELDS if milvus else (), progress=True), args)
    if milvus:  # a text Milvus would cut, metadata it cannot hold: refused before any model loads
        records = fitting(records, args.input)
    lines = check_records(tally(records, Counter() if languages is None else languages, args.lang), args)
    check_new_ids(existing, lines, args)
    check_index_size(len(lines), args)
    return len(lines)


def load_index_model(args: argparse.Namespace, existing, languages=None):
    """The model, its method, the name the index records for it (hmde.encoders.registry.recorded_name) and its
    dimension, checked against --pq-m and, on --add, the index. ``hmde-auto`` is routed by the
    documents' ``languages`` first, so the index records the model it was built with."""
    from ..encoders.registry import recorded_name
    from .preflight import check_pq

    args.model = route(args.model, languages)
    kind, model = load_model(args.model, pick_device(args.device), args=args)
    method = args.method or default_method(kind == "hmde", args.model, args.preset)
    dim = (model.lower if kind == "hmde" else model).dim
    check_pq(dim, args)
    if existing is not None and existing.meta.dim != dim:
        raise HmdeError(f"index {args.output} holds {existing.meta.dim}-dimensional vectors, {args.model} gives {dim}")
    return model, method, recorded_name(args.model), dim


def stream_into_index(args: argparse.Namespace, existing, stats, count: int, languages=None) -> int:
    from tqdm.auto import tqdm

    from ..evaluation.provenance import model_hash
    from ..index.builder import CHUNK_CHARACTERS, write_records
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions
    from ..encoders.registry import resolve_model_path
    from .encode import input_chunks

    model, method, path, dim = load_index_model(args, existing, languages)
    if languages and warn_uncovered(args.model, model, languages) and args.add:
        print(f"hmde: to move the index to a model that covers them: hmde index reembed hmde-e5 {args.output} -o "
              "NEW_INDEX (it reads the documents the index stores)", file=sys.stderr)
    vectorizer = DocumentVectorizer(model, method, MethodOptions(autocast_dtype=autocast_dtype(args.bf16),
                                                                 **lawdr_fit_options(args)), stats)
    bar = tqdm(total=count, desc="documents", unit="doc", disable=args.no_progress)
    meta = index_meta(args, path, model_hash(resolve_model_path(path)), dim, method, model)
    check_memory(args, existing.meta if existing is not None else meta, count, existing)  # before any embedding
    # one chunk at a time (at least a batch and CHUNK_CHARACTERS of text), as hmde.Index: the bar moves per chunk
    index = write_records(args.output, vectorizer, meta,
                          input_chunks(args, vectorizer.options.batch_size, CHUNK_CHARACTERS), write_mode(args),
                          bar.update)
    bar.close()
    report(args, count, index, existing)
    return 0


def report(args: argparse.Namespace, count: int, index, existing=None) -> None:
    mode = write_mode(args)
    replaced = f" ({getattr(index, 'replaced', 0)} replaced)" if mode == "upsert" else ""
    print(f"{ {'create': 'indexed', 'add': 'added', 'upsert': 'upserted'}[mode]} {count} documents{replaced}; "
          f"{args.output} holds {index.meta.live}")
    index.close()
    say_report(args)


def run_build_in_memory(args: argparse.Namespace, existing) -> int:
    """The whole input at once: LAWDR fitted on INPUT needs every sentence vector before the first document."""
    from ..evaluation.provenance import model_hash
    from ..index.builder import write_records
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions
    from ..encoders.registry import resolve_model_path
    from .inputs import read_input
    from .preflight import check_index_size, check_lawdr_inputs

    records = [dataclasses.replace(r, lang=args.lang or r.lang) for r in read_input(args, progress=True)]
    check_new_ids(existing, check_records(records, args), args)
    check_index_size(len(records), args)
    check_lawdr_inputs(records, [r.lang for r in records], args, have_stats=False)
    languages = languages_of([r.lang for r in records], [r.text for r in records])
    model, method, path, dim = load_index_model(args, existing, languages)
    warn_uncovered(args.model, model, languages)
    options = MethodOptions(autocast_dtype=autocast_dtype(args.bf16), show_progress_bar=not args.no_progress,
                            **lawdr_fit_options(args))
    meta = index_meta(args, path, model_hash(resolve_model_path(path)), dim, method, model)
    # one chunk: LAWDR is fitted on every document before the first is written
    index = write_records(args.output, DocumentVectorizer(model, method, options), meta, [records], write_mode(args))
    report(args, len(records), index, existing)
    return 0


def run_build_ray(args: argparse.Namespace) -> int:
    """Encode with Ray into Parquet shards, then stream them into the index, shard by shard."""
    from ..index.builder import write_shards
    from ..encoders.registry import recorded_name
    from ..scale.ray_encode import encode_with_ray, input_shards

    args.model = route(args.model, None)  # Ray reads the input in its workers: no language is known here
    spec = encode_spec(args, args.method, keep_text=True, sentences=bool(args.multi_vector))
    vectors_dir = Path(args.vectors_dir or f"{str(args.output).rstrip('/')}.vectors")
    manifest = encode_with_ray(spec, [args.input], vectors_dir, device=pick_device(args.device),
                               options=ray_options(args), show_progress=not args.no_progress)
    shards = input_shards([args.input])
    meta = index_meta(args, recorded_name(args.model), spec.model_sha256, int(manifest.data["dim"]), spec.method)
    index, written = write_shards(args.output, meta, vectors_dir, shards, args.add, args.ivf_lists)
    report(args, written, index)
    return 0
