"""The persistent sentence-vector cache: same vectors as embedding, reuse across runs and methods,
exact keys (weights, token ids), and one-line errors for a foreign file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hmde import HierarchicalEncoder
from hmde.errors import HmdeError
from hmde.methods.vectorizer import DocumentVectorizer
from hmde.encoders.sentence_cache import SentenceVectorCache


def _count_forward(encoder) -> list[int]:
    """How many sentences the lower encoder's modules actually ran on."""
    seen = [0]
    original = encoder.forward_features

    def counting(features, model=None):
        seen[0] += int(features["input_ids"].shape[0])
        return original(features, model)

    encoder.forward_features = counting
    return seen


def test_cached_vectors_equal_fresh_ones_and_a_second_run_embeds_nothing(hmde_dir, corpus, tmp_path):
    fresh = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    expected = fresh.encode_documents(corpus[:24])
    expected_mean = DocumentVectorizer(fresh, "mean").encode(corpus[:24])

    first = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    cache = SentenceVectorCache(tmp_path / "cache")
    first.lower.use_vector_cache(cache)
    np.testing.assert_allclose(first.encode_documents(corpus[:24]), expected, atol=1e-5)
    assert cache.misses > 0
    cache.flush()
    shards = list((tmp_path / "cache").glob("*/shard-*.npy"))
    assert len(shards) == 1

    second = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")  # a new process, in effect
    again = SentenceVectorCache(tmp_path / "cache")
    second.lower.use_vector_cache(again)
    ran = _count_forward(second.lower)
    np.testing.assert_allclose(second.encode_documents(corpus[:24]), expected, atol=1e-5)
    # method mean embeds the same sentences: read from the cache too
    np.testing.assert_allclose(DocumentVectorizer(second, "mean").encode(corpus[:24]), expected_mean, atol=1e-5)
    assert ran[0] == 0 and again.misses == 0 and again.hits > 0


def test_changed_weights_get_their_own_vectors(hmde_dir, corpus, tmp_path):
    model = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    cache = SentenceVectorCache(tmp_path / "cache")
    model.lower.use_vector_cache(cache)
    before = model.lower.encode(corpus[:5])
    with torch.no_grad():
        first_weights = next(model.lower.model.parameters())
        first_weights.add_(torch.randn_like(first_weights))
    ran = _count_forward(model.lower)
    after = model.lower.encode(corpus[:5])
    assert ran[0] == 5 and not np.allclose(before, after, atol=1e-4)
    cache.flush()
    assert len(list((tmp_path / "cache").iterdir())) == 2  # one partition per set of weights


def test_training_never_reads_the_cache(hmde_dir, corpus, tmp_path):
    model = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    cache = SentenceVectorCache(tmp_path / "cache")
    model.lower.use_vector_cache(cache)
    model.lower.encode(corpus[:4])
    ids = model.lower.token_ids(corpus[:4])
    out = model.lower.embed_ids(ids)  # gradients enabled: embedded, differentiable
    assert out.requires_grad and cache.hits == 0


def test_a_foreign_file_in_the_cache_is_refused_in_one_line(hmde_dir, corpus, tmp_path):
    model = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    cache = SentenceVectorCache(tmp_path / "cache")
    model.lower.use_vector_cache(cache)
    model.lower.encode(corpus[:3])
    cache.flush()
    partition = next((tmp_path / "cache").iterdir())
    np.save(partition / "shard-foreign.npy", np.zeros((3, 7), dtype=np.float32))
    other = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    other.lower.use_vector_cache(SentenceVectorCache(tmp_path / "cache"))
    with pytest.raises(HmdeError, match=r"shard-foreign\.npy: rows of float32.*expected keys and \d+-d float32"):
        other.lower.encode(corpus[:3])


@pytest.mark.parametrize("kind", ["hmde", "sentence encoder"])
def test_eval_with_a_sentence_cache_gives_the_same_result_and_fills_it(kind, hmde_dir, labse_dir, tmp_path):
    from hmde.cli.main import main

    model = hmde_dir if kind == "hmde" else labse_dir

    data = tmp_path / "docs"
    data.mkdir()
    texts = {"eng": ["The cat sat on the mat. It was sunny.", "Growth slowed as exports fell.",
                     "The team won the final."],
             "deu": ["Die Katze saß auf der Matte. Es war sonnig.", "Das Wachstum sank, die Exporte fielen.",
                     "Das Team gewann das Finale."]}
    for lang, docs in texts.items():
        (data / f"{lang}.jsonl").write_text("".join(json.dumps({"doc_id": f"{lang}-{i}", "concept": str(i), "text": t}) + "\n"
                                                    for i, t in enumerate(docs)), encoding="utf-8")
    results = []
    for run, cache in (("plain", None), ("fill", tmp_path / "c"), ("reuse", tmp_path / "c")):
        out = tmp_path / f"{run}.json"
        argv = ["eval", "align", str(model), "--data", str(data), "--pairs", "deu-eng", "--device", "cpu",
                "--no-progress", "-o", str(out), *(["--sentence-cache", str(cache)] if cache else [])]
        assert main(argv) == 0
        results.append(json.loads(out.read_text())["metrics"])
    assert results[0] == results[1] == results[2]
    assert list((tmp_path / "c").glob("*/shard-*.npy"))
