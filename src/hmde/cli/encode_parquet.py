"""``hmde encode INPUT -o OUT.parquet``: the whole representation (document vectors, sentences, their spans and
vectors) in the format vector stores ingest (:mod:`hmde.io.representation_parquet`)."""

from __future__ import annotations

import argparse



def write_parquet(args: argparse.Namespace, kind: str, model, count: int, vectorizer, chunks) -> int:
    """OUT.parquet: each document's vector, sentences, their character spans and vectors
    (:func:`hmde.index.builder.write_representation`)."""
    from tqdm.auto import tqdm

    from ..encoders.backends import recorded
    from ..encoders.registry import recorded_name, resolve_model_path
    from ..evaluation.provenance import model_hash
    from ..index.builder import write_representation
    from ..io.representation_parquet import RepresentationInfo

    name = recorded_name(args.model)
    info = RepresentationInfo(name, model_hash(resolve_model_path(name)), args.method,
                              int((model.lower if kind == "hmde" else model).dim),
                              backend=recorded(getattr(args, "backend", None) or "torch", model))
    with tqdm(total=count, desc="documents", unit="doc", disable=args.no_progress) as bar:
        rows = write_representation(args.output, vectorizer, info, chunks, bar.update)
    print(f"wrote {rows} documents ({info.dim}-d vectors, their sentences and spans) to {args.output}")
    return 0
