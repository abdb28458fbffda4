"""hmde: multilingual long-document embeddings.

The hierarchical document encoder of "A General-Purpose Multilingual Document
Encoder" (HMDE), the LAWDR document vectors and a lightweight cross-lingual sentence
encoder, as a library and a command-line tool.
"""

__version__ = "0.1.0"

from .config import HierarchicalConfig  # noqa: E402
from .errors import HmdeError, InputError, ModelLoadError  # noqa: E402
from .hierarchical import HierarchicalEncoder  # noqa: E402
from .sentence_encoder import SentenceEncoder  # noqa: E402

__all__ = [
    "HierarchicalConfig",
    "HierarchicalEncoder",
    "SentenceEncoder",
    "HmdeError",
    "InputError",
    "ModelLoadError",
    "__version__",
]
