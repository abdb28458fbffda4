"""Many callers on one index (issue 92): the promises of tests/concurrency_contract.py for hmde.Index and the three
framework stores, over hmde's own files and Milvus."""

from __future__ import annotations

import pytest

from concurrency_contract import ConcurrencyContract, DuplicatePolicyRaces, KilledWriterContract


class TestIndexLocal(ConcurrencyContract, DuplicatePolicyRaces, KilledWriterContract):
    door, store = "index", "local"
    duplicate_error = "DuplicateIds"


class TestIndexMilvus(ConcurrencyContract):
    door, store = "index", "milvus"


class TestLangChainLocal(ConcurrencyContract):
    door, store = "langchain", "local"


class TestLlamaIndexLocal(ConcurrencyContract):
    door, store = "llama_index", "local"


class TestHaystackLocal(ConcurrencyContract, DuplicatePolicyRaces):
    door, store = "haystack", "local"
    duplicate_error = "DuplicateDocumentError"


class TestHaystackMilvus(ConcurrencyContract):
    door, store = "haystack", "milvus"
