"""``hmde mine`` measured (issue 79): a BUCC-style dev table, and throughput and memory as the piles grow.

``--dev`` (the default): for each of the 20 Tatoeba languages of hmde's dev tables (LASER's Tatoeba sets, eval/), a
mining task in BUCC's shape: the source pile is every foreign sentence of the set (up to 1,000); the target pile holds
the English translations of 40% of them, the rest replaced by English sentences of the other languages' sets (none a
translation, none equal to a kept one), so that most sentences on either side lack a translation. Gold: the kept
translations. Every sentence embedded once by the model; pairs mined at each threshold; precision, recall and F1 per
language; the default threshold is the one of the best mean F1.

``--throughput``: synthetic 384-d unit vectors (a planted translation for a tenth of the sentences) at each size a
side, mined in a fresh process each (exact up to ``exact_limit``, IVF with 8-bit codes beyond): seconds and peak RSS.

    python benchmarks/mining.py --data ../shared/data
    python benchmarks/mining.py --throughput --sizes 100000 1000000
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

LANGS = ("ara", "ces", "cmn", "deu", "ell", "fin", "fra", "heb", "hin", "hun", "ind", "jpn", "kor", "pol", "rus", "spa",
         "swh", "tha", "tur", "vie")
THRESHOLDS = tuple(round(1.00 + 0.005 * i, 3) for i in range(21))
DIRECTIONS = ("max", "intersection")
KEPT = 0.4


def tasks(data: Path, limit: int = 1000, langs=LANGS) -> dict:
    """language -> (source sentences, target sentences, gold pairs)."""
    from hmde.evaluation.tatoeba import load_tatoeba

    folder = data / "eval" / "tatoeba"
    loaded = {lang: load_tatoeba(folder, lang) for lang in langs}
    out = {}
    for n, lang in enumerate(langs):
        foreign, english = (list(x[:limit]) for x in loaded[lang])
        rng = np.random.default_rng(n)
        keep = np.sort(rng.choice(len(foreign), int(KEPT * len(foreign)), replace=False))
        kept = {english[i] for i in keep}
        others = [e for other in langs if other != lang for e in loaded[other][1][:limit] if e not in kept]
        others = list(dict.fromkeys(e for e in others if e not in set(english)))
        distractors = [others[i] for i in rng.choice(len(others), len(foreign) - len(keep), replace=False)]
        target = [english[i] for i in keep] + distractors
        order = rng.permutation(len(target))
        target = [target[i] for i in order]
        where = {int(old): new for new, old in enumerate(order)}
        gold = {(int(i), where[k]) for k, i in enumerate(keep)}
        out[lang] = (foreign, target, gold)
    return out


PUD_LANGS = ("ara", "ces", "deu", "fin", "fra", "glg", "hin", "ind", "isl", "ita", "jpn", "kor", "pol", "por", "rus",
             "spa", "swe", "tha", "tur", "zho")


def pud_tasks(data: Path) -> dict:
    """language -> (source, target, gold) in the same shape from PUD's news and Wikipedia sentences (eval/pud: the
    1,000 sentences of the Parallel Universal Dependencies treebanks, translated sentence by sentence; none of them
    in any training data hmde uses): the source pile is the foreign side of half the sentence pairs, the target pile
    the English of 40% of those and, as distractors, the English of the other half's sentences (real sentences of
    the same texts, none a translation of a source sentence)."""
    def read(code):
        with gzip.open(data / "eval" / "pud" / f"{code}.jsonl.gz", "rt", encoding="utf-8") as f:
            return {r["concept"]: r["sentences"] for r in map(json.loads, f)}

    english = read("eng")
    out = {}
    for n, lang in enumerate(PUD_LANGS):
        other = read(lang)
        pairs = [(a, b) for concept, e in english.items() if len(e) == len(other.get(concept, []))
                 for a, b in zip(other[concept], e)]
        rng = np.random.default_rng(n)
        order = rng.permutation(len(pairs))
        half, rest = order[:len(order) // 2], order[len(order) // 2:]
        foreign = [pairs[i][0] for i in half]
        keep = np.sort(rng.choice(len(half), int(KEPT * len(half)), replace=False))
        distractors = [pairs[i][1] for i in rng.choice(rest, len(half) - len(keep), replace=False)]
        target = [pairs[half[k]][1] for k in keep] + distractors
        shuffle = rng.permutation(len(target))
        where = {int(old): new for new, old in enumerate(shuffle)}
        out[lang] = (foreign, [target[i] for i in shuffle], {(int(k), where[j]) for j, k in enumerate(keep)})
    return out


def dev(args) -> None:
    global THRESHOLDS, LANGS
    if args.languages or args.pud:  # a check beyond the dev table (never recorded: the record is the dev table's)
        if args.record:
            raise SystemExit("--record is the dev table's: not with --languages or --pud")
        LANGS = tuple(args.languages or LANGS)
    from hmde.align.mining import MiningOptions, mine_vectors, select_pairs

    if args.thresholds:  # a model trained for translation spreads its margins wider (docs/mining.md)
        first, last = args.thresholds
        THRESHOLDS = tuple(round(first + 0.005 * i, 3) for i in range(int(round((last - first) / 0.005)) + 1))
    floors = (0.0,)
    if args.floors:  # a model trained for translation mines best with a cosine floor too (docs/mining.md)
        first, last = args.floors
        floors = tuple(round(first + 0.01 * i, 3) for i in range(int(round((last - first) / 0.01)) + 1))
    from hmde.encoders.model_loading import load_model

    kind, model = load_model(args.model, "cpu", backend=args.backend)
    lower = model.lower if kind == "hmde" else model
    rows = {direction: {} for direction in DIRECTIONS}  # direction -> language -> (floor, threshold) -> (P, R, F1)
    if args.pud:
        LANGS = PUD_LANGS
    for lang, (src, tgt, gold) in (pud_tasks(args.data) if args.pud else tasks(args.data, langs=LANGS)).items():
        x, y = lower.encode(src), lower.encode(tgt)
        for direction in DIRECTIONS:
            rows[direction][lang] = {}
            for floor in floors:
                found = mine_vectors(x, y, MiningOptions(threshold=min(THRESHOLDS), direction=direction,
                                                         min_cosine=floor))
                for t in THRESHOLDS:
                    kept = {(i, j) for i, j, _ in select_pairs(*found, src, tgt, MiningOptions(threshold=t))}
                    tp = len(kept & gold)
                    p, r = tp / max(1, len(kept)), tp / len(gold)
                    rows[direction][lang][floor, t] = (p, r, 2 * p * r / max(1e-9, p + r))
        print(lang, flush=True)

    def mean_f1(direction, setting):
        return float(np.mean([rows[direction][lang][setting][2] for lang in LANGS]))

    best = max(((c, t) for c in floors for t in THRESHOLDS), key=lambda s: mean_f1("max", s))
    floor = best[0]
    print(f"\n{args.model}; {len(LANGS)} {'PUD' if args.pud else 'Tatoeba'} languages, mean F1 by threshold (cosine "
          f"floor {floor})\n")
    print("| selection | " + " | ".join(str(t) for t in THRESHOLDS[::2]) + " |")
    print("|---|" + "---|" * len(THRESHOLDS[::2]))
    for direction in DIRECTIONS:
        print(f"| {direction} | " + " | ".join(f"{mean_f1(direction, (floor, t)):.3f}" for t in THRESHOLDS[::2]) +
              " |")
    if len(floors) > 1:
        by_floor = {c: max(THRESHOLDS, key=lambda t: mean_f1("max", (c, t))) for c in floors}
        print("\n| cosine floor | " + " | ".join(str(c) for c in floors[::2]) + " |")
        print("|---|" + "---|" * len(floors[::2]))
        print("| best mean F1 (max) | " + " | ".join(f"{mean_f1('max', (c, by_floor[c])):.3f}" for c in floors[::2]) +
              " |")
    print(f"\n| language | precision | recall | F1 (max, threshold {best[1]}, cosine floor {floor}) |\n"
          "|---|---|---|---|")
    chosen = rows["max"]
    for lang in LANGS:
        p, r, f = chosen[lang][best]
        print(f"| {lang} | {p:.3f} | {r:.3f} | {f:.3f} |")
    print(f"| mean | {np.mean([chosen[x][best][0] for x in LANGS]):.3f} | "
          f"{np.mean([chosen[x][best][1] for x in LANGS]):.3f} | {mean_f1('max', best):.3f} |")
    from hmde.align.mining_threshold import default_min_cosine, default_threshold

    recorded = (default_min_cosine(args.model), default_threshold(args.model))
    if recorded in chosen[LANGS[0]] and not args.record:
        print(f"at the model's recorded defaults (margin {recorded[1]}, cosine floor {recorded[0]}): mean F1 "
              f"{mean_f1('max', recorded):.3f}")
    if args.record:  # hmde mine's default for this model (hmde.align.mining_threshold)
        from hmde.align.mining_threshold import record_threshold

        path = record_threshold(args.model, best[1], {
            "f1": round(mean_f1("max", best), 4), "selection": "max",
            "precision": round(float(np.mean([chosen[x][best][0] for x in LANGS])), 4),
            "recall": round(float(np.mean([chosen[x][best][1] for x in LANGS])), 4),
            "measured_on": f"benchmarks/mining.py: {len(LANGS)} Tatoeba languages, BUCC's shape (docs/mining.md)"},
            min_cosine=floor)
        print(f"recorded in {path}")


def one_size(args) -> None:
    """(internal) one size in this process: synthetic vectors mined, seconds and peak RSS as JSON."""
    from hmde.align.mining import MiningOptions, mine_vectors

    n, dim, rng = args.size, 384, np.random.default_rng(0)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    y = rng.standard_normal((n, dim), dtype=np.float32)
    planted = n // 10
    y[:planted] = x[:planted] + 0.5 * rng.standard_normal((planted, dim), dtype=np.float32)
    started = time.perf_counter()
    src, tgt, score = mine_vectors(x, y, MiningOptions(exact_limit=args.exact_limit))
    seconds = time.perf_counter() - started
    top = (src[:planted] == tgt[:planted]).mean() if len(src) else 0.0
    print(json.dumps({"size": n, "seconds": round(seconds, 1), "rss_mb": round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "exact": n <= args.exact_limit,
        "planted_found_first": round(float(top), 3)}))


def throughput(args) -> None:
    print("| sentences a side | index | seconds | per million | peak RSS MB |\n|---|---|---|---|---|")
    for size in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--one-size", "--size", str(size), "--exact-limit",
                              str(args.exact_limit)], capture_output=True, text=True)
        if out.returncode:
            print(f"| {size:,} | failed: {out.stderr.strip().splitlines()[-1][:100]} ||||")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {size:,} | {'exact' if r['exact'] else 'IVF, 8-bit codes'} | {r['seconds']} | "
              f"{r['seconds'] / size * 1e6:.0f} | {r['rss_mb']:,} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", default="hmde-e5")
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--backend", default="torch", help="the runtime of the dev table's vectors (torch: float32, "
                        "as its tables were measured; auto-fp32: what hmde mine runs, bf16 on a CPU with AMX)")
    parser.add_argument("--record", action="store_true", help="write the best threshold (and cosine floor) into the "
                        "model folder's mining.json: hmde mine's default for that model")
    parser.add_argument("--thresholds", type=float, nargs=2, metavar=("FIRST", "LAST"),
                        help="the dev table's threshold grid, steps of 0.005 (default 1.0 1.1)")
    parser.add_argument("--floors", type=float, nargs=2, metavar=("FIRST", "LAST"),
                        help="a grid of cosine floors too, steps of 0.01 (default: none, the margin alone)")
    parser.add_argument("--languages", nargs="+", help="Tatoeba languages other than the dev table's 20 (a check "
                        "of the recorded defaults beyond the languages they were chosen on)")
    parser.add_argument("--pud", action="store_true", help="the same shape from PUD's news and Wikipedia sentences "
                        "(20 languages; longer sentences than Tatoeba's, in no training data)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--exact-limit", type=int, default=50_000)
    parser.add_argument("--one-size", action="store_true", help="(internal)")
    parser.add_argument("--size", type=int, help="(internal)")
    args = parser.parse_args()
    if args.one_size:
        one_size(args)
    elif args.throughput:
        throughput(args)
    else:
        dev(args)


if __name__ == "__main__":
    main()
