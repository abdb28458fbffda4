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


@pytest.mark.parametrize("name", ["HmdeTextEmbedder", "HmdeDocumentEmbedder"])
def test_the_embedders_round_trip_through_a_pipeline_file_and_refuse_a_plain_key(name, monkeypatch):
    """Both embedders serialise their settings as Haystack's own components do (the key as an environment
    variable's name, never its value), so a pipeline written to YAML loads back with the same settings."""
    from haystack import Pipeline
    from haystack.utils import Secret

    import hmde.integrations.haystack as hs

    monkeypatch.setenv("HMDE_TEST_KEY", "k")
    made = getattr(hs, name)(url="http://127.0.0.1:9", api_key=Secret.from_env_var("HMDE_TEST_KEY"), batch_size=8,
                             threads=2)
    pipeline = Pipeline()
    pipeline.add_component("embed", made)
    text = pipeline.dumps()
    assert "HMDE_TEST_KEY" in text and ": k\n" not in text
    back = Pipeline.loads(text, allowed_modules=["hmde.integrations.haystack"]).get_component("embed")
    assert type(back) is type(made) and back.to_dict() == made.to_dict()
    assert (back.url, back.batch_size, back.threads, back.device) == ("http://127.0.0.1:9", 8, 2, "auto")
    with pytest.raises(ValueError, match="Secret.from_env_var"):
        getattr(hs, name)(url="http://127.0.0.1:9", api_key="k").to_dict()
