"""Errors that hmde reports to users as one clear message instead of a traceback.

The command line catches :class:`HmdeError` and prints its message; library users
catch it to tell bad input apart from programming errors.
"""

from __future__ import annotations


class HmdeError(Exception):
    """A problem the user can fix (bad input, missing model, wrong option)."""


class InputError(HmdeError):
    """Bad input data, located by file, line and field where they are known."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field = path, line, field
        where = ""
        if path is not None:
            where = str(path)
            if line is not None:
                where += f", line {line}"
            if field is not None:
                where += f", field '{field}'"
            where += ": "
        super().__init__(where + message)


class ModelLoadError(HmdeError):
    """A model name or folder that cannot be loaded."""


def exception_line(exc: BaseException) -> str:
    """An exception as one line for a message: its class and its first line (libraries' errors run to many)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def unreachable_model_message(name: str) -> str:
    """The one explanation given whenever a model name is neither local nor downloadable."""
    return (
        f"cannot load '{name}': it is not a local folder or a model bundled with hmde, and the Hugging Face "
        "hub could not be reached (model hubs may be unreachable from this machine). Download the model "
        f"elsewhere (e.g. `huggingface-cli download {name} --local-dir ./model`), copy the folder here "
        "and pass the folder's path."
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM (what timeout, systemd, docker and SLURM send), raised where Ctrl-C would be, so that
    every ``finally`` that removes a temporary runs and the old output stays intact."""
