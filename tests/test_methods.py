"""Document-vector methods: each equals its definition on the shared lower encoder."""

import numpy as np
import pytest

from hmde import HierarchicalEncoder
from hmde.cli.main import main
from hmde.errors import HmdeError
from hmde.methods.vectorizer import DocumentVectorizer, pack_sentences
from hmde.text.segmentation import token_windows

DOCS = ["The cat sat on the mat. It was a sunny day in the old town. Dr. Smith visited the hospital.",
        "Die Katze saß auf der Matte. Es war ein sonniger Tag."]


@pytest.fixture(scope="module")
def model(hmde_dir):
    return HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")


def test_hmde_method_is_the_hierarchical_model(model):
    np.testing.assert_array_equal(DocumentVectorizer(model, "hmde").encode(DOCS), model.encode_documents(DOCS))


def test_first_is_the_sentence_encoder_on_the_whole_text(model):
    np.testing.assert_allclose(DocumentVectorizer(model, "first").encode(DOCS), model.encode_queries(DOCS), atol=1e-5)


def test_mean_is_the_mean_of_sentence_vectors(model):
    expected = np.stack([model.encode_queries(model.segment(d, "eng")).mean(0) for d in DOCS])
    np.testing.assert_allclose(DocumentVectorizer(model, "mean").encode(DOCS, "eng"), expected, atol=1e-5)


def test_seg_windows_overlap_by_a_third(model):
    text = " ".join(["word"] * 300)
    vec = DocumentVectorizer(model, "seg")
    units = vec.units([text], [None])[0]
    budget = model.config.max_sentence_tokens - 2
    assert units == token_windows(text, model.lower.tokenizer, budget, budget - round(budget / 3))
    n = len(model.lower.tokenizer(text, add_special_tokens=False)["input_ids"])
    stride = budget - round(budget / 3)
    assert len(units) == 1 + -(-(n - budget) // stride)  # windows start every 2/3 window until the end is covered
    np.testing.assert_allclose(vec.encode([text])[0], model.encode_queries(units).mean(0), atol=1e-5)


def test_pack_sentences_respects_the_token_limit(model):
    sentences = ["one two three"] * 50
    packed = pack_sentences(sentences, model.lower.tokenizer, 32)
    lengths = [len(model.lower.tokenizer(p)["input_ids"]) for p in packed]
    assert max(lengths) <= 32 and " ".join(packed).split() == " ".join(sentences).split()


def test_hmde_method_needs_an_hmde_model(labse_dir):
    from hmde import SentenceEncoder

    with pytest.raises(HmdeError, match="needs a saved hmde model"):
        DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "hmde")
    with pytest.raises(HmdeError, match="unknown method"):
        DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "max")


def test_encode_cli_lawdr_fits_once_then_reuses(hmde_dir, tmp_path):
    import json

    rows = [{"doc_id": f"{lang}{i}", "lang": lang, "text": f"{t} Number {i}."}
            for i in range(12) for lang, t in (("eng", DOCS[0]), ("deu", DOCS[1]))]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "v.npy"
    assert main(["encode", str(hmde_dir), str(src), "-o", str(out), "--method", "lawdr", "--lawdr-m", "2",
                 "--no-progress"]) == 0
    assert (tmp_path / "v.lawdr" / "lawdr.json").exists()
    first = np.load(out)
    # the second run reuses the saved statistics: a subset of documents gets the same vectors
    (tmp_path / "few.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    assert main(["encode", str(hmde_dir), str(tmp_path / "few.jsonl"), "-o", str(tmp_path / "few.npy"),
                 "--method", "lawdr", "--lawdr-stats", str(tmp_path / "v.lawdr"), "--no-progress"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "few.npy"), first[:3], atol=1e-5)
