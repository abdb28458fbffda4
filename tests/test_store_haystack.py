"""Haystack's own test suite for document stores (``DocumentStoreBaseExtendedTests``: count, write with duplicate
policies, delete, every filter it defines, and delete_all, delete_by_filter, update_by_filter) against
:class:`hmde.integrations.haystack.HmdeDocumentStore`, over a local index and one whose vectors live in Milvus
(issue 76)."""

from __future__ import annotations

import pytest

pytest.importorskip("haystack")

from haystack import Document  # noqa: E402
from haystack.testing.document_store import DocumentStoreBaseExtendedTests  # noqa: E402

from hmde.integrations.haystack import HmdeDocumentStore  # noqa: E402


class _Suite(DocumentStoreBaseExtendedTests):
    def test_write_documents(self, document_store):
        """The default policy is FAIL, as in Haystack's in-memory store: a known id is refused, nothing written."""
        from haystack.document_stores.errors import DuplicateDocumentError

        doc = Document(content="test doc", meta={"n": 1})
        assert document_store.write_documents([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([Document(content="another"), doc])
        self.assert_documents_are_equal(document_store.filter_documents(), [doc])


class TestHmdeDocumentStoreLocal(_Suite):
    @pytest.fixture
    def document_store(self, tmp_path):
        store = HmdeDocumentStore(index=str(tmp_path / "idx"))
        yield store
        store.client.close()


class TestHmdeDocumentStoreMilvus(_Suite):
    @pytest.fixture
    def document_store(self, tmp_path):
        pytest.importorskip("milvus_lite", reason="the Milvus store needs the extra: pip install 'hmde[milvus]'")
        store = HmdeDocumentStore(index=str(tmp_path / "idx"), store=f"milvus:{tmp_path / 'milvus.db'}")
        yield store
        store.client.close()
