"""LangChain's own test suite for vector stores (langchain-tests' ``VectorStoreIntegrationTests``, sync and async)
against :class:`hmde.integrations.langchain.HmdeVectorStore`, over a local index and one whose vectors live in Milvus
(issue 76). The store ranks with hmde-e5, the bundled model, whatever embeddings the suite names."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")
langchain_tests = pytest.importorskip("langchain_tests.integration_tests",
                                      reason="LangChain's suite needs the test extra: pip install 'hmde[test]'")

from hmde.integrations.langchain import HmdeVectorStore  # noqa: E402


class TestHmdeVectorStoreLocal(langchain_tests.VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        store = HmdeVectorStore(index=str(tmp_path / "idx"))  # created empty
        try:
            yield store
        finally:
            store.close()


class TestHmdeVectorStoreMilvus(langchain_tests.VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        pytest.importorskip("milvus_lite", reason="the Milvus store needs the extra: pip install 'hmde[milvus]'")
        store = HmdeVectorStore(index=str(tmp_path / "idx"), store=f"milvus:{tmp_path / 'milvus.db'}")
        try:
            yield store
        finally:
            store.close()
