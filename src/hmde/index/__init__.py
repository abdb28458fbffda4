"""A searchable document index: FAISS vectors plus an embedded DuckDB store of the documents."""

from .store import DocumentIndex, IndexMeta, SearchHit

__all__ = ["DocumentIndex", "IndexMeta", "SearchHit"]
