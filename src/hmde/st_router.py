"""An hmde model as a sentence-transformers model: a Router with a query and a document route.

Why: pipelines of this field (MTEB, LangChain, LlamaIndex, sentence-transformers' own
evaluators) take a ``SentenceTransformer``. The paper's CLIR protocol is asymmetric
(queries through the lower encoder alone, documents through the whole model), which is
what sentence-transformers' ``Router`` expresses: ``encode_query`` takes the ``query``
route, ``encode_document`` and ``encode`` without a task (the default route) take the
``document`` route.

A saved hmde folder holds, beside hmde's own ``config.json``/``model.safetensors``/``lower/``:

- ``modules.json``: one module, sentence-transformers' ``Router``;
- ``router_config.json``: the ``query`` route is the lower encoder's own modules, read
  from ``lower/`` in place; the ``document`` route is :class:`HmdeDocumentModule`, read
  from the folder root (hmde's ``config.json`` and the upper encoder's weights);
- ``config_sentence_transformers.json``: cosine similarity.

Nothing is stored twice. The document module borrows the query route's modules when the
model is assembled (``on_model_ready``), so the lower encoder's weights are held once.

Loading: :func:`load_sentence_transformer_model` (``hmde.sentence_transformer``) resolves
only hmde's and sentence-transformers' classes and needs no flag. Plain
``SentenceTransformer(DIR)`` works too, with ``trust_remote_code=True``: since
sentence-transformers 6, importing any class outside its own namespace, an installed
package's included and for local folders too, requires that flag.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .encoders.config import HierarchicalConfig
from .encoders.document_encoder import DocumentEncoder
from .errors import HmdeError, ModelLoadError
from .encoders.model_folder import (
    DOCUMENT_MODULE_TYPE,
    LOWER_DIR,
    QUERY_ROUTE,
    ROUTER_CONFIG,
    load_upper_state,
    parse_model_config,
    read_model_config,
    write_upper,
)
from .encoders.sentence_encoder import saved_prompts

try:
    from sentence_transformers.base.modules.input_module import InputModule
    from sentence_transformers.base.modules.router import Router
except ImportError:  # pragma: no cover - sentence-transformers < 6
    from sentence_transformers.models import InputModule, Router



class HmdeDocumentModule(InputModule):
    """The ``document`` route: segmentation, the lower encoder on every sentence, the upper encoder.

    It owns the upper encoder only. The lower encoder is the Router's ``query`` route,
    attached in :meth:`on_model_ready` (or :meth:`attach_lower`), so both routes embed
    sentences with the same modules. ``encode_document(docs, lang="deu")`` sets the
    sentence splitter's language for a call.
    """

    config_file_name = "config.json"  # hmde's own model config: the module reads the hmde folder as saved
    forward_kwargs = {"lang"}
    save_in_root = False

    def __init__(self, config: HierarchicalConfig, hidden_size: int, lower_route: str = QUERY_ROUTE,
                 lower_prompts: dict | None = None):
        super().__init__()
        self.config = config
        self.hidden_size = hidden_size
        self.lower_route = lower_route
        # the lower encoder's prompts and default (e5's passage: for document sentences), which its bare
        # modules in the query route do not carry
        self.lower_prompts = dict(lower_prompts or {})
        self.upper = DocumentEncoder(config, hidden_size)
        object.__setattr__(self, "_hierarchical", None)  # not a submodule: the lower weights belong to the route

    # -- assembly ---------------------------------------------------------------------------
    def on_model_ready(self, model) -> None:
        for module in model.modules():
            if isinstance(module, Router) and any(self is m for mods in module.sub_modules.values() for m in mods):
                if self.lower_route not in module.sub_modules:
                    raise ModelLoadError(f"the Router has no '{self.lower_route}' route for hmde's lower encoder")
                self.attach_lower(list(module.sub_modules[self.lower_route]))
                return

    def attach_lower(self, modules: Sequence[torch.nn.Module]) -> None:
        """Embed sentences with ``modules`` (the lower encoder's sentence-transformers modules)."""
        from sentence_transformers import SentenceTransformer

        from .encoders.hierarchical import HierarchicalEncoder
        from .encoders.sentence_encoder import SentenceEncoder

        device = next((p.device for m in modules for p in m.parameters()), torch.device("cpu"))
        lower = SentenceEncoder(SentenceTransformer(modules=list(modules), device=str(device), **self.lower_prompts),
                                max_tokens=self.config.max_sentence_tokens)
        if lower.dim != self.hidden_size:
            raise ModelLoadError(f"the lower encoder gives {lower.dim}-d vectors, the upper encoder takes {self.hidden_size}")
        hierarchical = HierarchicalEncoder(lower, self.config)
        hierarchical.upper = self.upper  # the module's own weights, not a fresh encoder
        object.__setattr__(self, "_hierarchical", hierarchical)

    @property
    def hierarchical(self):
        """The :class:`~hmde.encoders.hierarchical.HierarchicalEncoder` this route runs (lower modules shared)."""
        if self._hierarchical is None:
            raise HmdeError("hmde's document module has no lower encoder yet: load it as part of a Router "
                            "(hmde.sentence_transformer(DIR)) or call attach_lower")
        return self._hierarchical

    @property
    def tokenizer(self):
        return self.hierarchical.lower.tokenizer if self._hierarchical is not None else None

    # -- sentence-transformers interface ----------------------------------------------------
    def preprocess(self, inputs, prompt: str | None = None, lang: str | None = None, **kwargs) -> dict[str, Any]:
        """Segment each document and tokenize its sentences (the CPU side of a batch)."""
        if lang is not None and not isinstance(lang, str):
            raise HmdeError("lang= takes one language code for the whole call (sentence-transformers reorders "
                            "inputs by length, so a list could not follow them)")
        model = self.hierarchical
        docs = [f"{prompt}{d}" if prompt and isinstance(d, str) else d for d in inputs]
        ids: list[list] = [[] for _ in docs]
        units = [model.segment(d, lang, ids_out=i) for d, i in zip(docs, ids)]
        return {"hmde_units": units, "hmde_unit_ids": ids}

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        encoded = self.hierarchical.encode_units(features["hmde_units"], unit_ids=features["hmde_unit_ids"])
        features["sentence_embedding"] = encoded.documents
        return features

    def get_embedding_dimension(self) -> int:
        return self.hidden_size

    # -- save / load ------------------------------------------------------------------------
    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        write_upper(Path(output_path), self.upper, self.config, self.hidden_size, lower_encoder=None)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> HmdeDocumentModule:
        hub = {"token": token, "cache_folder": cache_folder, "revision": revision, "local_files_only": local_files_only}
        config_path = cls.load_file_path(model_name_or_path, cls.config_file_name, subfolder=subfolder, **hub)
        weights_path = cls.load_file_path(model_name_or_path, "model.safetensors", subfolder=subfolder, **hub)
        if config_path is None or weights_path is None:
            raise ModelLoadError(f"{model_name_or_path}/{subfolder}: no hmde config.json and model.safetensors")
        meta = parse_model_config(Path(config_path))
        lower_dir = "/".join(x for x in (subfolder, meta.get("lower_encoder", LOWER_DIR)) if x)
        prompts_path = cls.load_file_path(model_name_or_path, "config_sentence_transformers.json",
                                          subfolder=lower_dir, **hub)
        module = cls(HierarchicalConfig.from_dict(meta["config"]), int(meta["hidden_size"]),
                     lower_prompts=saved_prompts(Path(prompts_path).parent) if prompts_path else None)
        load_upper_state(module.upper, Path(weights_path))
        return module


def hmde_module_classes() -> dict[str, type]:
    """Every modules.json type hmde provides: resolved here without importing what a folder names."""
    from .encoders.sentence_encoder import hmde_module_classes as lower_classes

    return {**lower_classes(), DOCUMENT_MODULE_TYPE: HmdeDocumentModule}


def load_sentence_transformer_model(name_or_path: str | os.PathLike, device: str | None = None):
    """A saved hmde folder (a bundled name, a folder or a hub id) as a ``SentenceTransformer``.

    Only hmde's classes and sentence-transformers' own are resolved, so no
    ``trust_remote_code`` is needed. A folder saved before hmde wrote the Router files
    is assembled from its parts the same way. Weights stored in half precision are computed in
    float32, as :meth:`HierarchicalEncoder.from_pretrained` computes them.
    """
    from sentence_transformers import SentenceTransformer

    from .encoders.registry import resolve_model_path
    from .encoders.sentence_encoder import load_sentence_transformer

    path = resolve_model_path(str(name_or_path))
    if (path / ROUTER_CONFIG).exists():
        router = Router.load(str(path), module_classes=hmde_module_classes())
    else:  # an hmde folder written before the Router files existed
        meta = read_model_config(path)
        lower = load_sentence_transformer(str(path / meta.get("lower_encoder", LOWER_DIR)))
        router = Router.for_query_document(query_modules=list(lower.children()),
                                           document_modules=[HmdeDocumentModule.load(str(path))])
    router.float()  # integer buffers (USE-m's 8-bit table) stay as they are
    return SentenceTransformer(modules=[router], device=device, similarity_fn_name="cosine")


def document_module(model) -> HmdeDocumentModule:
    """The hmde document module of a ``SentenceTransformer`` built from an hmde folder."""
    for module in model.modules():
        if isinstance(module, HmdeDocumentModule):
            return module
    raise HmdeError("this sentence-transformers model has no hmde document module")
