"""Encode sharded collections with Ray Data: a pool of model actors, Parquet shards out.

Why Ray Data: it streams blocks between a read stage, a pool of actors that hold the
model (one per GPU, or CPU actors) and a Parquet writer, with backpressure, so memory
stays flat however many shards there are, and the same code runs on a laptop
(``ray.init()`` in-process) or a cluster (``--ray-address``). Ray restarts an actor
that dies and retries its batch; the output is then checked, per shard, to hold every
input row exactly once.

Layout of OUTPUT_DIR::

    manifest.json          settings (model hash, method...) and the finished shards
    part-00000.parquet     doc_id (string), vector (fixed-size list of float32), one file
    part-00001.parquet     per input shard, rows in the input order (with ``keep_text``
                           also lang and text: what ``hmde index build --engine ray`` stores)
    _staging/              Ray's raw output of the wave in progress (removed after it)
    _expected/             per input shard of the wave, the ids its read task saw

The work goes in waves of a few input shards; after each wave its shards are checked,
sorted into input order, written atomically and entered in the manifest, so a rerun
(after a crash, a pre-emption or an added shard) skips every finished shard. Documents
are parsed by hmde's own reader inside Ray, so the vectors equal those of the
single-process ``hmde encode`` and bad input gets the same file-and-line message.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from ..ground.atomic import atomic_path, write_text_atomic
from ..ground.cache import cache_root
from ..errors import HmdeError, InputError

MANIFEST = "manifest.json"
FORMAT = "hmde-vectors/1"
SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".parquet")


QUERIES = "query"  # EncodeSpec.method of a run that embeds queries, not documents


@dataclass
class EncodeSpec:
    """Everything that decides the vectors; a rerun must match it to reuse finished shards."""

    model: str
    model_sha256: str | None
    method: str  # a document method's name, or QUERIES (the lower encoder alone)
    text_field: str = "text"
    id_field: str = "doc_id"
    lang_field: str | None = "lang"
    lang: str | None = None
    batch_size: int = 32
    sentence_batch_size: int | None = None  # None: the device's default
    normalize: bool = False
    bf16: bool = False
    lawdr_stats: str | None = None
    keep_text: bool = False  # output shards also hold each document's language and text
    sentences: bool = False  # ... and its sentences, their spans and vectors (hmde.io.representation_parquet)
    lengths: dict = field(default_factory=dict)  # document-length settings (hmde.encoders.length_settings)

    def fingerprint(self) -> dict:
        keep = ("model_sha256", "method", "text_field", "id_field", "lang_field", "lang", "normalize", "lawdr_stats",
                "keep_text", "sentences", "lengths")
        return {k: v for k, v in asdict(self).items() if k in keep}


def input_shards(inputs: Sequence[str | Path]) -> list[Path]:
    """Input files, or every .jsonl/.jsonl.gz/.parquet file inside given folders, sorted."""
    shards: list[Path] = []
    for item in inputs:
        item = Path(item)
        if item.is_dir():
            shards += sorted(p for p in item.rglob("*") if p.is_file() and p.name.lower().endswith(SHARD_SUFFIXES))
        elif item.exists():
            shards.append(item)
        else:
            raise InputError("file not found", path=str(item))
    if not shards:
        raise InputError("no .jsonl, .jsonl.gz or .parquet shards found", path=", ".join(map(str, inputs)))
    return shards


def _shard_key(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class Manifest:
    """``manifest.json``: the settings and, per input shard, its output file and row count."""

    def __init__(self, folder: Path, spec: EncodeSpec):
        self.folder, self.path = folder, folder / MANIFEST
        self.data = {"format": FORMAT, "model": spec.model, "settings": spec.fingerprint(), "dim": None, "shards": {}}
        if self.path.exists():
            old = json.loads(self.path.read_text(encoding="utf-8"))
            if old.get("format") != FORMAT:
                raise InputError(f"not an hmde vectors folder (format {old.get('format')!r})", path=str(self.path))
            settings = {"keep_text": False, "lengths": {}, **old["settings"]}  # keys added later default as before
            if settings != spec.fingerprint():
                changed = sorted(k for k in spec.fingerprint() if settings.get(k) != spec.fingerprint()[k])
                raise HmdeError(f"{folder} holds vectors made with other settings ({', '.join(changed)}); "
                                "choose another output folder or delete it")
            self.data = old

    def done(self, shard: Path) -> bool:
        entry = self.data["shards"].get(str(shard))
        return bool(entry) and entry["input"] == _shard_key(shard) and (self.folder / entry["output"]).exists()

    def output_name(self, shard: Path) -> str:
        entry = self.data["shards"].get(str(shard))
        if entry:
            return entry["output"]
        used = {e["output"] for e in self.data["shards"].values()}
        i = len(self.data["shards"])
        while f"part-{i:05d}.parquet" in used:
            i += 1
        return f"part-{i:05d}.parquet"

    def record(self, shard: Path, output: str, rows: int, dim: int) -> None:
        self.data["dim"] = dim
        self.data["shards"][str(shard)] = {"output": output, "rows": rows, "input": _shard_key(shard)}
        write_text_atomic(self.path, json.dumps(self.data, indent=2) + "\n")


def read_shard_documents(shard_index: int, path: str, spec: EncodeSpec, expected_dir: str) -> list[dict]:
    """One input shard as rows for Ray (text JSON-encoded: a string or a list of sentences).

    The ids read are also written to ``expected_dir`` so that the driver checks the
    encoded shard against them without parsing the input a second time.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io.documents import read_documents

    rows = [{"shard": shard_index, "row": i, "doc_id": r.doc_id, "text": json.dumps(r.text, ensure_ascii=False),
             "lang": spec.lang or r.lang or ""}
            for i, r in enumerate(read_documents(path, spec.text_field, spec.id_field, spec.lang_field))]
    with atomic_path(Path(expected_dir) / f"shard-{shard_index}.parquet") as tmp:  # a retried read rewrites it
        pq.write_table(pa.table({"doc_id": pa.array([r["doc_id"] for r in rows], pa.string())}), tmp)
    return rows


class RayEncoder:
    """The model actor: loaded once per actor, then called on batches of rows (pyarrow tables)."""

    def __init__(self, spec: dict, device: str, threads: int, cache: str | None = None):
        import torch

        from ..encoders.model_loading import load_model

        if cache and not os.environ.get("HMDE_CACHE"):
            # the driver's cache folder (hmde.ground.cache), where a model derived from an installed package (the
            # wheel-based lower encoder of hmde-e5) is already built: an actor whose environment names no
            # cache of its own (Ray workers keep the environment of ray.init, not the driver's later one)
            # would otherwise build a second copy under ~/.cache
            os.environ["HMDE_CACHE"] = cache
        torch.set_num_threads(max(1, threads))
        self.spec = EncodeSpec(**spec)
        self.kind, self.model = load_model(self.spec.model, device)
        if self.spec.lengths:
            from ..encoders.length_settings import apply_length_overrides

            apply_length_overrides(self.model, self.spec.lengths)
        self.vectorizer = None
        if self.spec.method != QUERIES:
            from ..methods.lawdr_statistics import LawdrStats
            from ..methods.vectorizer import DocumentVectorizer, MethodOptions

            stats = LawdrStats.load(self.spec.lawdr_stats) if self.spec.lawdr_stats else None
            options = MethodOptions(batch_size=self.spec.batch_size, sentence_batch_size=self.spec.sentence_batch_size,
                                    autocast_dtype=self._amp(), show_progress_bar=False)
            self.vectorizer = DocumentVectorizer(self.model, self.spec.method, options, stats)

    def _amp(self):
        import torch

        return torch.bfloat16 if self.spec.bf16 else None

    def encode(self, texts: list, langs: list) -> np.ndarray:
        s = self.spec
        if self.vectorizer is None:  # queries: the lower encoder alone
            from ..methods.vectorizer import encode_query_texts

            return encode_query_texts(self.model, texts, batch_size=s.sentence_batch_size,
                                      normalize_embeddings=s.normalize, autocast_dtype=self._amp())
        return self.vectorizer.encode(texts, langs, normalize_embeddings=s.normalize)

    def __call__(self, batch):
        import pyarrow as pa

        from ..methods.vectorizer import flat_text

        texts = [json.loads(t) for t in batch.column("text").to_pylist()]
        langs = [lang or None for lang in batch.column("lang").to_pylist()]
        if self.spec.sentences:  # the whole representation, as `hmde encode -o OUT.parquet` writes it
            from ..io.representation_parquet import representation_columns

            vectors, units, sentence_vectors = self.vectorizer.encode_with_sentences(texts, langs)
            vectors = np.asarray(vectors, np.float32)
            return pa.table({"shard": batch.column("shard"), "row": batch.column("row"), **representation_columns(
                batch.column("doc_id").to_pylist(), langs, [flat_text(t) for t in texts], vectors, units,
                sentence_vectors, vectors.shape[1])})
        vectors = np.ascontiguousarray(self.encode(texts, langs), dtype=np.float32)
        flat = pa.array(vectors.reshape(-1), type=pa.float32())
        columns = {"shard": batch.column("shard"), "row": batch.column("row"), "doc_id": batch.column("doc_id"),
                   "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])}
        if self.spec.keep_text:
            columns["lang"] = pa.array(langs, pa.string())
            columns["text"] = pa.array([flat_text(t) for t in texts], pa.string())
        return pa.table(columns)


@dataclass
class RayOptions:
    address: str | None = None  # None: a local Ray in this process (or the one already running)
    actors: int | None = None  # default: one per GPU with device cuda, else CPUs // cpus_per_actor
    cpus_per_actor: float = 1.0
    gpus_per_actor: float = 0.0
    batch_rows: int = 256  # documents per actor call
    shards_per_wave: int = 8
    encoder_class: type = RayEncoder  # the actor class (tests put a failing one here)


def _start_ray(address: str | None):
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the install
        raise HmdeError("--engine ray needs Ray Data: pip install 'hmde[ray]'") from e
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                 logging_level="ERROR")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    return ray


def encode_with_ray(spec: EncodeSpec, inputs: Sequence[str | Path], output_dir: str | Path, device: str = "cpu",
                    options: RayOptions | None = None, show_progress: bool = True) -> Manifest:
    """Encode every shard of ``inputs`` not already finished in ``output_dir``; returns the manifest."""
    from tqdm.auto import tqdm

    options = options or RayOptions()
    output_dir = Path(output_dir)
    shards = input_shards(inputs)
    output_dir.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(output_dir, spec)
    pending = [s for s in shards if not manifest.done(s)]
    if not pending:
        return manifest
    ray = _start_ray(options.address)
    gpus = options.gpus_per_actor or (1.0 if device.startswith("cuda") else 0.0)
    actors = options.actors
    if not actors:  # fill the cluster: one actor per GPU share, else per CPU share
        resources = ray.cluster_resources()
        if gpus:
            actors = int(resources.get("GPU", 0) // gpus)
        else:
            actors = int(resources.get("CPU", 1) // max(options.cpus_per_actor, 1.0))
        actors = max(1, actors)
    spec_dict = asdict(spec)
    bar = tqdm(total=len(pending), desc="shards", unit="shard", disable=not show_progress)
    for start in range(0, len(pending), options.shards_per_wave):
        wave = pending[start : start + options.shards_per_wave]
        staging, expected = output_dir / "_staging", output_dir / "_expected"
        for folder in (staging, expected):
            shutil.rmtree(folder, ignore_errors=True)
        expected.mkdir()
        # one block per shard: the shards of a wave are read by parallel tasks, not one after another
        ds = ray.data.from_items([{"shard": i, "path": str(p)} for i, p in enumerate(wave)],
                                 override_num_blocks=len(wave))
        # reading and writing reserve no CPU: the actors may hold every CPU (the default fills the
        # machine), and a read task waiting for a CPU they hold would wait for ever
        ds = ds.flat_map(lambda item: read_shard_documents(item["shard"], item["path"], EncodeSpec(**spec_dict),
                                                           str(expected)), num_cpus=0)
        # Ray Data starts pool actors with max_restarts=-1 and max_task_retries=-1: a dead actor is
        # restarted and its batch retried (the actor-kill test relies on it)
        ds = ds.map_batches(options.encoder_class, fn_constructor_kwargs={
            "spec": spec_dict, "device": device, "threads": int(max(1, options.cpus_per_actor)),
            "cache": str(cache_root())},
            batch_size=options.batch_rows, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=options.cpus_per_actor, num_gpus=gpus)
        try:
            ds.write_parquet(str(staging), ray_remote_args={"num_cpus": 0})
        except Exception as e:  # noqa: BLE001 - surface hmde's own message (bad input) from inside Ray
            raise _hmde_cause(e) or e
        for i, shard in enumerate(wave):
            name = manifest.output_name(shard)
            rows, dim = _finish_shard(staging, expected / f"shard-{i}.parquet", i, shard, output_dir / name,
                                      lambda dim: representation_info(spec, dim))
            manifest.record(shard, name, rows, dim)
            bar.update(1)
        for folder in (staging, expected):
            shutil.rmtree(folder, ignore_errors=True)
    bar.close()
    return manifest


def _hmde_cause(error: BaseException) -> HmdeError | None:
    """hmde's own error (e.g. a file-and-line input error) raised inside a Ray task, if that was the cause.

    Ray Data re-raises user errors as ``UserCodeException`` whose only trace of the original is
    the formatted traceback in the message, so the last ``hmde.errors.X: message`` line is read
    from there and raised again as that class.
    """
    import re

    from .. import errors

    text = ""
    while error is not None:
        if isinstance(error, HmdeError) and type(error).__module__.startswith("hmde"):
            return error
        text += "\n" + str(error)
        error = getattr(error, "cause", None) or error.__cause__
    found = re.findall(r"hmde\.errors\.(\w+): (.+)", text)
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(errors, name, HmdeError)
    clean = HmdeError.__new__(cls if isinstance(cls, type) and issubclass(cls, HmdeError) else HmdeError)
    Exception.__init__(clean, message.strip())
    return clean


def _finish_shard(staging: Path, expected_ids: Path, index: int, shard: Path, target: Path,
                  info: Callable[[int], object]) -> tuple[int, int]:
    """Check that Ray's output holds each input row exactly once, then write the shard in input order.

    The input's ids come from the read stage (``expected_ids``), so the driver never parses
    the input itself: at scale that serial parse would rival the cluster's work.
    """
    import pyarrow.dataset as pds
    import pyarrow.parquet as pq

    if not expected_ids.exists():
        raise HmdeError(f"{shard}: the read stage left no ids ({expected_ids}); rerun the encoding")
    expected = pq.read_table(expected_ids).column("doc_id").to_pylist()
    table = pds.dataset(str(staging), format="parquet").to_table(filter=pds.field("shard") == index)
    table = table.sort_by("row")
    rows = table.column("row").to_numpy()
    if len(rows) != len(expected) or not np.array_equal(rows, np.arange(len(expected))):
        seen, dup = np.unique(rows, return_counts=True)
        raise HmdeError(f"{shard}: Ray returned {len(rows)} rows for {len(expected)} documents "
                        f"({int((dup > 1).sum())} duplicated, {len(expected) - len(seen)} missing)")
    if table.column("doc_id").to_pylist() != expected:
        raise HmdeError(f"{shard}: the ids Ray returned differ from the input's")
    if "sentence_vectors" in table.column_names:  # the whole representation: a file `index build` also reads alone
        from ..io.representation_parquet import COLUMNS, METADATA, schema

        out = table.select(list(COLUMNS) + [METADATA])  # the Ray engine keeps no metadata yet: the column is null
        dim = out.schema.field("vector").type.list_size
        out = out.cast(schema(dim, info(dim)))
    else:
        out = table.select([c for c in ("doc_id", "vector", "lang", "text") if c in table.column_names])
        dim = out.schema.field("vector").type.list_size
    with atomic_path(target) as tmp:
        pq.write_table(out, tmp)
    return len(expected), dim


def representation_info(spec: EncodeSpec, dim: int):
    """What a whole-representation shard records in its schema (:mod:`hmde.io.representation_parquet`)."""
    from ..io.representation_parquet import RepresentationInfo

    return RepresentationInfo(spec.model, spec.model_sha256, spec.method, dim)


def iter_shard_tables(output_dir: str | Path, shards: Sequence[str | Path] | None = None):
    """(input shard, pyarrow table) for each finished shard: in manifest order, or in the order of ``shards``."""
    import pyarrow.parquet as pq

    output_dir = Path(output_dir)
    path = output_dir / MANIFEST
    if not path.exists():
        raise InputError("no manifest.json: not a folder written by `hmde encode --engine ray`", path=str(output_dir))
    entries = json.loads(path.read_text(encoding="utf-8"))["shards"]
    order = [str(s) for s in shards] if shards is not None else list(entries)
    missing = [s for s in order if s not in entries]
    if missing:
        raise HmdeError(f"{output_dir}: shard {missing[0]} is not finished; rerun the encoding")
    for shard in order:
        yield shard, pq.read_table(output_dir / entries[shard]["output"])


def table_vectors(table) -> np.ndarray:
    """The ``vector`` column of a shard table as a float32 (rows, dim) array."""
    return table.column("vector").combine_chunks().flatten().to_numpy().reshape(len(table), -1).astype(
        np.float32, copy=False)


def iter_vector_shards(output_dir: str | Path) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """(input shard, ids, float32 vectors) for each finished shard, in manifest order."""
    for shard, table in iter_shard_tables(output_dir):
        yield shard, table.column("doc_id").to_pylist(), table_vectors(table)


def read_vectors(output_dir: str | Path, shards: Sequence[str | Path] | None = None) -> tuple[list[str], np.ndarray]:
    """All ids and vectors of a Ray output folder; with ``shards``, in that order of input shards."""
    ids: list[str] = []
    parts = []
    for _, table in iter_shard_tables(output_dir, shards):
        ids += table.column("doc_id").to_pylist()
        parts.append(table_vectors(table))
    return ids, np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
