"""``hmde index build OUT.parquet``: an index from the representation file `hmde encode -o OUT.parquet` wrote
(:mod:`hmde.io.representation_parquet`): its vectors, sentences and texts as written, no model loaded, nothing
embedded again."""

from __future__ import annotations

import argparse

from ..errors import HmdeError


def representation_of(args: argparse.Namespace):
    """The input's record when it is an hmde representation file, with the flags made to agree with it (its model,
    method and sentence vectors); else None."""
    from ..io.representation_parquet import check_vectors, read_info

    if not str(args.input).endswith(".parquet"):
        return None
    info = read_info(args.input)
    if info is None:
        return None
    check_vectors(args.input, info)  # finite, of the recorded dimension: before any model or output is touched
    if args.engine == "ray":
        raise HmdeError(f"{args.input} holds vectors already: build from it with --engine local")
    if args.method and args.method != info.method:
        raise HmdeError(f"{args.input} holds '{info.method}' document vectors; build with --method {info.method} (or "
                        "leave --method out)")
    if args.multi_vector and args.sentence_vectors and args.sentence_vectors != info.sentence_vectors:
        raise HmdeError(f"{args.input} holds '{info.sentence_vectors}' sentence vectors, not {args.sentence_vectors}")
    if args.model is not None:
        from ..encoders.registry import resolve_model_path, same_model_hash
        from ..evaluation.provenance import model_hash

        if not same_model_hash(info.model_sha256, model_hash(resolve_model_path(args.model))):
            raise HmdeError(f"{args.input} was encoded with {info.model}, not {args.model}: leave the model out")
    args.model, args.method = info.model, info.method
    if not args.add:
        args.sentence_vectors = args.sentence_vectors or info.sentence_vectors
    return info


def run_build_any(args: argparse.Namespace) -> int:
    """`hmde index build|add|upsert`: from a representation file (its vectors), else by embedding the input."""
    from .index_build import check_build_output, run_build

    info = representation_of(args)  # a file `hmde encode -o OUT.parquet` wrote: its vectors, not the model
    if info is None:
        return run_build(args)
    existing = check_build_output(args)
    try:
        return run_build_from_representation(args, existing, info)
    finally:
        if existing is not None:
            existing.close()


def run_build_from_representation(args: argparse.Namespace, existing, info) -> int:
    from ..index.build import write_batches
    from ..index.builder import representation_batches
    from ..index.store import check_compatible
    from .index_build import index_meta, report, scan_for_index, write_mode

    count = scan_for_index(args, existing)  # ids unique (and new, on --add) before anything is written
    if existing is not None:
        check_compatible(existing.meta, info.model_sha256, info.dim, existing.path)
        from ..encoders.backends import same_vectors

        if not same_vectors(info.backend, existing.meta.backend):
            raise HmdeError(f"{args.input} holds vectors of --backend {info.backend}, index {existing.path} those of "
                            f"{existing.meta.backend}: encode the documents with --backend {existing.meta.backend}")
    args.backend = info.backend  # the index records the file's family of vectors
    meta = index_meta(args, info.model, info.model_sha256, info.dim, info.method)
    mode = write_mode(args)
    index = write_batches(args.output, meta, representation_batches(args.input, info), add=mode != "create",
                          replace=mode == "upsert")
    report(args, count, index, existing)
    return 0
