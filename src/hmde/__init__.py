"""hmde: multilingual long-document embeddings.

The hierarchical document encoder of "A General-Purpose Multilingual Document
Encoder" (HMDE), the LAWDR document vectors and a lightweight cross-lingual sentence
encoder, as a library and a command-line tool.
"""

from .version import __version__
from .errors import HmdeError, InputError, ModelLoadError  # noqa: E402

# OpenMP's and OpenBLAS's idle threads sleep instead of spinning: the same speed on an idle machine, half the time
# on a busy one, a third for a calibrated search on two threads (hmde.ground.idle_threads). Only before the
# libraries load, never over the user's own setting.
from .ground.idle_threads import sleeping_idle_threads  # noqa: E402
from .ground.ast_lock import serialize_ast_parse  # noqa: E402

sleeping_idle_threads()
serialize_ast_parse()  # CPython 3.11-3.12: two threads' ast.parse (numpy's .npy headers) can fail (ground/ast_lock.py)

# The model classes import PyTorch (seconds): they load on first use, so that `hmde --help` and every
# check made before a model loads start at once (PEP 562).
_LAZY = {"HierarchicalConfig": ".encoders.config", "HierarchicalEncoder": ".encoders.hierarchical",
         "SentenceEncoder": ".encoders.sentence_encoder", "Index": ".index.search", "DocumentVectorizer": ".methods.vectorizer",
         "mine": ".align.miner", "MiningOptions": ".align.mining"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hmde' has no attribute {name!r}")


def sentence_transformer(name_or_path, device=None):
    """An hmde model as a ``SentenceTransformer`` (``encode_query``: lower encoder; ``encode_document``
    and ``encode``: HMDE document vectors). No ``trust_remote_code`` needed: see :mod:`hmde.st_router`."""
    from .st_router import load_sentence_transformer_model

    return load_sentence_transformer_model(name_or_path, device=device)


__all__ = [
    "HierarchicalConfig",
    "HierarchicalEncoder",
    "Index",
    "DocumentVectorizer",
    "SentenceEncoder",
    "sentence_transformer",
    "mine",
    "MiningOptions",
    "HmdeError",
    "InputError",
    "ModelLoadError",
    "__version__",
]
