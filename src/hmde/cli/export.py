"""``hmde export onnx``: ONNX graphs of an hmde model, optionally with an int8 lower encoder."""

from __future__ import annotations

import argparse

from .common import add_model_argument, load_model


def register(sub) -> None:
    p = sub.add_parser("export", help="export a model for deployment (ONNX, int8)")
    esub = p.add_subparsers(dest="export_format", metavar="FORMAT")
    esub.required = True
    o = esub.add_parser("onnx", help="lower.onnx + upper.onnx (+ lower.int8.onnx), run by ONNX Runtime")
    add_model_argument(o)
    o.add_argument("--output", "-o", required=True)
    o.add_argument("--int8", action="store_true", help="also write a dynamically int8-quantised lower encoder")
    o.add_argument("--opset", type=int, default=17)
    o.add_argument("--overwrite", action="store_true", help="replace an existing ONNX export at OUTPUT")
    o.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import HmdeError
    from ..export.onnx import export_onnx
    from ..ground.output_dirs import check_replaceable, check_writable_parent, is_onnx_export

    check_replaceable(args.output, "hmde ONNX export", is_onnx_export, args.overwrite)
    check_writable_parent(args.output)
    kind, model = load_model(args.model, "cpu")
    if kind != "hmde":
        raise HmdeError(f"'{args.model}' is a sentence encoder; export an hmde model")
    ranges = None
    if args.int8:  # smoothed where hmde ships the model's calibration (hmde.export.smoothing)
        from ..encoders.registry import resolve_model_path
        from ..evaluation.provenance import model_hash
        from ..export.smoothing import load_ranges

        ranges = load_ranges(model_hash(resolve_model_path(args.model)))
    export_onnx(model, args.output, args.int8, args.opset, ranges)
    print(f"wrote ONNX graphs to {args.output}" + ((" (with lower.int8.onnx, smoothed)" if ranges is not None else
                                                   " (with lower.int8.onnx)") if args.int8 else ""))
    return 0
