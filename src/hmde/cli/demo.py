"""``hmde demo``: index the bundled sample collection and run cross-lingual queries.

The collection (36 short documents: 6 topics, each written in English, German, French,
Spanish, Italian and Russian) and its queries ship with the package, so the demo runs
on a fresh machine with no network, on the bundled default model.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path

from .common import add_device_argument, add_model_argument

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo"


def register(sub) -> None:
    p = sub.add_parser("demo", help="index a small multilingual sample collection and search it across languages")
    add_model_argument(p)
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--query", action="append", help="your own query (repeatable) instead of the bundled ones")
    p.add_argument("--keep", metavar="INDEX_DIR", help="keep the index here (search it later with `hmde search`)")
    add_device_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .index import print_hits, search_index

    collection = DEMO_DIR / "collection.jsonl"
    if args.query:
        queries = [(q, None) for q in args.query]
    else:
        queries = [(r["text"], r["lang"]) for r in map(json.loads, (DEMO_DIR / "queries.jsonl").read_text("utf-8").splitlines())]
    with tempfile.TemporaryDirectory(prefix="hmde-demo-") as tmp:
        index_dir = args.keep or str(Path(tmp) / "index")
        from . import index as index_cli

        parser = argparse.ArgumentParser(prog="hmde")  # `hmde index build`'s own parser: every default applies
        index_cli.register(parser.add_subparsers())
        build = parser.parse_args(["index", "build", args.model, str(collection), "-o", index_dir, "--no-progress",
                                   "--device", args.device])
        with contextlib.redirect_stdout(io.StringIO()):  # its summary would name a folder deleted on exit
            build.func(build)
        if args.keep:
            print(f"index kept in {args.keep}")
        model = build.model if build.model == args.model else f"{args.model} ({build.model})"  # hmde-auto's choice
        print(f"model: {model}; collection: {collection.name} (36 documents, 6 topics x 6 languages)\n")
        hits = search_index(index_dir, [q for q, _ in queries], args.top_k, None, None, args.device)
        for (query, lang), result in zip(queries, hits):
            print_hits(f"[{lang}] {query}" if lang else query, result, as_json=False)
            print()
    return 0
