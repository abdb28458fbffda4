"""Sentence alignment (`hmde align-sentences`): quality on the dev data and speed on long documents.

``--quality``: WMT newstest pseudo-documents (consecutive lines of one test set, sentence-parallel) and PUD
documents (sentence-parallel) in 10+ language pairs of different scripts; gold = 1-1 beads. Each pair is
aligned as given, after deleting 20% of the target's sentences at random (gold: those source sentences
become 1-0), and after shuffling the target's paragraphs (blocks of 5 lines; gold: the 1-1 beads of the
paragraphs the monotone alignment can keep are still gold, the others count as misses). Reports Vecalign's
strict and lax F1 (:func:`hmde.align.sentence_alignment.beads_f1`) and the encoder's seconds per 1,000 sentences,
for each encoder named.

``--speed``: two synthetic documents of 1k, 10k and 50k sentences (vectors given, so only the alignment is
timed), time and peak RSS, and the ratio to a plain full-matrix DP where that fits.

    python benchmarks/sentence_alignment.py --quality --data ../shared/data --models hmde-e5,multilingual-e5-small
    python benchmarks/sentence_alignment.py --verses --data ../shared/data --models hmde-e5
    python benchmarks/sentence_alignment.py --speed
    python benchmarks/sentence_alignment.py --settings '[{}, {"skip_weight": 0.4}]' --models hmde-e5,hmde-e5-bitext

``--verses``: Bible chapters in 13 language pairs (:func:`verse_documents`): gold beads of every size as the
verses fall; the old default (issue 45) against the new (issue 55), with their cost.

``--settings JSON``: both dev tables (verses strict / lax, the WMT/PUD variants' strict F1) for each model under
each ``AlignmentOptions`` change of a JSON list, every text embedded once per model (docs/mining.md: the aligner
retuned for hmde-e5-bitext).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hmde.pretraining.dev_slice import ALIGNMENT_DEV_CHAPTERS

WMT_PAIRS = ("deu-eng", "eng-rus", "eng-zho", "eng-fin", "eng-tur", "ces-eng", "eng-jpn", "eng-hin", "eng-est",
             "eng-tam", "eng-khm", "eng-pol")
PUD_LANGS = ("deu", "rus", "zho", "jpn", "ara", "tha", "hin", "kor", "fin", "ind")


def wmt_documents(data: Path, pair: str, lines: int = 60, docs: int = 2):
    """``docs`` pseudo-documents of ``lines`` consecutive pairs of one WMT file."""
    path = data / "parallel" / "wmt" / f"{pair}.tsv.gz"
    if not path.exists():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for _, line in zip(range(lines * docs), f)]
    rows = [r for r in rows if len(r) == 2 and r[0].strip() and r[1].strip()]
    return [([r[0] for r in rows[i:i + lines]], [r[1] for r in rows[i:i + lines]])
            for i in range(0, len(rows) - lines + 1, lines)]


def pud_documents(data: Path, lang: str):
    """PUD's documents in English and ``lang`` as one long sentence-parallel document (sentences of the
    first 60 documents that split into the same count on both sides)."""
    def read(code):
        with gzip.open(data / "eval" / "pud" / f"{code}.jsonl.gz", "rt", encoding="utf-8") as f:
            return {r["concept"]: r for r in map(json.loads, f)}
    try:
        eng, other = read("eng"), read(lang)
    except FileNotFoundError:
        return []
    src, tgt = [], []
    for concept in list(eng)[:60]:
        a, b = eng[concept].get("sentences"), other.get(concept, {}).get("sentences")
        if a and b and len(a) == len(b):
            src += a
            tgt += b
    return [(src, tgt)] if src else []


# eight languages of seven families and four scripts, five pairs with English and eight without; Estonian is
# left out: 9% of its verses are cut short in the corpus (under 40% of the English verse's characters)
VERSE_PAIRS = ("eng-spa", "eng-zho", "eng-hye", "eng-guj", "eng-swh", "spa-por", "spa-swh", "por-zho", "zho-hye",
               "epo-spa", "guj-swh", "hye-guj", "epo-zho")
VERSE_CHAPTERS = ALIGNMENT_DEV_CHAPTERS  # the library keeps them out of the Bible pairs it trains on


def _bible(data: Path, lang: str) -> dict:
    path = data / "bible" / f"{lang}.jsonl.gz"
    if not path.exists():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {r["concept"]: r["verses"] for r in map(json.loads, f)}


def verse_documents(data: Path, pair: str, chapters: int = 3):
    """Real many-to-many beads (issue 55): up to ``chapters`` chapters of :data:`VERSE_CHAPTERS` that have as
    many verses on both sides; each verse is split by hmde's splitter, and the gold beads are the sentences of
    verse k against those of verse k (1-1, 1-2, 2-1, 2-2, 3-1 ... as they fall; an empty verse a skip).
    Returns (chapter, src sentences, tgt sentences, gold beads) per chapter."""
    from hmde.align.sentence_alignment import Bead
    from hmde.text.segmentation import split_sentences

    a, b = pair.split("-")
    left, right = _bible(data, a), _bible(data, b)
    out = []
    for chapter in VERSE_CHAPTERS:
        if chapter not in left or chapter not in right or len(left[chapter]) != len(right[chapter]):
            continue
        src, tgt, gold = [], [], []
        for x, y in zip(left[chapter], right[chapter]):
            xs, ys = split_sentences(x, a), split_sentences(y, b)
            gold.append(Bead(list(range(len(src), len(src) + len(xs))), list(range(len(tgt), len(tgt) + len(ys))), 0))
            src += xs
            tgt += ys
        out.append((chapter, src, tgt, [g for g in gold if g.src or g.tgt]))
        if len(out) == chapters:
            break
    return out


def variants(src, tgt, rng):
    """(name, src, tgt, gold beads) for the pair as given, with 20% of the target deleted, and shuffled."""
    from hmde.align.sentence_alignment import Bead

    n = len(src)
    yield "as given", src, tgt, [Bead([i], [i], 0) for i in range(n)]
    keep = sorted(rng.choice(n, size=n - n // 5, replace=False))
    index = {i: k for k, i in enumerate(keep)}
    yield "20% deleted", src, [tgt[i] for i in keep], [Bead([i], [index[i]] if i in index else [], 0) for i in range(n)]
    blocks = [list(range(s, min(s + 5, n))) for s in range(0, n, 5)]
    order = rng.permutation(len(blocks))
    shuffled = [i for b in order for i in blocks[b]]
    position = {i: k for k, i in enumerate(shuffled)}
    yield "paragraphs shuffled", src, [tgt[i] for i in shuffled], [Bead([i], [position[i]], 0) for i in range(n)]


def monotone_oracle(gold):
    """The best a monotone aligner can do against ``gold``: the longest increasing run of target positions
    kept as 1-1 beads, every other sentence left unaligned on both sides."""
    from hmde.align.sentence_alignment import Bead

    pairs = [(b.src[0], b.tgt[0]) for b in gold if b.src and b.tgt]
    tails, back, at = [], [None] * len(pairs), []  # patience sorting over target positions
    import bisect

    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            at.append(k)
        else:
            tails[pos], at[pos] = j, k
        back[k] = at[pos - 1] if pos else None
    keep, k = set(), at[-1] if at else None
    while k is not None:
        keep.add(k)
        k = back[k]
    kept = [pairs[k] for k in sorted(keep)]
    src_kept, tgt_kept = {i for i, _ in kept}, {j for _, j in kept}
    out = [Bead([i], [j], 0) for i, j in kept]
    out += [Bead([i], [], 0) for i, _ in pairs if i not in src_kept]
    out += [Bead([], [j], 0) for _, j in pairs if j not in tgt_kept]
    return out


def oracle(args) -> None:
    from hmde.align.sentence_alignment import beads_f1

    data = Path(args.data)
    tasks = [d for p in WMT_PAIRS for d in wmt_documents(data, p)[:1]]
    tasks += [d for lang in PUD_LANGS for d in pud_documents(data, lang)]
    scores = {}
    for src, tgt in tasks:
        for variant, _, _, gold in variants(src, tgt, np.random.default_rng(0)):
            f = beads_f1(monotone_oracle(gold), gold)
            scores.setdefault(variant, []).append((f["strict_f1"], f["lax_f1"]))
    print("the best monotone alignment (an oracle):")
    for variant, values in scores.items():
        print(f"| {variant} | {np.mean([v[0] for v in values]):.3f} | {np.mean([v[1] for v in values]):.3f} |")


def quality(args) -> None:
    from hmde.encoders.model_loading import load_model
    from hmde.align.sentence_alignment import beads_f1
    from hmde.align.sentence_pairs import align_sentences

    data = Path(args.data)
    tasks = [(f"WMT {p}", d) for p in WMT_PAIRS for d in wmt_documents(data, p)[:1]]
    tasks += [(f"PUD eng-{lang}", d) for lang in PUD_LANGS for d in pud_documents(data, lang)]
    print(f"{len(tasks)} document pairs: {', '.join(name for name, _ in tasks)}\n")
    for name in args.models.split(","):
        kind, model = load_model(name, "cpu")
        lower = model.lower if kind == "hmde" else model
        seconds, sentences = [0.0], [0]

        def embed(texts):
            t = time.perf_counter()
            out = lower.encode(list(texts))
            seconds[0] += time.perf_counter() - t
            sentences[0] += len(texts)
            return out

        rows = {}
        for task, (src, tgt) in tasks:
            rng = np.random.default_rng(0)
            for variant, s, t, gold in variants(src, tgt, rng):
                f = beads_f1(align_sentences(s, t, embed), gold)
                rows.setdefault(variant, []).append((f["strict_f1"], f["lax_f1"]))
        print(f"model {name}: {1000 * seconds[0] / max(1, sentences[0]):.1f} s per 1,000 texts embedded "
              f"(spans of up to 3 sentences included)")
        print("| variant | strict F1 | lax F1 | pairs |\n|---|---|---|---|")
        for variant, values in rows.items():
            strict, lax = np.mean([v[0] for v in values]), np.mean([v[1] for v in values])
            print(f"| {variant} | {strict:.3f} | {lax:.3f} | {len(values)} |")
        print()


OLD_DEFAULT = {"max_merge": 4, "anchors": False, "length_weight": 1.0}  # issue 45's aligner, spans of up to 3


def verses(args) -> None:
    """The verse dev table (issue 55): strict / lax F1 per language pair for the old and the new default, and
    what each costs: texts embedded per aligned sentence, seconds per 1,000 sentence pairs (embedding and
    search, 2 CPU cores). The old default embeds every span of every pair (as issue 45's code did); the new
    one embeds the reachable spans, each distinct text once per batch (:func:`align_many`)."""
    from hmde.align.sentence_alignment import AlignmentOptions, align_vectors, beads_f1
    from hmde.align.sentence_pairs import align_many
    from hmde.encoders.model_loading import load_model

    data = Path(args.data)
    pairs = [p for p in args.pairs.split(",") if p]
    tasks = [(p, d) for p in pairs for d in verse_documents(data, p)]
    if not tasks:
        print(f"no Bible chapters under {data / 'bible'}")
        return
    sentences = sum(len(s) + len(t) for _, (_, s, t, _) in tasks) / 2
    beads = [len(g) for _, (_, _, _, g) in tasks]
    print(f"{len(tasks)} chapters, {len(pairs)} language pairs, {sentences:.0f} sentence pairs (mean of the sides), "
          f"{sum(beads)} gold beads\n")
    for name in args.models.split(","):
        kind, model = load_model(name, "cpu")
        lower = model.lower if kind == "hmde" else model
        counted, calls = [0], []

        def embed(texts):
            counted[0] += len(texts)
            calls.append(len(texts))
            return lower.encode(list(texts))

        def old(s, t):
            options = AlignmentOptions(**OLD_DEFAULT)
            spans = [[embed([" ".join(side[i:i + k]) for i in range(len(side) - k + 1)]) for k in range(1, 4)]
                     for side in (s, t)]
            unit = [[v / np.linalg.norm(v, axis=1, keepdims=True) for v in side] for side in spans]
            return align_vectors(*unit, options, [len(x) for x in s], [len(x) for x in t])

        rows: dict[str, dict] = {}
        for label in ("old", "new, pair by pair", "new, no joins", "new"):
            counted[0] = 0
            calls.clear()
            start = time.perf_counter()
            if label == "old":
                predicted = [old(s, t) for _, (_, s, t, _) in tasks]
            elif label == "new, pair by pair":  # no text shared between pairs: what one pair costs alone
                predicted = [align_many([(s, t, None, None)], embed)[0] for _, (_, s, t, _) in tasks]
            else:  # "new, no joins": issue 55's aligner, the same batch (issue 65's joins and moves cost beside it)
                options = AlignmentOptions(join_tolerance=None, boundary_gain=None) if label == "new, no joins" else None
                predicted = align_many([(s, t, None, None) for _, (_, s, t, _) in tasks], embed, options)
            seconds = time.perf_counter() - start
            for (pair, (_, _, _, gold)), got in zip(tasks, predicted if label in ("old", "new") else []):
                f = beads_f1(got, gold)
                rows.setdefault(pair, {}).setdefault(label, []).append((f["strict_f1"], f["lax_f1"]))
            split = f" (single sentences {calls[0] / sentences:.2f}, merged spans {calls[1] / sentences:.2f}, " \
                f"joins and moves {sum(calls[2:]) / sentences:.2f})" if label == "new" and len(calls) >= 2 else ""
            print(f"model {name}, {label} default: {counted[0] / sentences:.2f} texts embedded per sentence pair{split}, "
                  f"{1000 * seconds / sentences:.1f} s per 1,000 sentence pairs")
        print("| pair | old strict / lax | new strict / lax |\n|---|---|---|")
        means = {"old": [], "new": []}
        for pair, by in rows.items():
            cells = []
            for label in ("old", "new"):
                st, lx = np.mean([v[0] for v in by[label]]), np.mean([v[1] for v in by[label]])
                means[label].append((st, lx))
                cells.append(f"{st:.3f} / {lx:.3f}")
            print(f"| {pair} | {' | '.join(cells)} |")
        mean = {k: (np.mean([v[0] for v in x]), np.mean([v[1] for v in x])) for k, x in means.items()}
        print(f"| mean | {mean['old'][0]:.3f} / {mean['old'][1]:.3f} | {mean['new'][0]:.3f} / {mean['new'][1]:.3f} |")
        print()


def settings(args) -> None:
    """Both dev tables under each setting of ``--settings`` (a JSON list of AlignmentOptions changes), per model;
    each distinct text embedded once per model, so a setting costs its alignments alone."""
    from hmde.align.sentence_alignment import AlignmentOptions, beads_f1
    from hmde.align.sentence_pairs import align_many
    from hmde.encoders.model_loading import load_model

    data = Path(args.data)
    changes = json.loads(args.settings)
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        raise SystemExit('--settings: a JSON list of objects, e.g. \'[{}, {"skip_weight": 0.4}]\'')
    options = [AlignmentOptions(**c).check() for c in changes]
    chapters = [(p, d) for p in args.pairs.split(",") if p for d in verse_documents(data, p)]
    documents = [d for p in WMT_PAIRS for d in wmt_documents(data, p)[:1]]
    documents += [d for lang in PUD_LANGS for d in pud_documents(data, lang)]
    changed = [v for src, tgt in documents for v in variants(src, tgt, np.random.default_rng(0))]
    print(f"{len(chapters)} chapters, {len(documents)} WMT/PUD document pairs in 3 variants\n")
    names = ("as given", "20% deleted", "paragraphs shuffled")
    print("| model | setting | verses strict / lax | " + " | ".join(names) + " |\n|---|---|---|" + "---|" * len(names))
    for name in args.models.split(","):
        kind, model = load_model(name, "cpu")
        lower = model.lower if kind == "hmde" else model
        cache: dict[str, np.ndarray] = {}

        def embed(texts):
            missing = [t for t in dict.fromkeys(texts) if t not in cache]
            if missing:
                cache.update(zip(missing, lower.encode(missing)))
            return np.stack([cache[t] for t in texts])

        for change, option in zip(changes, options):
            per_pair: dict[str, list] = {}
            got = align_many([(s, t, None, None) for _, (_, s, t, _) in chapters], embed, option)
            for (pair, (_, _, _, gold)), beads in zip(chapters, got):
                f = beads_f1(beads, gold)
                per_pair.setdefault(pair, []).append((f["strict_f1"], f["lax_f1"]))
            strict = np.mean([np.mean([v[0] for v in x]) for x in per_pair.values()])
            lax = np.mean([np.mean([v[1] for v in x]) for x in per_pair.values()])
            by_variant: dict[str, list] = {}
            got = align_many([(s, t, None, None) for _, s, t, _ in changed], embed, option)
            for (variant, _, _, gold), beads in zip(changed, got):
                by_variant.setdefault(variant, []).append(beads_f1(beads, gold)["strict_f1"])
            cells = " | ".join(f"{np.mean(by_variant[v]):.3f}" for v in names)
            print(f"| {name} | {json.dumps(change) if change else 'defaults'} | {strict:.3f} / {lax:.3f} | {cells} |",
                  flush=True)


def one_speed(n: int, full: bool) -> dict:
    from hmde.align.sentence_alignment import AlignmentOptions, align_vectors

    rng = np.random.default_rng(0)
    dim = 384
    src = rng.standard_normal((n, dim)).astype(np.float32)
    tgt = src + 0.3 * rng.standard_normal((n, dim)).astype(np.float32)

    def spans(v):
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        return [v] + [(lambda s: s / np.linalg.norm(s, axis=1, keepdims=True))(
            np.stack([v[i:i + k].sum(0) for i in range(len(v) - k + 1)])) for k in (2, 3, 4)]

    s, t = spans(src), spans(tgt)
    options = AlignmentOptions(full_cells=10**12 if full else AlignmentOptions().full_cells)
    start = time.perf_counter()
    beads = align_vectors(s, t, options)
    seconds = time.perf_counter() - start
    right = sum(b.src == b.tgt and len(b.src) == 1 for b in beads) / n
    return {"n": n, "full": full, "seconds": round(seconds, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "right": round(right, 4)}


def speed(args) -> None:
    print("| sentences per side | search | seconds | peak RSS MB | 1-1 right |\n|---|---|---|---|---|")
    for n in args.sizes:
        for full in ((False, True) if n <= args.full_max else (False,)):
            out = subprocess.run([sys.executable, __file__, "--one", str(n), *(["--full"] if full else [])],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            print(f"| {n:,} | {'full matrix' if full else 'coarse-to-fine'} | {r['seconds']} | {r['peak_rss_mb']:,} | "
                  f"{r['right']:.4f} |", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quality", action="store_true")
    p.add_argument("--speed", action="store_true")
    p.add_argument("--oracle", action="store_true", help="the best monotone alignment's F1 (no model)")
    p.add_argument("--verses", action="store_true", help="the Bible verse dev table, old and new default (issue 55)")
    p.add_argument("--settings", help="a JSON list of AlignmentOptions changes: both dev tables under each")
    p.add_argument("--pairs", default=",".join(VERSE_PAIRS), help="--verses: language pairs (src-tgt, ISO 639-3)")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--models", default="hmde-e5,multilingual-e5-small,hmde-use")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    p.add_argument("--full-max", type=int, default=10000, help="largest size also run with the full matrix")
    p.add_argument("--one", type=int, help="(internal: one speed measurement)")
    p.add_argument("--full", action="store_true", help="(internal)")
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_speed(args.one, args.full)))
        return 0
    if args.oracle:
        oracle(args)
    if args.quality:
        quality(args)
    if args.verses:
        verses(args)
    if args.speed:
        speed(args)
    if args.settings:
        settings(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
