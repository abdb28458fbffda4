"""A folder kept in sync with an index (``hmde index sync FOLDER INDEX``, ``Index.sync``): the files added since the
last sync are added, those whose bytes changed (SHA-256) replaced, those gone deleted, in one commit; documents that
did not come from this folder (their ``hmde_folder`` is another, or none) are never touched, and a file whose id such
a document holds is refused, naming both. A sync with nothing to do writes nothing and says so. An interrupted sync
leaves the version before it (the commit is one rename); run again, it plans from that version and does the rest."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HmdeError, InputError
from .folders import folder_files
from .inputs import FOLDER_KEY, ReadOptions, ReadReport, folder_key, read_files
from ..ground.digests import file_sha256


@dataclass
class SyncPlan:
    """What a sync found and did: ids added, replaced (changed files), deleted (removed files), and left as they were."""

    folder: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    report: ReadReport = field(default_factory=ReadReport)

    @property
    def nothing_to_do(self) -> bool:
        return not (self.added or self.changed or self.removed)

    def summary(self, index_path) -> str:
        if self.nothing_to_do:
            return (f"nothing to do: {index_path} holds the {self.unchanged} file(s) of {self.folder} as they are "
                    "(nothing written)")
        return (f"synced {self.folder} into {index_path}: {len(self.added)} added, {len(self.changed)} changed, "
                f"{len(self.removed)} deleted, {self.unchanged} unchanged")


def folder_documents(store, root: Path) -> dict[str, str | None]:
    """The documents of ``store`` (an open version) that came from ``root``: id -> the SHA-256 of the bytes they
    were read from."""
    from ..index.lookup import pages
    from ..index.search_checks import check_filter

    where = f"{FOLDER_KEY} is string and {FOLDER_KEY} == {json.dumps(folder_key(root))}"
    return {d["doc_id"]: (d.get("metadata") or {}).get("sha256")
            for page in pages(store, None, check_filter(store, where)) for d in page}


def plan_sync(store, folder, report: ReadReport | None = None) -> tuple[SyncPlan, list[tuple[Path, str]]]:
    """What a sync of ``folder`` into ``store`` (an open version of the index) would do, and the files it must read
    (no model is needed to know: a sync with nothing to do loads none)."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError("not a folder (index sync keeps a folder's files in an index)", str(folder))
    plan = SyncPlan(str(root), report=report or ReadReport())
    found = folder_files(root)
    plan.report.other_kinds.update(found.other_kinds)
    plan.report.links_out.extend(found.links_out)
    held = folder_documents(store, root)
    on_disk = {rel: path for path, rel in found.files}
    foreign = [rel for rel in on_disk if rel not in held]
    if foreign:
        others = set(store.known_ids(foreign))
        if others:
            first = sorted(others)[0]
            raise HmdeError(f"{store.path} holds a document '{first}' that did not come from {root} "
                            f"({len(others)} such id(s)): a sync never replaces it; rename the file, or delete the "
                            "document first")
    to_read = []
    for rel, path in on_disk.items():
        if rel not in held:
            plan.added.append(rel)
            to_read.append((path, rel))
        elif held[rel] != file_sha256(path):
            plan.changed.append(rel)
            to_read.append((path, rel))
        else:
            plan.unchanged += 1
    plan.removed = sorted(x for x in held if x not in on_disk)
    return plan, to_read


def sync_folder(index, folder, on_error: str = "stop", batch_size: int = 64, progress=None,
                planned: tuple | None = None, options: ReadOptions | None = None) -> SyncPlan:
    """Sync ``folder`` into ``index`` in one commit; returns the plan it carried out. ``progress(file, pages)`` after
    each file read. Files that cannot be read stop the sync before anything is written (``on_error="skip"``: they
    are listed in the plan's report, and a changed one keeps its old version). ``options``: how files are read (the
    command line's flags: the largest file); its ``on_error`` is ``on_error``."""
    import dataclasses

    from ..io.documents import check_unique_ids

    if planned is None:  # planned: plan_sync's answer on the version this index holds (the command line's)
        with index.snapshot() as store:
            planned = plan_sync(store, folder)
    plan, to_read = planned
    if plan.nothing_to_do:
        return plan
    options = dataclasses.replace(options or ReadOptions(), on_error=on_error, keep_text=False)
    records = list(read_files(to_read, options, plan.report, progress, Path(folder)))
    check_unique_ids(records, folder)
    skipped = {rel for rel, _ in plan.report.skipped}
    plan.added = [x for x in plan.added if x not in skipped]
    plan.changed = [x for x in plan.changed if x not in skipped]
    if not plan.nothing_to_do:
        index.write(records, "upsert", batch_size, delete=plan.removed)
    return plan
