"""The ``--engine ray`` options shared by ``hmde encode`` and ``hmde index build``."""

from __future__ import annotations

import argparse


def add_ray_arguments(p: argparse.ArgumentParser, what: str) -> None:
    p = p.add_argument_group("Ray engine (--engine ray)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help=f"ray: a Ray Data pipeline with a pool of model actors {what}; resumable (finished shards "
                   "are skipped on a rerun)")
    p.add_argument("--ray-address", help="Ray cluster to join (default: start Ray locally)")
    p.add_argument("--ray-actors", type=int, help="model actors (default: one per GPU, else CPUs / cpus-per-actor)")
    p.add_argument("--ray-cpus-per-actor", type=float, default=1.0)
    p.add_argument("--ray-gpus-per-actor", type=float, default=None,
                   help="default: 1 with --device cuda, else 0")
    p.add_argument("--ray-shards-per-wave", type=int, default=8,
                   help="input shards per wave; a wave's shards are finished (and skipped on a rerun) together")


def ray_options(args: argparse.Namespace):
    from ..scale.ray_encode import RayOptions

    return RayOptions(address=args.ray_address, actors=args.ray_actors, cpus_per_actor=args.ray_cpus_per_actor,
                      gpus_per_actor=args.ray_gpus_per_actor or 0.0, shards_per_wave=args.ray_shards_per_wave)


def encode_spec(args: argparse.Namespace, method: str | None, keep_text: bool = False, normalize: bool = False,
                sentences: bool = False):
    """What the Ray actors compute, checked before Ray starts; ``method`` None: hmde or, for a sentence encoder, mean."""
    from ..errors import HmdeError
    from ..evaluation.provenance import model_hash
    from ..encoders.model_folder import is_hmde_folder
    from .length_arguments import length_overrides
    from ..encoders.registry import resolve_model_path
    from ..methods import default_method, method_class
    from ..scale.ray_encode import QUERIES, EncodeSpec

    path = resolve_model_path(args.model)
    method = method or default_method(is_hmde_folder(path), args.model, getattr(args, "preset", None))
    if method != QUERIES:
        if method_class(method).needs_hmde_model and not is_hmde_folder(path):
            raise HmdeError(f"'{args.model}' is a sentence encoder, not an hmde model: use --method mean"
                            f"{' or --queries' if hasattr(args, 'queries') else ''}")
        if method_class(method).fitted and not args.lawdr_stats:
            raise HmdeError(f"--engine ray with --method {method} needs --lawdr-stats (fit them once with the "
                            "local engine)")
    return EncodeSpec(model=str(path), model_sha256=model_hash(path), method=method, text_field=args.text_field,
                      id_field=args.id_field, lang_field=args.lang_field or None, lang=getattr(args, "lang", None),
                      batch_size=getattr(args, "batch_size", 32),
                      sentence_batch_size=getattr(args, "sentence_batch_size", None), normalize=normalize, bf16=args.bf16,
                      lawdr_stats=args.lawdr_stats, keep_text=keep_text or sentences, sentences=sentences,
                      lengths=length_overrides(args))
