"""Every training document segmented and tokenised once, cached beside the pairs file.

Why: ``hmde train`` used to split each document into sentences and tokenise them inside
every step that drew it, on the process that also runs the model. On a GPU that CPU work
is what the step waits for. Here it is done once per pairs file, tokenizer and
segmentation settings, written to ``PAIRS.units-<key>.parquet`` and reused by every epoch,
every resume and every process of a multi-process run (a file lock lets one of them build
it while the others wait). Token ids are the ones the step would have made, so training is
unchanged bit for bit (tested).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from ..ground.atomic import atomic_path
from ..errors import InputError
from .pairs import documents_path

FORMAT = "hmde-units/1"


@dataclass
class PreparedUnits:
    """``units[doc_id]``: the document's training units; ``ids[doc_id]``: their token ids."""

    units: dict[str, list[str]]
    ids: dict[str, list[list[int]]]
    path: Path | None = None
    built: bool = False  # False: read from an existing cache file


def _tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        text = backend.to_str()
    else:  # a slow tokenizer: its vocabulary and class stand for it
        text = type(tokenizer).__name__ + json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(docs_file: Path, tokenizer, config, limit: int, presplit: bool, prompt: str = "") -> str:
    """What the units depend on: the documents file, the tokenizer, the sentences' prompt, the
    segmentation settings and the crop."""
    from ..evaluation.provenance import file_sha256

    settings = {"format": FORMAT, "docs": file_sha256(docs_file), "tokenizer": _tokenizer_fingerprint(tokenizer),
                "segmentation": config.segmentation, "max_sentence_tokens": config.max_sentence_tokens,
                "long_sentences": config.long_sentences, "default_language": config.default_language,
                "limit": limit, "presplit": presplit}
    if prompt:  # only encoders with a document prompt (e5), so that earlier keys stay valid
        # "ids": caches of this key written before the prompt reached the ids (they held the bare sentence's)
        settings["prompt"], settings["ids"] = prompt, "prompted"
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def cache_path(pairs_path: str | Path, key: str) -> Path:
    pairs_path = Path(pairs_path)
    return pairs_path.with_name(f"{pairs_path.name[: -len('.parquet')]}.units-{key}.parquet")


def prepare_units(pairs_path: str | Path, docs: dict, model, limit: int, presplit: bool = False,
                  show_progress: bool = True) -> PreparedUnits:
    """Load or build the units of every document in ``docs`` (``doc_id -> (text, lang)``).

    ``limit``: a document's first ``limit`` units (0: all). Builders are serialised by a
    lock file beside the cache; a finished cache is only ever read."""
    from filelock import FileLock

    pairs_path = Path(pairs_path)
    docs_file = documents_path(pairs_path)
    path = cache_path(pairs_path, cache_key(docs_file, model.lower.tokenizer, model.config, limit, presplit,
                                             model.lower.document_prompt))
    with FileLock(str(path) + ".lock"):
        if path.exists():
            prepared = read_units(path)
            missing = [d for d in docs if d not in prepared.units]
            if not missing:
                return prepared
        prepared = build_units(docs, model, limit, show_progress)
        write_units(path, prepared)
        prepared.path, prepared.built = path, True
        return prepared


def build_units(docs: dict, model, limit: int, show_progress: bool = True) -> PreparedUnits:
    units, ids = {}, {}
    lower = model.lower
    for doc_id, (text, lang) in tqdm(docs.items(), desc="segmenting", unit="doc", disable=not show_progress):
        found: list = []
        u = model.segment(text, lang, ids_out=found)
        u, found = (u[:limit], found[:limit]) if limit else (u, found)
        todo = [k for k, i in enumerate(found) if i is None or len(i) > lower.max_tokens]
        for k, i in zip(todo, lower.token_ids([u[k] for k in todo])):
            found[k] = i
        units[doc_id], ids[doc_id] = list(u), [list(map(int, i)) for i in found]
    return PreparedUnits(units, ids)


def write_units(path: Path, prepared: PreparedUnits) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"doc_id": pa.array(list(prepared.units), pa.string()),
                      "units": pa.array(list(prepared.units.values()), pa.list_(pa.string())),
                      "ids": pa.array(list(prepared.ids.values()), pa.list_(pa.list_(pa.int32())))})
    table = table.replace_schema_metadata({"hmde": json.dumps({"format": FORMAT})})
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp))


def read_units(path: Path) -> PreparedUnits:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(str(path))
        meta = json.loads((table.schema.metadata or {}).get(b"hmde", b"{}"))
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"not a readable units cache ({str(exc).splitlines()[0]}); delete it to rebuild",
                         str(path)) from None
    if meta.get("format") != FORMAT:
        raise InputError(f"not a units cache of this hmde version (format {meta.get('format')!r}); delete it to "
                         "rebuild", str(path))
    columns = table.to_pydict()
    return PreparedUnits(dict(zip(columns["doc_id"], columns["units"])), dict(zip(columns["doc_id"], columns["ids"])),
                         path, False)
