"""Reading documents and writing vectors, with errors that name file, line and field."""

from .documents import DocumentRecord, read_documents

__all__ = ["DocumentRecord", "read_documents"]
