"""``hmde index add|upsert|delete|compact|info``: the living index (:mod:`hmde.index.builder`,
:mod:`hmde.index.mutations`). ``add`` is ``index build --add``; ``upsert`` replaces the documents whose ids the
index holds; ``delete`` masks documents at once and ``compact`` drops them from the files."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import HmdeError
from .index_arguments import add_build_arguments


# what `hmde index info` says of each recorded mode (hmde.index.language_debias.MODES)
DEBIASING = {"subspace+calibrate": "the languages' directions removed, the query's own language calibrated",
             "subspace": "the languages' directions removed", "none": "none"}


def register(isub) -> None:
    a = isub.add_parser("add", help="embed INPUT's documents into INDEX_DIR (as `index build --add`)")
    add_build_arguments(a, new_index=False)
    a.set_defaults(func=run_add, mode="add")
    u = isub.add_parser("upsert", help="embed INPUT's documents into INDEX_DIR, each replacing the document of its "
                        "id where the index holds one (vectors, sentences, text, language)")
    add_build_arguments(u, new_index=False)
    u.set_defaults(func=run_add, mode="upsert")
    d = isub.add_parser("delete", help="delete documents by id (masked in every search at once; `index compact` "
                        "drops them from the files)")
    d.add_argument("index", metavar="INDEX_DIR")
    d.add_argument("ids", nargs="*", metavar="ID", help="document ids")
    d.add_argument("--ids", dest="ids_file", metavar="FILE", help="a file of ids, one per line")
    d.add_argument("--ignore-missing", action="store_true", help="delete the ids the index holds and pass over "
                   "the others (default: an unknown id refuses the whole delete)")
    d.set_defaults(func=run_delete)
    c = isub.add_parser("compact", help="write the index again without its deleted documents")
    c.add_argument("index", metavar="INDEX_DIR")
    c.add_argument("--sentence-dtype", choices=["float32", "float16"], default=None,
                   help="store the sentence vectors as this from now on (float16: half the bytes; nothing is "
                   "embedded again; docs/scaling.md)")
    c.set_defaults(func=run_compact)
    i = isub.add_parser("info", help="model, method, kind, live and deleted documents and sentences, languages, size")
    i.add_argument("index", metavar="INDEX_DIR")
    i.add_argument("--json", action="store_true", help="one JSON object, for machines")
    i.set_defaults(func=run_info)


def run_add(args: argparse.Namespace) -> int:
    """`index build --add` with the index's settings; ``mode`` upsert replaces known ids."""
    from .index_from_vectors import run_build_any

    args.output = args.index
    return run_build_any(args)


def read_ids(args: argparse.Namespace) -> list[str]:
    """The ids of the arguments and of ``--ids FILE`` (one per line; empty lines skipped)."""
    from ..io.documents import open_text

    ids = list(args.ids)
    if args.ids_file:
        with open_text(args.ids_file) as f:
            ids += [line.strip() for line in f if line.strip()]
    if not ids:
        raise HmdeError("name the ids to delete (arguments or --ids FILE)")
    return ids


def run_delete(args: argparse.Namespace) -> int:
    from ..index.mutations import delete_documents

    ids = read_ids(args)
    deleted = delete_documents(args.index, ids, ignore_missing=args.ignore_missing)
    print(f"deleted {deleted} document{'s' if deleted != 1 else ''} from {args.index}"
          + (f" ({len(set(ids)) - deleted} not in it)" if deleted < len(set(ids)) else ""))
    return 0


def run_compact(args: argparse.Namespace) -> int:
    from ..index.mutations import compact_index

    dropped = compact_index(args.index, args.sentence_dtype)
    stored = f"; its sentence vectors are {args.sentence_dtype}" if args.sentence_dtype else ""
    print(f"compacted {args.index}: {dropped} deleted document{'s' if dropped != 1 else ''} dropped{stored}"
          if dropped or args.sentence_dtype else f"{args.index} holds no deleted document: nothing to compact")
    return 0


def run_info(args: argparse.Namespace) -> int:
    from ..index.builder import describe
    from ..index.store import DocumentIndex

    with DocumentIndex.open(args.index) as index:
        info = describe(index)
    if args.json:
        sys.stdout.write(json.dumps(info, ensure_ascii=False) + "\n")
        return 0
    quality = info.get("language_quality") or {}
    languages = ", ".join(f"{k} {v}" + (f" ({quality[k]['tier']})" if quality.get(k, {}).get("score") is not None
                                        else "") for k, v in info["languages"].items()) or "none"
    debiasing = DEBIASING.get(info.get("language_debias", "none"), "none")
    if debiasing != "none" and len([k for k in info["languages"] if k != "unknown"]) < 2:
        debiasing += " (recorded; idle here: it needs documents in two known languages)"
    kind = info["index_type"] + (", every sentence's vector too" if info["multi_vector"] else ", one vector per "
                                 "document") + (", BM25" if info["bm25"] else "")
    masked = f", {info['deleted_documents']} replaced or deleted (masked until `hmde index compact`)" \
        if info["deleted_documents"] else ""
    rows = [("index", info["path"]), ("model", info["model"]), ("method", info["method"]), ("kind", kind),
            ("documents", f"{info['documents']} live{masked}"),
            ("sentences", f"{info['sentences']} live" + (f", {info['deleted_sentences']} replaced or deleted"
                                                          if info["deleted_sentences"] else "")),
            ("languages", languages), ("debiasing", debiasing),
            ("on disk", f"{info['bytes_on_disk'] / 1e6:.1f} MB")]
    for name, value in rows:
        print(f"{name:<12} {value}")
    return 0
