"""Write files so that an interrupted run never leaves a half-written result.

Everything is written to a temporary file in the destination folder and moved into
place with :func:`os.replace`, which is atomic on POSIX and Windows.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def apply_umask(path: Path, directory: bool = False) -> None:
    """Give a temporary file (0600) or folder (0700) the mode any tool would create it with:
    0666 or 0777 less the user's umask, so results are as shareable as the user's other files."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


# what libraries that write files say when the disk is full or a write fails (FAISS, torch's zip writer,
# safetensors, DuckDB...): their exceptions are no OSError, so the CLI would print a traceback
_DISK_FULL = ("no space left", "code: 28", "storagefull", "errno 28", "disk quota")
_WRITE_FAILED = ("file write failed", "write error", "failed writing", "error while serializing", "could not write",
                 "iostream error", "inline_container", "ioerror")


def write_error(exc: BaseException, path: Path) -> OSError | None:
    """The one translation of a failed write into an OSError naming ``path`` (the output being written),
    which the CLI prints as one line; None for an exception that is no write failure."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO) and not exc.filename:
            return OSError(exc.errno, exc.strerror or str(exc), str(path))
        return None
    if not isinstance(exc, Exception) or isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    text = str(exc).lower()
    if any(s in text for s in _DISK_FULL):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    if any(s in text for s in _WRITE_FAILED):
        first = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
        return OSError(errno.EIO, f"the write failed ({first}); is the disk full?", str(path))
    return None


@contextlib.contextmanager
def write_errors_named(path: str | os.PathLike) -> Iterator[None]:
    """Within the block, a failed write (a full disk, above all) raises an OSError naming ``path``."""
    try:
        yield
    except BaseException as exc:
        translated = write_error(exc, Path(path))
        if translated is None:
            raise
        raise translated from exc


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``. A write that fails
    inside (a full disk) is an OSError naming ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with write_errors_named(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    apply_umask(tmp_path)
    try:
        with write_errors_named(path):
            yield tmp_path
        apply_umask(tmp_path)  # again: writers that replace the file they are given (safetensors) make it 0600
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def save_npy_atomic(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:  # a file object: np.save would add ".npy" to a name
        np.save(f, array)


def through_links(path: str | os.PathLike) -> Path:
    """The folder a path names, through symbolic links: a new folder swapped in for a link would replace the
    link and leave the folder it points to as it was (``--add`` through ``IDX -> /data/idx``)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, lock: bool = True) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path``.

    An existing folder at ``path`` is moved aside first and removed only after the
    new one is in place, so a crash leaves either the old or the new folder. The
    writer lock of ``path`` is held throughout (one writer at a time; temporaries of
    killed writers are removed) and readers are held off during the two renames
    (:mod:`hmde.ground.locks`). ``lock=False`` is for a part of a folder that is itself
    written atomically (``lower/`` of a saved model), where lock files would be litter.
    """
    from .locks import exclusive_writer, swapping

    path = through_links(path)
    with exclusive_writer(path) if lock else contextlib.nullcontext():
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        apply_umask(tmp, directory=True)
        try:
            with write_errors_named(path):
                yield tmp
            for entry in tmp.rglob("*"):  # what hmde's writers made inside: safetensors leaves its files 0600
                if not entry.is_symlink() and (entry.stat().st_mode & 0o777) == (0o700 if entry.is_dir() else 0o600):
                    apply_umask(entry, directory=entry.is_dir())
            old = None
            with swapping(path) if lock else contextlib.nullcontext():
                if path.is_dir() and not path.is_symlink() and exchange(tmp, path):
                    old = tmp  # one rename swapped the two: a kill at any moment leaves one version at ``path``
                else:
                    if path.exists():
                        old = path.with_name(f".{path.name}.old.{os.getpid()}")
                        os.replace(path, old)
                    os.replace(tmp, path)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two folders in one atomic rename (Linux's ``renameat2(RENAME_EXCHANGE)``), so that ``b`` is never
    missing, not even for a moment: two renames (``b`` aside, ``a`` in) leave no ``b`` to a process killed
    between them. False, and nothing done, where the system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library without it (glibc < 2.28, musl before 1.2.4)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


def carry_foreign_entries(old: str | os.PathLike, new: str | os.PathLike, own: set[str]) -> list[str]:
    """Copy into ``new`` every entry of the folder ``old`` that hmde did not write (not in ``own``),
    before ``new`` replaces ``old``: a user's notes in an index folder survive ``--add`` and
    ``--overwrite``. Copied, not moved, so a failed swap still leaves them in ``old``."""
    old, new = Path(old), Path(new)
    if not old.is_dir():
        return []
    carried = []
    for entry in sorted(old.iterdir()):
        if entry.name in own or (new / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, new / entry.name, follow_symlinks=False)
        carried.append(entry.name)
    return carried
