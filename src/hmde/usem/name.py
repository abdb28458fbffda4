"""The bundled name of USE-m alone, importable without loading sentence-transformers (the command line's
parser names it)."""

NAME = "use-multilingual-v3"
