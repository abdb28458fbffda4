"""Entry point of the ``hmde`` command: argument parsing and error reporting.

Every command module exposes ``register(subparsers)``; errors the user can fix are
:class:`~hmde.errors.HmdeError` and end as one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import threading

from ..version import __version__
from ..errors import HmdeError, Terminated  # noqa: F401 - Terminated: raised below, named here by callers

COMMANDS = ["encode", "build-pairs", "train", "train-sentence-encoder", "eval", "align", "align-sentences", "mine", "index", "classify", "serve", "demo", "recipe", "e5-gpu",
            "longformer", "pseudo-documents", "sentence-queries", "sentence-stage", "export"]


class Parser(argparse.ArgumentParser):
    """hmde's parsers take no abbreviated flags: ``--lang eng`` was silently taken as ``--lang-field``
    where a command had no ``--lang``. Subcommands' parsers are of this class too (argparse makes them of
    their parent's class)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hmde", description="Multilingual long-document embeddings (HMDE, LAWDR, lightweight sentence encoders)."
    )
    parser.add_argument("--version", action="version", version=f"hmde {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import importlib

    for name in COMMANDS:
        importlib.import_module(f"{__package__}.{name.replace('-', '_')}").register(sub)
    # `hmde search` is registered by the index module (it shares its helpers)
    return parser


# write faults a user fixes (permissions, a full or read-only disk): one line naming the file, exit 2
# ELOOP: a path that is a symlink where hmde will not follow one (filelock opens its lock files
# with O_NOFOLLOW) or a symlink loop
USER_FIXABLE_ERRNOS = {errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ELOOP, errno.EIO}


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises :class:`Terminated` (main thread, default handler only)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's own parser that parsed ``args``: ``hmde index build`` -> build's."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name is None or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Flags anywhere among a command's positional values: ``hmde search IDX --json "who won?"`` (argparse
    leaves the values after a flag over when a list positional was already filled, issue 57). What is left over
    goes to the command's one list positional (the queries, the indexes, the files); anything else is refused
    with the command's own usage."""
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    command = chosen_parser(parser, args)
    lists = [a for a in command._actions if not a.option_strings and a.nargs in ("*", "+")
             and not isinstance(a, argparse._SubParsersAction)]
    flags = [x for x in extra if x.startswith("-") and x != "-"]
    if len(lists) == 1 and not flags:
        setattr(args, lists[0].dest, list(getattr(args, lists[0].dest) or []) + extra)
        return args
    command.error(f"unrecognized arguments: {' '.join(flags or extra)}")


def closed_pipe() -> int:
    """The exit of a command whose standard output was closed by its reader: nothing printed, 141 (128 + SIGPIPE,
    what a shell reports for a Unix tool ended by the signal). Standard output is pointed at /dev/null so that the
    interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stdout)
        pass
    return 141


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .common import check_backend_options, pick_device, quiet_libraries

    quiet_libraries()
    try:
        with sigterm_as_interrupt():
            check_backend_options(args)
            if getattr(args, "threads", None):
                from ..encoders.devices import set_threads

                set_threads(args.threads)
            from .preflight import check_outputs_are_not_inputs

            check_outputs_are_not_inputs(args)
            if isinstance(getattr(args, "device", None), str) and args.device not in ("auto", "cpu"):
                pick_device(args.device)  # a device string that cannot be is refused before anything is read
            return int(args.func(args) or 0)
    except HmdeError as exc:
        print(f"hmde: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `hmde index info IDX | head -5`: the reader left; end quietly, as Unix tools do
        return closed_pipe()
    except OSError as exc:
        if exc.errno not in USER_FIXABLE_ERRNOS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"hmde: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Terminated:
        print("hmde: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hmde: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
