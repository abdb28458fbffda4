"""hmde's own store (FAISS + DuckDB) keeps every promise of the store contract (tests/store_contract.py)."""

from __future__ import annotations

from store_contract import StoreContract


class TestLocalStore(StoreContract):
    def store_meta(self, path) -> dict:
        return {}
