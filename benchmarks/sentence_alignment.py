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
    python benchmarks/sentence_alignment.py --speed
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
    from hmde.align.sentence_alignment import align_sentences, beads_f1

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


def one_speed(n: int, full: bool) -> dict:
    from hmde.align.sentence_alignment import AlignmentOptions, align_vectors

    rng = np.random.default_rng(0)
    dim = 384
    src = rng.standard_normal((n, dim)).astype(np.float32)
    tgt = src + 0.3 * rng.standard_normal((n, dim)).astype(np.float32)

    def spans(v):
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        return [v] + [(lambda s: s / np.linalg.norm(s, axis=1, keepdims=True))(
            np.stack([v[i:i + k].sum(0) for i in range(len(v) - k + 1)])) for k in (2, 3)]

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
    if args.speed:
        speed(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
