"""A joint multilingual subword vocabulary, trained with Hugging Face tokenizers.

Unigram LM with a Metaspace pre-tokenizer (the SentencePiece algorithm, in the fast
tokenizer format that transformers and sentence-transformers load without hmde), or
byte-pair encoding with the same pre-tokenizer. Unigram is the paper's choice and the
default; its trainer needs minutes per 10k sentences of unsegmented scripts (CJK, Thai)
on 2 cores, while BPE trains on 180k sentences of 100 languages in well under a minute,
so the CPU recipe of hmde-mini uses BPE.
Default size 32,000 for many languages: the paper's 50k is for one pair; at 2-layer,
512-wide scale a larger table costs more embedding/softmax time than it gains, while
32k still gives each of ~100 languages several hundred pieces.
"""

from __future__ import annotations

from typing import Iterable

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


TOKENIZER_MODELS = ("unigram", "bpe")


def train_unigram_tokenizer(texts: Iterable[str], vocab_size: int = 32000, max_piece_length: int = 16,
                            model: str = "unigram", alphabet_limit: int = 4000):
    """Train a joint vocabulary on ``texts``; ``model`` is ``unigram`` or ``bpe``.

    BPE keeps the ``alphabet_limit`` most frequent characters (rarer ones become
    [UNK]), so CJK does not fill the table with single characters.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if model not in TOKENIZER_MODELS:
        raise ValueError(f"unknown tokenizer model '{model}' (unigram or bpe)")
    tok = Tokenizer(models.Unigram() if model == "unigram" else models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"), pre_tokenizers.Digits(individual_digits=True)]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    if model == "unigram":
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=SPECIALS, unk_token="[UNK]", max_piece_length=max_piece_length,
            shrinking_factor=0.75, n_sub_iterations=2,
        )
    else:
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, limit_alphabet=alphabet_limit,
                                      max_token_length=max_piece_length, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=512,
    )
