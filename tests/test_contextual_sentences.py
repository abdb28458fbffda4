"""Contextualised sentence vectors (encode_documents(output="sentences")) and multi-vector scoring."""

import json

import numpy as np
import pytest
import torch

from hmde import HierarchicalConfig, HierarchicalEncoder, HmdeError
from hmde.cli.main import main
from hmde.index.multivector import SentenceMatrix, aggregate, score_documents

LONG = [f"Sentence {i} of a long report on exports." for i in range(70)]  # three windows of 32
DOCS = [
    "The cat sat on the mat. It was a sunny day in the old town.",
    " ".join(LONG),
    "",
    ["Already split.", "Into two sentences."],
]


@pytest.fixture(scope="module", params=[False, True], ids=["paper", "residual"])
def model(request, labse_dir):
    torch.manual_seed(0)
    config = HierarchicalConfig(residual_sentences=request.param)
    m = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), config=config, device="cpu")
    if request.param:
        with torch.no_grad():
            m.upper.gate.fill_(0.3)  # a trained gate is not 0: the context term must show
    return m.eval()


def test_the_document_vector_is_the_mean_of_its_contextualised_sentences(model):
    documents = model.encode_documents(DOCS)
    sentences = model.encode_documents(DOCS, output="sentences")
    assert [len(s.units) for s in sentences] == [2, 70, 0, 2]
    assert [s.units for s in sentences] == [model.segment(d) for d in DOCS]
    assert sentences[2].vectors.shape == (0, model.dim)
    for doc, s in zip(documents, sentences):
        if len(s.units):  # windows are weighted by their sentence counts: the plain mean over all sentences
            np.testing.assert_allclose(s.vectors.mean(0), doc, atol=1e-5)


def test_context_changes_a_sentence_and_its_window_bounds_the_context(model):
    alone = model.encode_documents(["It was a sunny day in the old town."], output="sentences")[0].vectors[0]
    in_doc = model.encode_documents([DOCS[0]], output="sentences")[0].vectors[1]
    assert np.abs(alone - in_doc).max() > 1e-3  # the same sentence, other neighbours: another vector
    long = model.encode_documents([LONG], output="sentences")[0].vectors
    head = model.encode_documents([LONG[:32]], output="sentences")[0].vectors
    np.testing.assert_allclose(long[:32], head[:32], atol=1e-5)  # the first window sees only its own 32


def test_residual_contextual_vectors_are_the_lower_vectors_plus_the_gated_output(labse_dir):
    config = HierarchicalConfig(residual_sentences=True)
    m = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), config=config, device="cpu").eval()
    sentences = m.encode_documents(DOCS[:1], output="sentences")[0]
    lower = m.lower.encode(sentences.units)
    np.testing.assert_allclose(sentences.vectors, lower, atol=1e-6)  # gate 0: exactly the lower vectors


def test_normalised_and_unknown_output(model):
    s = model.encode_documents(DOCS[:1], output="sentences", normalize_embeddings=True)[0]
    np.testing.assert_allclose(np.linalg.norm(s.vectors, axis=1), 1.0, atol=1e-5)
    with pytest.raises(HmdeError, match="output must be one of"):
        model.encode_documents(DOCS, output="tokens")


def test_aggregation_on_a_hand_checked_case():
    # two documents: rows 0-2 and 3-4; one query
    sims = np.array([[0.1, 0.9, 0.5, 0.7, 0.6]], np.float32)
    starts, counts = np.array([0, 3]), np.array([3, 2])
    np.testing.assert_allclose(aggregate(sims, starts, counts, top=1), [[0.9, 0.7]])
    np.testing.assert_allclose(aggregate(sims, starts, counts, top=2), [[1.4, 1.3]])
    np.testing.assert_allclose(aggregate(sims, starts, counts, top=3), [[1.5, 1.3]])  # the second has only 2


def test_score_documents_mixes_in_the_document_vector():
    e = np.eye(3, dtype=np.float32)
    matrix = SentenceMatrix.from_documents([e[[0, 1]], e[[2]], np.zeros((0, 3), np.float32)])
    query = np.array([[1.0, 0.0, 0.0]], np.float32)
    np.testing.assert_allclose(score_documents(query, matrix), [[1.0, 0.0, 0.0]])
    docs = np.array([[0, 1, 0], [1, 0, 0], [1, 0, 0]], np.float32)
    np.testing.assert_allclose(score_documents(query, matrix, doc_vectors=docs, doc_weight=0.5), [[1.0, 0.5, 0.5]])
    with pytest.raises(HmdeError, match=">= 1"):
        score_documents(query, matrix, top=0)


def test_eval_clir_multi_vector_finds_the_sentence_a_mean_loses(hmde_dir, tmp_path):
    """A one-sentence answer inside a long document: mean pooling ranks the short distractor first."""
    docs = [{"doc_id": "long", "text": "Economic growth slowed. " * 0 + " ".join(
        f"Report line {i} about harbour logistics." for i in range(30)) + " The cat sat on the mat."},
        {"doc_id": "short", "text": "The dog sat on the rug."}]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "topics.tsv").write_text("q1\tThe cat sat on the mat.\n")
    (tmp_path / "qrels.txt").write_text("q1 0 long 1\n")
    common = ["--topics", str(tmp_path / "topics.tsv"), "--qrels", str(tmp_path / "qrels.txt"), "--documents",
              str(path), "--no-progress"]
    assert main(["eval", "clir", str(hmde_dir), "--multi-vector", "lower", "-o", str(tmp_path / "l.json")] + common) == 0
    assert main(["eval", "clir", str(hmde_dir), "--multi-vector", "context", "-o", str(tmp_path / "c.json")] + common) == 0
    lower = json.loads((tmp_path / "l.json").read_text())
    assert lower["metrics"]["average"] == 1.0  # the query is one of the long document's sentences
    assert lower["method"] == "hmde:sentences-lower" and lower["settings"]["multi_vector"] == "lower"
    assert json.loads((tmp_path / "c.json").read_text())["settings"]["top_sentences"] == 1
    assert main(["eval", "clir", str(hmde_dir), "--multi-vector", "context", "--top-sentences", "0", "-o",
                 str(tmp_path / "x.json")] + common) == 2
