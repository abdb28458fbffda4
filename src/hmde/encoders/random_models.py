"""Build randomly initialised encoders in the exact on-disk formats of the hub.

Tests and benchmarks cannot download models, so they build their own: a WordPiece
tokenizer trained on the fly, a BERT of any size with random weights, and the
sentence-transformers modules of LaBSE (CLS -> Dense(tanh) -> Normalize) or of a
mean-pooling model. The folders are saved with the libraries' own ``save`` methods,
so loading them exercises the same code paths as a hub checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import torch

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece_tokenizer(texts: Iterable[str], vocab_size: int = 2000):
    """A BERT-style fast tokenizer trained on ``texts`` (multilingual: no lowercasing/accent strip)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS)
    tok.train_from_iterator(list(texts), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    tok.decoder = decoders.WordPiece()
    return BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=False,
        model_max_length=512,
    )


def build_random_sentence_encoder(
    path: str | Path,
    texts: Iterable[str],
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    vocab_size: int = 2000,
    max_position_embeddings: int = 512,
    style: str = "labse",
    seed: int = 0,
    max_seq_length: int = 128,
    embedding_rows: int | None = None,
) -> Path:
    """Save a random BERT sentence encoder at ``path`` and return the path.

    ``style``: ``labse`` (CLS -> Dense(tanh) -> Normalize, as the LaBSE checkpoint),
    ``mean`` (mean pooling, sentence-transformers form) or ``hf`` (a plain Hugging
    Face model folder with no sentence-transformers modules). ``embedding_rows``: rows of the
    token-embedding matrix when more than the tokenizer's vocabulary (LaBSE: 501,153), so
    that benchmarks pay for a real vocabulary's embedding gradients and optimizer state;
    the extra rows are never looked up.
    """
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    from .sentence_encoder import _st_modules

    path = Path(path)
    torch.manual_seed(seed)
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size)
    config = BertConfig(
        vocab_size=max(len(tokenizer), embedding_rows or 0),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size or 4 * hidden_size,
        max_position_embeddings=max_position_embeddings,
    )
    bert = BertModel(config, add_pooling_layer=False)
    hf_dir = path if style == "hf" else path / "_hf"
    bert.save_pretrained(str(hf_dir))
    tokenizer.save_pretrained(str(hf_dir))
    if style == "hf":
        return path
    m = _st_modules()
    transformer = m.Transformer(str(hf_dir), max_seq_length=max_seq_length)
    if style == "labse":
        modules = [
            transformer,
            m.Pooling(hidden_size, pooling_mode="cls"),
            m.Dense(hidden_size, hidden_size, activation_function=torch.nn.Tanh()),
            m.Normalize(),
        ]
    elif style == "mean":
        modules = [transformer, m.Pooling(hidden_size, pooling_mode="mean")]
    else:
        raise ValueError(f"unknown style {style!r}")
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    import shutil

    shutil.rmtree(hf_dir)
    return path
