"""The inputs of every command that reads documents: INPUT... (folders, document files, structured files), the flags
of the reading layer (``--on-error``, ``--txt``, ``--max-file-mb``), and the one call the commands read through
(:func:`read_input`: :func:`hmde.files.inputs.read_inputs` with this run's flags)."""

from __future__ import annotations

import argparse
import sys

from .arg_types import positive_int

INPUT_HELP = ("documents: folders and files of PDF, HTML, Word (.docx), Markdown or text (one document each), or "
              "documents as .jsonl/.jsonl.gz (fields as named), .tsv (id<TAB>text), .txt (one per line) or .parquet")


class InputPaths(tuple):
    """Several inputs, named in messages as one comma-separated list."""

    def __str__(self) -> str:
        return ", ".join(str(p) for p in self)


class _Inputs(argparse.Action):
    """One input stays a plain path (what every single-file path of hmde takes); several are :class:`InputPaths`."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values[0] if len(values) == 1 else InputPaths(values))


def add_input_arguments(p, name: str = "input", several: bool = True, help_more: str = "") -> None:
    p.add_argument(name, metavar=name.upper(), nargs="+" if several else None,
                   action=_Inputs if several else "store", help=INPUT_HELP + help_more)
    add_reading_arguments(p)


def add_reading_arguments(p) -> None:
    p.add_argument("--on-error", choices=["stop", "skip"], default="stop",
                   help="a file that cannot be read (encrypted, damaged, empty, a scan without text, binary, too "
                   "large): stop before anything is written (default), or skip it and list it at the end")
    p.add_argument("--txt", choices=["lines", "document"], default="lines",
                   help="a .txt file named as INPUT: one document per line (default), or one document; a folder's "
                   ".txt files are one document each")
    p.add_argument("--max-file-mb", type=positive_int, default=256, help="files larger than this are refused (MiB)")


def reading_options(args, keep_fields=()):
    from ..files.inputs import ReadOptions

    return ReadOptions(getattr(args, "text_field", "text"), getattr(args, "id_field", "doc_id"),
                       (getattr(args, "lang_field", "lang") or None), keep_fields, getattr(args, "txt", "lines"),
                       getattr(args, "on_error", "stop"), getattr(args, "max_file_mb", 256) * 2**20,
                       keep_text=True)  # read twice: checked before the model loads, then embedded


def read_input(args, keep_fields=(), inputs=None, progress: bool = False):
    """The documents of ``inputs`` (default: INPUT) read with this run's flags. The first read of a run keeps its
    report (``args.read_report``: what was skipped and left out, said by :func:`say_report`); ``progress`` shows the
    document files read (and their pages) on stderr."""
    from ..files.inputs import ReadReport, read_inputs

    report = ReadReport()
    if getattr(args, "read_report", None) is None:
        args.read_report = report
    bar = []  # made at the first document file read: structured files show no files bar
    shown = progress and not getattr(args, "no_progress", False)

    def moved(name: str, pages: int) -> None:
        if not bar:
            from tqdm.auto import tqdm

            bar.append(tqdm(desc="files read", unit="file", file=sys.stderr, leave=False))
        bar[0].update(1)
        if report.pages:
            bar[0].set_postfix(pages=report.pages)

    try:
        yield from read_inputs(args.input if inputs is None else inputs, reading_options(args, keep_fields), report,
                               moved if shown else None)
    finally:
        for b in bar:
            b.close()


def say_report(args) -> None:
    """What the run's read passed over or read as lines, one line each on stderr."""
    report = getattr(args, "read_report", None)
    for line in (report.lines() if report is not None else ()):
        print(f"hmde: {line}", file=sys.stderr)
