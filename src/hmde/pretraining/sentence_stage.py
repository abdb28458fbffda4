"""A sentence-level alignment stage for the lower encoder (issue 64): LaBSE's objective on the shared parallel
sentences, so that a sentence query finds its translation's document as well as its own language's.

The loss is LaBSE's bidirectional in-batch translation ranking with an additive margin (Feng et al., 2022): for a
batch of translation pairs (x_i, y_i), with cosines s_ij = cos(x_i, y_j),

    L = -1/N sum_i [ log softmax_j(scale * (s_ij - m [i = j]))_i + log softmax_j(scale * (s_ji - m [i = j]))_i ]

(:func:`translation_ranking_loss`): every other pair of the batch is a negative, in both directions, and the true pair
must win by the margin ``m``. The x side is embedded as a query (e5's ``query:`` prompt), the y side as a document
sentence (``passage:``): the two roles a cross-lingual search gives them. Pairs come from the shared data's
``parallel/`` files (Tatoeba, WMT, Multi30k), each file (language pair) sampled in proportion to its size to the
power ``alpha`` (0.3, as the document stage's Bible pairs), so that low-resource pairs count; the direction of each
pair is drawn at random. The languages held out of document training stay out.

For a **translation encoder** (issue 79: mining and sentence alignment, which embed both sides as document
sentences) ``roles="document"`` embeds x as y is, and ``hard_negatives`` adds, per pair, the nearest other y sides of
its language by the starting model (:mod:`hmde.pretraining.hard_negatives`) as more columns of x's softmax. The
``udhr`` and ``bible`` pair kinds (:mod:`hmde.pretraining.tail_pairs`) bring the languages that only those texts
hold (issue 80); mixed with the query-like kinds, ``roles="by-kind"`` embeds their x (and translations') as document
sentences and keeps the query prompt for titles, headings and neighbours.

A second objective, **self-distillation** (``distill_weight``; Reimers & Gurevych, 2020, with the starting model as
its own teacher): for a pair (english, other) the student's vector of the other sentence and of the English one are
both pulled to the frozen starting model's vector of the English sentence,

    D = 1/N sum_i ( |s(other_i) - t(eng_i)|^2 + |s(eng_i) - t(eng_i)|^2 )     (unit vectors: each term is 2 - 2 cos)

so a translation lands where its English sentence already was (the cross-lingual gap closes towards e5's English),
and English itself stays where it was (monolingual English ranking kept). Each step embeds with one role, query and
passage in turn, so both of e5's prompts are taught. Pairs without an English side are left out of a run with
``distill_weight > 0``, and the pairs keep the order (other, English). The loss is
``ranking_weight * L + distill_weight * D`` (:func:`distillation_loss`; L on the same vectors, other as x).

Resumable exactly: a checkpoint (trainable weights, optimizer, scheduler, the sampler's position, random state) every
``checkpoint_every`` steps, and a rerun continues from the last. The trained lower encoder is saved with the model
(``save_pretrained``), to be measured by ``benchmarks/crosslingual_gap.py --model``.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import re
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import HmdeError
from .sentence_stage_config import PAIR_KINDS, SHIPPED_KINDS, SentenceStageConfig
from .dev_slice import DEV_CONCEPT_EVERY, HELD_OUT, dev_concept  # noqa: F401 (DEV_CONCEPT_EVERY: its name here)
from .parallel_files import pair_files, read_pairs


def translation_ranking_loss(a: torch.Tensor, b: torch.Tensor, margin: float = 0.3, scale: float = 20.0,
                             negatives: torch.Tensor | None = None) -> torch.Tensor:
    """LaBSE's additive-margin softmax over the batch, both directions summed (module docstring). ``negatives``:
    hard negatives of the y side (any number of vectors), more columns of the x -> y direction only."""
    if len(a) != len(b) or len(a) < 2:
        raise HmdeError("translation ranking needs two equal batches of at least 2 vectors")
    a = F.normalize(a, dim=-1)
    sims = a @ F.normalize(b, dim=-1).T
    logits = scale * (sims - margin * torch.eye(len(a), dtype=sims.dtype, device=sims.device))
    target = torch.arange(len(a), device=a.device)
    forward = logits if negatives is None else torch.cat([logits, scale * (a @ F.normalize(negatives, dim=-1).T)], 1)
    return F.cross_entropy(forward, target) + F.cross_entropy(logits.T, target)


def distillation_loss(student_other: torch.Tensor, student_english: torch.Tensor,
                      teacher_english: torch.Tensor) -> torch.Tensor:
    """Self-distillation (module docstring): squared distances of the unit vectors of both student sides to the
    teacher's English vector, summed over dimensions, averaged over pairs."""
    if not (student_other.shape == student_english.shape == teacher_english.shape):
        raise HmdeError("distillation needs three batches of vectors of one shape")
    t = F.normalize(teacher_english, dim=-1).detach()
    return ((F.normalize(student_other, dim=-1) - t).pow(2).sum(-1)
            + (F.normalize(student_english, dim=-1) - t).pow(2).sum(-1)).mean()


def file_quotas(sizes, total: int, alpha: float) -> np.ndarray:
    """How many of ``total`` items each file gives: in proportion to its size ** ``alpha``, at most its size."""
    sizes = np.asarray(sizes, np.float64)
    weights = sizes ** alpha
    return np.minimum(np.floor(total * weights / weights.sum()).astype(int), sizes.astype(int))


def docs_pages(data: Path, sources):
    """``(source, page)`` for every page of the shared ``docs/<source>/`` files whose language is not held out."""
    for source in sources:
        for path in sorted((Path(data) / "docs" / source).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for line in f:
                    page = json.loads(line)
                    if page.get("lang", "").split("_")[0] not in HELD_OUT:
                        yield source, page


def sample_pairs(data: Path, config: SentenceStageConfig) -> list[tuple[str, str]]:
    """``config.pairs`` translation pairs, each file's share proportional to its size ** alpha, shuffled (seeded)."""
    return [(x, y) for x, y, _ in sample_tagged_pairs(data, config)]


def sample_tagged_pairs(data: Path, config: SentenceStageConfig) -> list[tuple[str, str, str]]:
    """:func:`sample_pairs` with the language of each pair's y side: ``(x, y, y's language)`` (hard negatives are
    mined within a language)."""
    files = pair_files(data, config.sources)
    if config.distill_weight > 0:
        files = [f for f in files if "eng" in f[1:]]
        if not files:
            raise HmdeError("self-distillation needs pairs with an English side; none among " + ", ".join(config.sources))
    rows = [[p for p in read_pairs(path) if p[0].strip() and p[1].strip()] for path, _, _ in files]
    quota = file_quotas([len(r) for r in rows], config.pairs, config.alpha)
    rng = np.random.default_rng(config.seed)
    out = []
    for (_, x, y), pairs, n in zip(files, rows, quota):
        picked = rng.choice(len(pairs), int(n), replace=False) if n else []
        if config.distill_weight > 0:  # (other, English): the teacher reads the English side
            out += [(*pairs[i][::-1], x) if x == "eng" else (*pairs[i], y) for i in picked]
        else:
            out += [(*pairs[i], y) if rng.random() < 0.5 else (*pairs[i][::-1], x) for i in picked]
    order = rng.permutation(len(out))
    return [out[i] for i in order]


TITLE_SOURCES = ("libreoffice", "gnome", "tldr")  # docs/ sources whose titles are short query-like texts
def sample_title_pairs(data: Path, mono_share: float = 0.3, sources=TITLE_SOURCES, seed: int = 0,
                       max_chars: int = 600) -> list[tuple[str, str]]:
    """Query-passage pairs across languages from the shared ``docs/`` pages (issue 64's lead, docs/hmde-e5.md): one
    pair per concept with pages in two or more languages, the title of one of its pages (drawn) as the query and
    the first ``max_chars`` characters of the text of a page of the same concept in another language as the
    passage, or in a ``mono_share`` of the pairs the same page's text. The held-out languages and the development
    concepts (:func:`dev_concept`) stay out. Seeded."""
    import random

    if not 0 <= mono_share <= 1:
        raise HmdeError(f"mono_share must be in [0, 1], got {mono_share}")
    pages: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for source, page in docs_pages(data, sources):
        title, text = page.get("title") or "", page.get("text") or ""
        if len(title.strip()) >= 3 and text.strip() and not dev_concept(source, page["concept"]):
            pages.setdefault((source, page["concept"]), []).append((page.get("lang", ""), title, text[:max_chars]))
    concepts = [c for c, versions in pages.items() if len({lang for lang, _, _ in versions}) >= 2]
    if not concepts:
        raise HmdeError(f"no concept in two languages under {Path(data) / 'docs'} ({', '.join(sources)})")
    rng = random.Random(seed)
    rng.shuffle(concepts)
    out = []
    for concept in concepts:
        versions = pages[concept]
        lang, title, text = rng.choice(versions)
        if rng.random() >= mono_share:
            text = rng.choice([v for v in versions if v[0] != lang])[2]
        out.append((title, text))
    return out


HEADING_SOURCES = ("libreoffice", "gnome")  # docs/ sources whose pages' paragraphs align across languages


def sample_heading_pairs(data: Path, mono_share: float = 0.3, sources=HEADING_SOURCES, seed: int = 0,
                         max_heading_chars: int = 80, min_passage_chars: int = 80,
                         max_chars: int = 600) -> list[tuple[str, str]]:
    """Question-answer-like pairs across languages from the shared ``docs/`` help pages (issue 64): a heading (a
    paragraph of 3 to ``max_heading_chars`` characters that does not end in a full stop: "What to back up",
    "Creating a Dialog Handler") of one language's page as the query, and the paragraph under it (at least
    ``min_passage_chars``, cut at ``max_chars``) in another language's page of the same concept as the passage,
    or in a ``mono_share`` of the pairs in the heading's own language. A page's translations keep its paragraphs
    in order, so the paragraph under a heading is found by its position in pages with as many paragraphs as the
    heading's. One pair per heading position of a concept (the languages drawn); the held-out languages and the
    development concepts (:func:`dev_concept`) stay out. Seeded."""
    import random

    if not 0 <= mono_share <= 1:
        raise HmdeError(f"mono_share must be in [0, 1], got {mono_share}")
    pages: dict[tuple[str, str], dict[str, list[str]]] = {}
    for source, page in docs_pages(data, sources):
        if len(page.get("paragraphs") or []) >= 2 and not dev_concept(source, page["concept"]):
            pages.setdefault((source, page["concept"]), {})[page.get("lang", "")] = page["paragraphs"]

    def heading(text: str) -> bool:
        text = text.strip()
        return 3 <= len(text) <= max_heading_chars and not text.endswith((".", "。", "．"))

    rng = random.Random(seed)
    out = []
    for key in sorted(pages):
        versions = pages[key]
        for size in sorted({len(p) for p in versions.values()}):
            langs = sorted(lang for lang, p in versions.items() if len(p) == size)
            if len(langs) < 2:
                continue
            for k in range(size - 1):
                usable = [lang for lang in langs if heading(versions[lang][k])
                          and len(versions[lang][k + 1].strip()) >= min_passage_chars]
                if len(usable) < 2:
                    continue
                query_lang = rng.choice(usable)
                passage_lang = query_lang if rng.random() < mono_share else rng.choice(
                    [lang for lang in usable if lang != query_lang])
                out.append((versions[query_lang][k].strip(), versions[passage_lang][k + 1].strip()[:max_chars]))
    if not out:
        raise HmdeError(f"no heading in two languages under {Path(data) / 'docs'} ({', '.join(sources)})")
    rng.shuffle(out)
    return out


def sample_neighbour_pairs(data: Path, pairs: int = 20_000, mono_share: float = 0.3, sources=("wmt",),
                           alpha: float = 0.3, seed: int = 0, min_chars: int = 20) -> list[tuple[str, str]]:
    """Query-sentence pairs of related, not translated, sentences across languages (issue 64): in files whose lines
    run in document order (WMT's newstest articles), a sentence of one side as the query and the sentence just
    before or after it (drawn) on the other side as the passage, or in a ``mono_share`` of the pairs on its own
    side: a sentence query must find the sentences of its topic in another language as it does in its own, not
    only its translation. Each file's share is proportional to its size ** ``alpha``; lines under ``min_chars``
    characters (titles, bylines) are neither queries nor passages. The held-out languages stay out. Seeded."""
    if not 0 <= mono_share <= 1:
        raise HmdeError(f"mono_share must be in [0, 1], got {mono_share}")
    rows = [read_pairs(path) for path, _, _ in pair_files(data, sources)]
    rng = np.random.default_rng(seed)
    out = []
    for lines, n in zip(rows, file_quotas([len(r) for r in rows], pairs, alpha)):
        usable = [k for k in range(1, len(lines) - 1) if min(len(lines[k][0]), len(lines[k][1])) >= min_chars]
        for k in rng.choice(usable, min(int(n), len(usable)), replace=False) if usable else []:
            side = int(rng.integers(2))
            other = side if rng.random() < mono_share else 1 - side
            near = int(k) + (1 if rng.random() < 0.5 else -1)
            if len(lines[near][other]) >= min_chars:
                out.append((lines[k][side], lines[near][other]))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


ALIGNMENT_DEV_LINES = 120  # each WMT file's first lines: benchmarks/sentence_alignment.py's documents


_SENTENCE_END = re.compile(r"\s*([.!?\u3002\uff01\uff1f\u0964\u06d4]+)([\"'\u201d\u300d)]*)\s*$")


def as_one_sentence(first: str, second: str) -> str:
    """Two consecutive sentences written as one, as a translator merges them: the first's closing punctuation
    becomes a comma (an ideographic one, with no space, after a full stop of CJK text), closing quotes kept."""
    cut = _SENTENCE_END.search(first)
    if cut is None:
        return f"{first}, {second}"
    if set(cut.group(1)) & {"\u3002", "\uff01", "\uff1f"}:
        return f"{first[:cut.start()]}\uff0c{cut.group(2)}{second}"
    return f"{first[:cut.start()]},{cut.group(2)} {second}"


def sample_span_pairs(data: Path, spans: int, sources=("wmt",), alpha: float = 0.3, seed: int = 0,
                      skip: int = ALIGNMENT_DEV_LINES, merged: bool = False) -> list[tuple[str, str, str]]:
    """Span pairs for an alignment encoder (issue 79; docs/mining.md): in files whose lines run in document order
    (WMT's newstest articles), two consecutive sentences joined as the aligner joins a merged bead's
    (:func:`hmde.align.sentence_alignment.span_text`) against their two translations joined, and beside each span
    its two parts as pairs of their own, so that the parts are in the pile: hard negatives, mined within the y
    side's language, find a part for the span and the span for a part, and the ranking learns what the aligner asks
    of the encoder, a merge against its parts. ``(x, y, y's language)`` triples, each span's direction drawn, about
    ``spans`` spans (three pairs each; no line in two spans), each file's share proportional to its size **
    ``alpha``; the first ``skip`` lines of every file (the sentence alignment dev documents) and the held-out
    languages stay out. ``merged``: the y side of a span written as one sentence (:func:`as_one_sentence`), a 2-1
    bead, so that the count of sentences cannot tell a span's translation from a part. Seeded."""
    from ..align.sentence_alignment import span_text

    files = pair_files(data, sources)
    rows = [read_pairs(path) for path, _, _ in files]
    usable = [[k for k in range(skip, len(lines) - 1) if all(lines[k + d][s].strip() for d in (0, 1) for s in (0, 1))]
              for lines in rows]
    joined = as_one_sentence if merged else lambda a, b: span_text([a, b], 0, 2)
    rng = np.random.default_rng(seed)
    out = []
    for (_, x_lang, y_lang), lines, starts, n in zip(files, rows, usable,
                                                    file_quotas([len(u) for u in usable], spans, alpha)):
        used: set[int] = set()  # a line is in one span at most: its part pair, twice in the pile, would be its own
        for k in rng.permutation(starts) if n else []:  # negative
            if len(used) >= 2 * n:
                break
            if k in used or k + 1 in used:
                continue
            used |= {k, k + 1}
            flip = rng.random() < 0.5
            side, other, lang = (1, 0, x_lang) if flip else (0, 1, y_lang)
            parts = [(lines[k + d][side], lines[k + d][other], lang) for d in (0, 1)]
            out.append((span_text([p[0] for p in parts], 0, 2), joined(parts[0][1], parts[1][1]), lang))
            out += parts
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def sample_stage_pairs(data: Path, config: SentenceStageConfig, kinds: dict[str, float] | None = None,
                       with_languages: bool = False) -> list[tuple]:
    """The pairs a run trains on: each kind named (``titles``, ``headings``, ``neighbours``, with its share of pairs
    within one language; ``translations``, the parallel sentences of ``config.sources``; ``spans``, this share of
    ``config.pairs`` drawn as WMT span pairs with their parts (:func:`sample_span_pairs`); ``merges``, the same with
    the y side as one sentence; ``udhr`` and ``bible``, the
    tail's languages paired with English, capped per language: :mod:`hmde.pretraining.tail_pairs`; ``bible`` with a
    share above 0, that share of ``config.pairs`` spread evenly over the Bible's languages), shuffled
    together (seeded by ``config.seed``). ``None``: hmde-e5's shipped stage (:data:`SHIPPED_KINDS`).
    ``with_languages``: ``(x, y, y's language)`` triples, for hard negatives (the kinds of :data:`TAGGED_KINDS`
    know it; the others give None)."""
    from .tail_pairs import sample_bible_pairs, sample_udhr_pairs

    kinds = SHIPPED_KINDS if kinds is None else kinds
    unknown = sorted(set(kinds) - set(PAIR_KINDS))
    if unknown or not kinds:
        raise HmdeError(f"pair kinds must be some of {', '.join(PAIR_KINDS)}; got {', '.join(unknown) or 'none'}")
    data = Path(data)
    pairs: list[tuple] = []
    if "titles" in kinds:
        pairs += [(*p, None) for p in sample_title_pairs(data, kinds["titles"], seed=config.seed)]
    if "headings" in kinds:
        pairs += [(*p, None) for p in sample_heading_pairs(data, kinds["headings"], seed=config.seed)]
    if "neighbours" in kinds:
        pairs += [(*p, None) for p in sample_neighbour_pairs(data, config.pairs, kinds["neighbours"], seed=config.seed)]
    if "translations" in kinds:
        pairs += sample_tagged_pairs(data, config)
    if "spans" in kinds:
        pairs += sample_span_pairs(data, int(round(kinds["spans"] * config.pairs)), seed=config.seed)
    if "merges" in kinds:
        pairs += sample_span_pairs(data, int(round(kinds["merges"] * config.pairs)), seed=config.seed, merged=True)
    if "udhr" in kinds:
        pairs += sample_udhr_pairs(data, seed=config.seed)
    if "bible" in kinds:  # a share above 0: that share of config.pairs, as many verses from each language
        total = int(round(kinds["bible"] * config.pairs)) if kinds["bible"] else None
        pairs += sample_bible_pairs(data, seed=config.seed, total=total)
    if set(kinds) != {"translations"}:  # translations alone as sampled (shuffled there); any mix shuffled once more
        pairs = [pairs[i] for i in np.random.default_rng(config.seed).permutation(len(pairs))]
    return pairs if with_languages else [(x, y) for x, y, _ in pairs]


PAIRS_FILE = "pairs.json"


def record_run_pairs(output: Path, record: dict) -> None:
    """A run's pairs (the kinds, their share in one language, how many) are recorded in OUTPUT/pairs.json; a rerun
    that would resume on other pairs is refused (the checkpoint checks the other settings). Call before training."""
    from ..ground.atomic import write_text_atomic

    path = output / PAIRS_FILE
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise HmdeError(f"{path}: unreadable ({e}); remove it or choose another --output") from None
        if before != record:
            raise HmdeError(f"{path}: this run trained on {before}, not {record}; train with those or choose "
                            "another --output")
        return
    output.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=1))


class SentenceStageTrainer:
    """Trains ``model.lower`` (a model of :func:`hmde.encoders.model_loading.load_model`) on ``pairs``."""

    def __init__(self, model, pairs: list[tuple[str, str]], config: SentenceStageConfig, output: str | Path,
                 languages: list[str] | None = None):
        """``languages``: each pair's y language (:func:`sample_tagged_pairs`; None for a pair of the query-like
        kinds), which hard negatives and ``roles="by-kind"`` need."""
        config.check()
        config.check_pairs(len(pairs))
        if config.needs_languages and (languages is None or len(languages) != len(pairs)):
            raise HmdeError("hard negatives need the y language of every pair (sample_tagged_pairs)"
                            if config.hard_negatives else "roles by-kind needs each pair's language, None for the "
                            "query-like kinds (sample_stage_pairs(..., with_languages=True))")
        self.model, self.pairs, self.config, self.output = model, pairs, config, Path(output)
        self.languages = languages
        self.negatives = None  # per pair, the indices of the pairs whose y sides are its hard negatives (train())
        self.lower = model.lower if hasattr(model, "lower") else model
        self.module = self.lower.model  # the lower encoder's torch module: what this stage trains and checkpoints
        self.teacher = None
        if config.distill_weight > 0 or config.english_side == "teacher":  # the starting model, frozen (taken
            # before a checkpoint is loaded)
            self.teacher = copy.deepcopy(self.lower)
            self.teacher.model.eval()
            for p in self.teacher.model.parameters():
                p.requires_grad_(False)

    def _start(self, step: int) -> int:
        n, size = len(self.pairs), self.config.batch_size
        return (step * size) % (n - n % size or n)

    def batch(self, step: int) -> list[tuple[str, str]]:
        """The pairs of ``step`` (0-based): consecutive slices of the shuffled pairs, again from the start."""
        start = self._start(step)
        return self.pairs[start:start + self.config.batch_size]

    def negative_texts(self, step: int) -> list[str]:
        """The hard negatives of ``step``'s pairs (the y sides of the pairs each was given), pair by pair."""
        start = self._start(step)
        return [self.pairs[j][1] for row in self.negatives[start:start + self.config.batch_size] for j in row]

    def x_roles(self, step: int, count: int) -> list:
        """The role each x of ``step``'s ``count`` pairs is embedded in (``"query"``, or None: a document sentence):
        ``config.roles``, and for ``by-kind`` the pair's kind (a known language: a translation kind)."""
        roles = self.config.roles
        if roles != "by-kind":
            return [("query" if roles == "query-document" else None)] * count
        start = self._start(step)
        return [None if lang is not None else "query" for lang in self.languages[start:start + count]]

    def _x_ids(self, texts, roles) -> list:
        """``texts`` tokenised each in its own role (:meth:`x_roles`), one call to :meth:`_ids` a role."""
        out: list = [None] * len(texts)
        for role in dict.fromkeys(roles):
            where = [i for i, r in enumerate(roles) if r == role]
            for i, ids in zip(where, self._ids([texts[i] for i in where], role)):
                out[i] = ids
        return out

    def _ids(self, texts, role) -> list:
        """``texts`` tokenised with ``role``'s prompt, cut to ``max_tokens``."""
        lower = self.lower
        return [i[:self.config.max_tokens] for i in lower.token_ids(texts, prompt=lower.prompt_for(role))]

    def _embed(self, encoder, token_ids) -> torch.Tensor:
        """Unit vectors of ``token_ids`` in float32 (computed in bfloat16 on a GPU, for its speed)."""
        dtype = torch.bfloat16 if encoder.device.type == "cuda" else None
        return encoder.embed_ids(token_ids, normalized=True, autocast_dtype=dtype).float()

    def loss(self, batch, step: int = 0) -> torch.Tensor:
        lower, cfg, ids, embed = self.lower, self.config, self._ids, self._embed
        if self.teacher is None:  # x as a query (or a document sentence: roles), y as a document sentence
            x_ids = self._x_ids([x for x, _ in batch], self.x_roles(step, len(batch)))
            a, b = embed(lower, x_ids), embed(lower, ids([y for _, y in batch], None))
            h = embed(lower, ids(self.negative_texts(step), None)) if self.negatives is not None else None
            return cfg.ranking_weight * translation_ranking_loss(a, b, cfg.margin, cfg.scale, h)
        role = "query" if step % 2 == 0 else None  # one role a step, in turn
        other, english = ids([x for x, _ in batch], role), ids([y for _, y in batch], role)
        if cfg.english_side == "teacher":  # a routed encoder: its other-language vectors against the teacher's English
            a = embed(lower, other)
            with torch.no_grad():
                t = embed(self.teacher, english)
            loss = cfg.distill_weight * (a - t).pow(2).sum(-1).mean()
            return loss + cfg.ranking_weight * translation_ranking_loss(a, t, cfg.margin, cfg.scale)
        a, b = embed(lower, other), embed(lower, english)
        with torch.no_grad():
            t = embed(self.teacher, english)
        loss = cfg.distill_weight * distillation_loss(a, b, t)
        if cfg.ranking_weight > 0:
            loss = loss + cfg.ranking_weight * translation_ranking_loss(a, b, cfg.margin, cfg.scale)
        return loss

    def cached_backward(self, batch, step: int = 0) -> torch.Tensor:
        """The ranking loss's gradient over the whole batch with the encoder run ``ranking_chunk`` texts at a time
        (gradient caching): every vector first without a graph, the loss's gradient with respect to the vectors,
        then each chunk again with its graph, its vectors' gradients pushed through it. Each chunk's random state
        (dropout) is replayed, so the gradient is the one a single pass would give. Returns the loss."""
        lower, cfg, size = self.lower, self.config, self.config.ranking_chunk
        cuda = lower.device.type == "cuda"
        sides = [self._x_ids([x for x, _ in batch], self.x_roles(step, len(batch))),
                 self._ids([y for _, y in batch], None)]
        chunks = [(s, k) for s in range(2) for k in range(0, len(batch), size)]
        states, vectors = [], [[], []]
        with torch.no_grad():
            for s, k in chunks:
                states.append((torch.get_rng_state(), torch.cuda.get_rng_state() if cuda else None))
                vectors[s].append(self._embed(lower, sides[s][k:k + size]))
        a, b = (torch.cat(v).requires_grad_(True) for v in vectors)
        loss = cfg.ranking_weight * translation_ranking_loss(a, b, cfg.margin, cfg.scale)
        loss.backward()
        grads = (a.grad, b.grad)
        for (s, k), (cpu_state, cuda_state) in zip(chunks, states):
            torch.set_rng_state(cpu_state)
            if cuda_state is not None:
                torch.cuda.set_rng_state(cuda_state)
            (self._embed(lower, sides[s][k:k + size]) * grads[s][k:k + size]).sum().backward()
        return loss.detach()

    def train(self, resume: bool = True, log=print, stop_at_step: int | None = None, minutes: float | None = None):
        """Train to ``config.steps`` (from the last checkpoint where ``resume``); ``stop_at_step``: stop there, as a
        run cut off after a checkpoint would (the schedule stays the whole run's). ``minutes``: a time budget (a
        lent GPU): the step count and the schedule are fitted to the measured rate (hmde.training.time_budget)
        and ``config.steps`` becomes the count run."""
        from ..training.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint, trim_log
        from ..training.time_budget import BudgetProbe
        from .lower_parts import freeze_lower_parts

        cfg = self.config
        self.output.mkdir(parents=True, exist_ok=True)
        if cfg.hard_negatives:  # mined with the starting model, before a checkpoint loads; kept for the resumed run
            from .hard_negatives import hard_negatives_for_run

            self.negatives = hard_negatives_for_run(self.lower, self.pairs, self.languages, cfg, self.output, log)
        freeze_lower_parts(self.module, cfg.lower_trainable)
        params = [p for p in self.module.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup)) *
                                                     max(0.0, 1 - s / cfg.steps))  # reads cfg.steps each step
        start = 0
        folder = self.output / "checkpoint"
        if resume and (folder / STATE_FILE).is_file():
            state = load_checkpoint(folder)  # the random states too
            # a run written before a setting existed ran with its default (roles, hard negatives: issue 79)
            saved = {**asdict(SentenceStageConfig()), **state["config"]}
            if saved != asdict(cfg):
                changed = [f"{k} {saved.get(k)!r} there, {v!r} now" for k, v in asdict(cfg).items()
                           if saved.get(k) != v]
                raise HmdeError(f"{folder} was written with other settings ({'; '.join(changed)}): give the same, or "
                                "another --output for a new run")
            missing = set(self._trainable_names()) - set(state["model"])
            if missing:
                raise HmdeError(f"{folder} lacks {len(missing)} trainable weights (e.g. {sorted(missing)[0]})")
            self.module.load_state_dict(state["model"], strict=False)
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            start = state["step"]
        if start == 0:
            torch.manual_seed(cfg.seed)  # dropout's draws: a fresh run is the same run wherever it starts
        trim_log(self.output / "log.jsonl", start)  # steps logged after the checkpoint are run again
        (self.output / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
        self.module.train()
        started = time.perf_counter()
        probe = BudgetProbe(minutes, start, time.time(), warmup=10, probe=20) if minutes else None
        step, cap = start, cfg.steps
        cached = 0 < cfg.ranking_chunk < cfg.batch_size  # gradient caching: cached_backward runs the backward pass
        while step < min(cfg.steps, stop_at_step or cfg.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = self.cached_backward(self.batch(step), step) if cached else self.loss(self.batch(step), step)
            if not math.isfinite(loss.item()):
                raise HmdeError(f"the loss is {loss.item()} at step {step + 1}")
            if not cached:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            with open(self.output / "log.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": step + 1, "loss": round(loss.item(), 5),
                                    "seconds": round(time.perf_counter() - started, 1)}) + "\n")
            if probe is None and ((step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps):
                names = self._trainable_names()
                trainable = {k: v for k, v in self.module.state_dict().items() if k in names}
                save_checkpoint(folder, {"model": trainable, "optimizer": optimizer.state_dict(),
                                         "schedule": schedule.state_dict(), "step": step + 1, "config": asdict(cfg)})
                log(f"step {step + 1}/{cfg.steps}: loss {loss.item():.4f}")
            step += 1
            if probe is not None and (fitted := probe.fitted_total(step, cap)) is not None:
                log(f"the time budget fits {fitted} steps (at step {step})")
                cfg.steps = fitted
        self.module.eval()
        return self.model

    def _trainable_names(self) -> set[str]:
        return {n for n, p in self.module.named_parameters() if p.requires_grad}


def apply_checkpoint(model, folder: str | Path) -> int:
    """Load a stage checkpoint's trained weights into ``model``'s lower encoder (a run measured before its end);
    returns the step it was written at."""
    from ..training.checkpoint import load_checkpoint

    state = load_checkpoint(folder)
    lower = model.lower if hasattr(model, "lower") else model
    lower.model.load_state_dict(state["model"], strict=False)
    return int(state["step"])
