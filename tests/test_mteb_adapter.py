"""The MTEB adapter routes queries to the lower encoder and documents to the hierarchical model."""

import enum

import numpy as np

from hmde import HierarchicalEncoder
from hmde.evaluation.mteb_adapter import MtebEncoder


class PromptType(str, enum.Enum):  # MTEB's own enum has these values
    query = "query"
    document = "document"


def test_queries_and_documents_take_their_protocol_paths(hmde_dir):
    model = HierarchicalEncoder.from_pretrained(hmde_dir)
    adapter = MtebEncoder(model)
    docs = ["The cat sat. It slept.", "Economic growth slowed."]
    q = adapter.encode(docs, prompt_type=PromptType.query)
    d = adapter.encode(docs, prompt_type=PromptType.document)
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(q, unit(model.encode_queries(docs)), atol=1e-5)
    np.testing.assert_allclose(d, unit(model.encode_documents(docs)), atol=1e-5)
    corpus = [{"title": "Cats", "text": "The cat sat."}]
    np.testing.assert_allclose(adapter.encode_corpus(corpus), unit(model.encode_documents(["Cats The cat sat."])), atol=1e-5)
    batched = adapter.encode([{"text": ["The cat sat.", "Economic growth slowed."]}])  # MTEB 2 batches
    np.testing.assert_allclose(batched, unit(model.encode_documents(["The cat sat.", "Economic growth slowed."])), atol=1e-5)
