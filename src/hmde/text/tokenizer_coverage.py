"""How well a sentence encoder's tokenizer covers a language's text (issue 80): the share of its tokens that are
``<unk>`` (characters the vocabulary lacks: no training can teach the encoder what they mean) and how many tokens a
word costs (a language split into many short pieces fills the token budget sooner and was rarely seen whole).

Words are counted as the shared data counts them (``../shared/data/README.md``): whitespace tokens, except that in
scripts written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan; here also Javanese, Yi and Tai Tham,
which UDHR has) a text counts its characters of those scripts / 1.5 plus its other characters / 4. Ethiopic's word
separator (፡) separates words as a space does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u0f00-\u0fff\u3040-\u30ff\u3400-\u4dbf"
                       "\u4e00-\u9fff\uf900-\ufaff\ua980-\ua9df\ua000-\ua4cf\u1a20-\u1aaf]")


def word_count(text: str) -> float:
    """``text``'s words, as the shared data counts them (module docstring)."""
    unspaced = len(_UNSPACED.findall(text))
    if unspaced * 2 < len(text.replace(" ", "")):  # mostly a spaced script
        return float(len(text.replace("\u1361", " ").split()))
    return unspaced / 1.5 + (len(text) - unspaced) / 4


@dataclass(frozen=True)
class Coverage:
    tokens: int
    unknown: int
    words: float

    @property
    def unknown_share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0


def tokenizer_coverage(tokenizer, texts: Sequence[str]) -> Coverage:
    """The tokens (no special tokens), ``<unk>`` tokens and words of ``texts`` under a Hugging Face ``tokenizer``."""
    if not texts:
        return Coverage(0, 0, 0.0)
    unk = tokenizer.unk_token_id
    tokens = unknown = 0
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        tokens += len(ids)
        unknown += sum(1 for i in ids if i == unk)
    return Coverage(tokens, unknown, sum(word_count(t) for t in texts))
