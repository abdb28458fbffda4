"""``hmde index sync FOLDER INDEX_DIR``: the index made to hold the folder's files as they are, in one commit
(:mod:`hmde.files.sync`); with nothing to do, no model loads and nothing is written."""

from __future__ import annotations

import argparse
import sys

from .common import add_backend_argument, add_device_argument
from .inputs import add_reading_arguments, reading_options


def register(isub) -> None:
    s = isub.add_parser("sync", help="add FOLDER's new files to INDEX_DIR, replace its changed ones and delete the "
                        "documents of files gone from it, in one commit (documents from elsewhere are never touched)")
    s.add_argument("folder", metavar="FOLDER", help="a folder of PDF, HTML, Word, Markdown or text files")
    s.add_argument("index", metavar="INDEX_DIR", help="an index (make one with `hmde index build FOLDER -o INDEX_DIR`)")
    s.add_argument("--model", default=None, help="the index's model where it is not where the index says")
    add_reading_arguments(s)
    add_device_argument(s)
    add_backend_argument(s, default=None, help_suffix="; one that gives the index's vectors")
    s.add_argument("--batch-size", type=int, default=64, help="documents embedded at a time")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=run_sync)


def run_sync(args: argparse.Namespace) -> int:
    from ..files.sync import plan_sync
    from ..index.search import Index
    from ..index.store import DocumentIndex

    store = DocumentIndex.open(args.index)
    try:
        plan, to_read = plan_sync(store, args.folder)
    except BaseException:
        store.close()
        raise
    if plan.nothing_to_do:
        store.close()
        print(plan.summary(args.index))
        return 0
    print(f"hmde: {len(plan.added)} new, {len(plan.changed)} changed and {len(plan.removed)} removed file(s) to "
          f"sync ({len(to_read)} to read and embed)", file=sys.stderr)
    bar = None
    if not args.no_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(to_read), desc="files read", unit="file", file=sys.stderr)
    pages = [0]

    def moved(name: str, count: int) -> None:
        pages[0] += count
        bar.update(1)
        if pages[0]:
            bar.set_postfix(pages=pages[0])

    with Index.attach(store, args.model, args.device, args.backend) as index:
        done = index.sync(args.folder, args.on_error, args.batch_size, moved if bar is not None else None,
                          (plan, to_read), reading_options(args))  # planned once: walked and hashed once
    if bar is not None:
        bar.close()
    print(done.summary(args.index))
    for line in done.report.lines():
        print(f"hmde: {line}", file=sys.stderr)
    return 0
