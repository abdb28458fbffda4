"""The store's own memory of a Milvus index's commits, so that a record behind the store is never trusted.

An index's commit is the swap of its folder's ``index.json`` (:mod:`hmde.index.milvus_write`); Milvus cannot know
which folder names its collections. A copied folder, or an older ``index.json`` put back, named a generation the store
had passed, and the next write through it removed every row of the later generations as a cut-off writer's
leftovers: committed documents deleted (issue 77). So each write also tells the store, in two properties of its
documents collection:

- ``hmde.writing``, before its first row goes in: the generation it writes, its commit id and its folder;
- ``hmde.committed``, right after its folder's swap: the generation and commit id now committed.

:func:`check_current` compares a record with them: a store that has committed a later generation than the folder's
record (or the same generation under another commit) is refused in one line, by searches and writes alike, before
anything is read or deleted. A write whose ``hmde.writing`` was never followed by ``hmde.committed`` was cut off
before or just after its swap: its folder's ``index.json`` tells which (a commit id is written into the record it
commits). Stores written before these properties existed carry none: their records are trusted as before, and their
next write adds the properties.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from ..errors import InputError

COMMITTED = "hmde.committed"
WRITING = "hmde.writing"


def new_commit_id() -> str:
    return uuid.uuid4().hex


def _properties(client, collection: str) -> dict:
    return client.describe_collection(collection).get("properties") or {}


def _marker(properties: dict, key: str) -> dict | None:
    try:
        value = json.loads(properties.get(key) or "null")
    except (TypeError, ValueError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("generation"), int):
        return None
    return value


def _set(client, collection: str, key: str, value: dict) -> None:
    client.alter_collection_properties(collection, properties={key: json.dumps(value, sort_keys=True)})


def mark_writing(client, collection: str, folder: Path, generation: int, commit_id: str) -> None:
    """Before a write's first row: which generation it writes, and from which folder."""
    _set(client, collection, WRITING, {"generation": generation, "commit": commit_id, "folder": str(folder)})


def mark_committed(client, collection: str, folder: Path, generation: int, commit_id: str) -> None:
    """Right after a write's swap: its generation is the store's committed one."""
    _set(client, collection, COMMITTED, {"generation": generation, "commit": commit_id, "folder": str(folder)})


def _record_of(folder: str) -> dict:
    try:
        raw = json.loads((Path(folder) / "index.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def committed_marker(client, collection: str) -> tuple[dict | None, dict | None]:
    """The store's last committed write and, where a write went in after it, that write (committed or not)."""
    properties = _properties(client, collection)
    committed, writing = _marker(properties, COMMITTED), _marker(properties, WRITING)
    if writing is not None and (committed is None or writing["generation"] > committed["generation"]):
        if _record_of(writing.get("folder", "")).get("commit_id") == writing.get("commit"):
            return writing, None  # cut off between its swap and its mark: committed all the same
        return committed, writing
    return committed, None


def check_current(client, collection: str, folder: Path, generation: int, commit_id: str, uri: str) -> dict | None:
    """Refuse a record (``folder``'s ``index.json``: ``generation``, ``commit_id``) that is behind the store.

    A reader's snapshot may lag a writer that swapped in a newer record since: the record on disk is what is
    compared. Returns the uncommitted write after the last commit, if any (the caller's leftovers)."""
    committed, pending = committed_marker(client, collection)
    if committed is None:
        return pending
    on_disk = _record_of(str(folder))
    if isinstance(on_disk.get("generation"), int) and on_disk["generation"] > generation:
        generation, commit_id = on_disk["generation"], on_disk.get("commit_id", "")
    behind = committed["generation"] > generation or (
        committed["generation"] == generation and commit_id and committed.get("commit") != commit_id)
    if behind:
        writer = committed.get("folder") or "another folder"
        raise InputError(
            f"this record is behind the Milvus store {uri}: it names generation {generation}, and the store has "
            f"committed generation {committed['generation']} since, through {writer} (this folder is a copy, or an "
            "older index.json was put back); hmde neither searches nor writes through it (a write would delete "
            f"committed documents): use {writer}, or build this index anew with --overwrite",
            str(Path(folder) / "index.json"))
    return pending
