"""``hmde encode --engine ray``: Parquet shards written by Ray Data actors (:mod:`hmde.scale.ray_encode`)."""

from __future__ import annotations

import argparse

from ..encoders.routing import route
from ..errors import HmdeError
from .common import pick_device
from .ray_arguments import encode_spec, ray_options


def run_ray(args: argparse.Namespace) -> int:
    """``--engine ray``: stream shards through Ray Data actors into Parquet shards (``--with-sentences``: the whole
    representation in each, :mod:`hmde.io.representation_parquet`'s columns)."""
    from ..scale.ray_encode import QUERIES, encode_with_ray

    args.model = route(args.model, [args.lang] if args.lang else None)  # Ray reads the input in its workers
    if args.engine != "ray":  # --with-sentences alone
        raise HmdeError("--with-sentences is for --engine ray; the local engine writes the sentences to an "
                        "-o OUT.parquet")
    if args.with_sentences and (args.queries or args.normalize):
        raise HmdeError("--with-sentences writes documents as an index stores them: leave out --queries and "
                        "--normalize")
    spec = encode_spec(args, QUERIES if args.queries else args.method, normalize=args.normalize,
                       sentences=args.with_sentences)
    manifest = encode_with_ray(spec, [args.input], args.output, device=pick_device(args.device), options=ray_options(args),
                               show_progress=not args.no_progress)
    shards = manifest.data["shards"]
    print(f"{sum(e['rows'] for e in shards.values())} documents in {len(shards)} shards of "
          f"{manifest.data['dim']}-d vectors in {args.output}")
    return 0
