"""The sentence stage's settings (:mod:`hmde.pretraining.sentence_stage`), apart from the stage itself so that the
command line can name them without importing torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import HmdeError

PAIR_KINDS = ("titles", "headings", "neighbours", "translations", "spans", "merges", "udhr", "bible")
# kinds that know each pair's y language (hard negatives need it)
TAGGED_KINDS = ("translations", "spans", "merges", "udhr", "bible")
ROUTED_KINDS = ("translations", "udhr", "bible")  # what a routed tail encoder trains on: pairs with English
SPAN_KINDS = ("spans", "merges")  # kinds whose share is of --pairs drawn as spans (sentence_stage.sample_span_pairs)
SPAN_SHARE = 0.25  # hmde sentence-stage --pairs-from spans (merges): this share of --pairs drawn as spans, 3 pairs each
ROLES = ("query-document", "document", "by-kind")
ENGLISH_SIDES = ("student", "teacher")  # who embeds a pair's English side (english_side below)
# hmde-e5's sentence stage (stop 74, docs/hmde-e5.md): titles and headings (0.3 of them within one language) with a
# third as many translation pairs, which keep Tatoeba and PUD alignment up where titles and headings alone fell a hair
SHIPPED_KINDS = {"titles": 0.3, "headings": 0.3, "translations": 0.3}


@dataclass
class SentenceStageConfig:
    sources: list = field(default_factory=lambda: ["tatoeba", "wmt", "multi30k"])
    pairs: int = 8_000  # translation (or neighbour) pairs drawn for the run (without replacement within a file)
    alpha: float = 0.3  # a file's share is proportional to its size ** alpha
    batch_size: int = 32
    steps: int = 160
    lr: float = 1e-5
    warmup: int = 10
    # e5's own temperature (0.01) and no margin: LaBSE's 0.3 at a scale of 20 pulled every score apart (run A)
    margin: float = 0.0
    scale: float = 100.0
    ranking_weight: float = 1.0
    distill_weight: float = 0.0
    lower_trainable: str = "no-embeddings"  # e5's token table frozen: as good, and 42 MB of changes instead of 120
    max_tokens: int = 96
    seed: int = 0
    checkpoint_every: int = 50
    # gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited
    # Setup"): the ranking loss over the whole batch, the encoder run this many texts at a time (0: all at once),
    # so a CPU or a small GPU trains with the in-batch negatives of a large batch; the same gradient as one pass
    ranking_chunk: int = 0
    # the roles the two sides of a pair are embedded in: "query-document" (x as a query, y as a document sentence:
    # cross-lingual search, hmde-e5's stage) or "document" (both as document sentences, as translation mining and
    # sentence alignment embed them: issue 79's translation encoder) or "by-kind" (x as a query in the query-like
    # kinds, titles, headings, neighbours; as a document sentence in the translation kinds, translations, udhr,
    # bible: issue 80's tail run, where translation pairs through the query role cost monolingual headline search)
    roles: str = "query-document"
    # hard negatives (issue 79; ANCE-style, mined once with the starting model): per pair, this many y sides of other
    # pairs in the pair's y language, the nearest to its x, none closer than negative_ceiling x the pair's own cosine
    # (a near-equal sentence is likely a translation too: NV-Retriever's positive-aware mining); translations only
    hard_negatives: int = 0
    negative_ceiling: float = 0.95
    # who embeds a pair's English side (issue 80's routed tail encoder): "student" (the model trained: one encoder
    # for every language) or "teacher" (the starting model, frozen: the trained model serves the pairs' other
    # languages alone, routed to by a document's language, and its vectors of them are pulled into the starting
    # model's space, which keeps every other language; pairs (other, English): hmde.pretraining.tail_pairs)
    english_side: str = "student"

    def check_pairs(self, count: int, source: str = "") -> None:
        """A run needs at least one batch of pairs (``source``: where they came from, for the message)."""
        if count < self.batch_size:
            raise HmdeError(f"{source + ': ' if source else ''}{count} pairs for batches of {self.batch_size}")

    @property
    def needs_languages(self) -> bool:
        """Whether a run needs each pair's language (``sample_stage_pairs(..., with_languages=True)``): hard
        negatives are mined within it, and ``by-kind`` roles tell a translation kind by it (None: a query-like kind)."""
        return bool(self.hard_negatives) or self.roles == "by-kind"

    def check(self) -> None:
        """Every setting in range, in one line naming it, before any data is read or the model loads (a negative
        scale trained pairs apart; --lr nan failed after the model loaded)."""
        from .lower_parts import parse_lower_trainable

        for name in ("pairs", "batch_size", "steps", "max_tokens", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise HmdeError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "scale"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise HmdeError(f"{name} must be a finite number > 0, got {value}")
        for name in ("margin", "ranking_weight", "distill_weight", "alpha"):
            if not math.isfinite(getattr(self, name)):
                raise HmdeError(f"{name} must be a finite number, got {getattr(self, name)}")
        if self.warmup < 0:
            raise HmdeError(f"warmup must be >= 0 steps, got {self.warmup}")
        if self.margin < 0:
            raise HmdeError(f"margin must be >= 0 (it is subtracted from each right pair's score), got {self.margin}")
        try:
            parse_lower_trainable(self.lower_trainable)
        except ValueError as exc:
            raise HmdeError(f"lower_trainable: {exc}") from None
        if self.ranking_chunk < 0:
            raise HmdeError(f"ranking_chunk must be >= 0 (0: the whole batch in one pass), got {self.ranking_chunk}")
        if self.ranking_chunk and self.distill_weight > 0:
            raise HmdeError("ranking_chunk (gradient caching) is for the ranking loss alone: set distill_weight 0")
        if self.roles not in ROLES:
            raise HmdeError(f"roles must be one of {', '.join(ROLES)}, got {self.roles!r}")
        if self.hard_negatives < 0:
            raise HmdeError(f"hard_negatives must be >= 0 (per pair), got {self.hard_negatives}")
        if not (math.isfinite(self.negative_ceiling) and 0 < self.negative_ceiling <= 1):
            raise HmdeError(f"negative_ceiling must be in (0, 1] (a share of the pair's own cosine), got "
                            f"{self.negative_ceiling}")
        if self.english_side not in ENGLISH_SIDES:
            raise HmdeError(f"english_side must be {' or '.join(ENGLISH_SIDES)}, got {self.english_side!r}")
        routed = self.english_side == "teacher"
        if routed and (self.hard_negatives or self.ranking_chunk or self.roles != "query-document"):
            raise HmdeError("english_side teacher (a routed encoder) embeds each side in one role a step, in turn, "
                            "against the teacher's English vectors: set hard_negatives 0, ranking_chunk 0 and roles "
                            "query-document")
        if self.roles != "query-document" and self.distill_weight > 0:
            raise HmdeError(f"roles {self.roles} is for the ranking loss alone (self-distillation embeds both sides in "
                            "one role a step, in turn): set distill_weight 0 or roles query-document")
        if self.hard_negatives and (self.distill_weight > 0 or self.ranking_chunk):
            raise HmdeError("hard_negatives are for the ranking loss in one pass: set distill_weight 0 and "
                            "ranking_chunk 0")
        if self.batch_size < 2:
            raise HmdeError("batch_size must be >= 2: a pair needs another pair of the batch to rank against")
        if not 0 <= self.alpha <= 1:
            raise HmdeError(f"alpha must be in [0, 1], got {self.alpha}")
        if min(self.ranking_weight, self.distill_weight) < 0 or self.ranking_weight + self.distill_weight == 0:
            raise HmdeError(f"ranking_weight and distill_weight must be >= 0, one of them > 0; got "
                            f"{self.ranking_weight} and {self.distill_weight}")
