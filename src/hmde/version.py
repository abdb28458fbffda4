"""hmde's release, in a module of its own so that the package's modules can record it (saved models,
result files) without importing the package's ``__init__``, which imports them (an import circle)."""

__version__ = "0.1.0"
