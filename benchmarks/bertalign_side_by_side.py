"""hmde's sentence aligner beside Bertalign's published algorithm (issue 65), on the same pre-split sentences
and the same sentence vectors: strict and lax F1 (Vecalign's), where the beads differ from the gold, and time.

Bertalign is GPL: it runs as a separate program (benchmarks/bertalign_driver.py) in its own virtual environment,
made once with its wheel from PyPI (it needs Python >= 3.12):

    python3.12 -m venv /tmp/bertalign && /tmp/bertalign/bin/pip install bertalign==2.0.1
    python benchmarks/bertalign_side_by_side.py --bertalign-python /tmp/bertalign/bin/python --models hmde-e5

The driver asks which texts Bertalign will embed (its own overlap windows); this script embeds them, and every
span hmde asks for, with the model named (the lower encoder's document prompt, as ``hmde align-sentences``
does), so both aligners read the same vectors of the same texts.

Sets (dev data only):
- ``verses``: the Bible verse dev set of benchmarks/sentence_alignment.py (13 language pairs, 39 chapters;
  gold beads as the verses fall);
- ``verses-dropped``: the same chapters with 10% of the target's verses removed (seeded) and 10% of the
  source's, as a free translation leaves things out: gold, each sentence of a verse without its translation
  is a skip;
- ``sentences``, ``sentences-deleted``, ``sentences-shuffled`` (``--sets``): the documents and variants of
  ``benchmarks/sentence_alignment.py --quality`` (WMT and PUD, sentence-parallel, as given; 20% of the target
  deleted; the target's paragraphs of 5 lines shuffled), the same seeds.

``--variant NAME='{"length_weight": 0.5}'`` adds hmde rows with other AlignmentOptions (the same vectors).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sentence_alignment import (PUD_LANGS, VERSE_PAIRS, WMT_PAIRS, pud_documents, variants,  # noqa: E402
                                verse_documents, wmt_documents)

DRIVER = Path(__file__).resolve().parent / "bertalign_driver.py"


def dropped(src, tgt, gold, rng, share=0.1):
    """The chapter with ``share`` of the gold beads' target side and another ``share`` of their source side
    removed; gold: the remaining sentences of a bead that lost one side are skips."""
    from hmde.align.sentence_alignment import Bead

    n = len(gold)
    cut_tgt = set(rng.choice(n, size=max(1, int(n * share)), replace=False).tolist())
    cut_src = set(rng.choice(sorted(set(range(n)) - cut_tgt), size=max(1, int(n * share)), replace=False).tolist())
    s2, t2, g2 = [], [], []
    for k, bead in enumerate(gold):
        xs = [] if k in cut_src else [src[i] for i in bead.src]
        ys = [] if k in cut_tgt else [tgt[j] for j in bead.tgt]
        si = list(range(len(s2), len(s2) + len(xs)))
        ti = list(range(len(t2), len(t2) + len(ys)))
        if xs and ys:
            g2.append(Bead(si, ti, 0))
        else:
            g2 += [Bead([i], [], 0) for i in si] + [Bead([], [j], 0) for j in ti]
        s2 += xs
        t2 += ys
    return s2, t2, g2


SETS = ("verses", "verses-dropped", "sentences", "sentences-deleted", "sentences-shuffled")


def tasks_of(data: Path, pairs: list[str], sets: list[str]) -> dict[str, list]:
    """(label, source sentences, target sentences, gold beads) of each set named."""
    rng = np.random.default_rng(0)
    verses = [(p, s, t, g) for p in pairs for _, s, t, g in verse_documents(data, p)]
    out = {"verses": verses, "verses-dropped": [(p, *dropped(s, t, g, rng)) for p, s, t, g in verses]}
    documents = [(f"WMT {p}", d) for p in WMT_PAIRS for d in wmt_documents(data, p)[:1]]
    documents += [(f"PUD eng-{lang}", d) for lang in PUD_LANGS for d in pud_documents(data, lang)]
    for label, (src, tgt) in documents:  # the --quality table's documents and variants, the same seed
        for variant, s, t, g in variants(src, tgt, np.random.default_rng(0)):
            key = {"as given": "sentences", "20% deleted": "sentences-deleted",
                   "paragraphs shuffled": "sentences-shuffled"}[variant]
            out.setdefault(key, []).append((label, s, t, g))
    return {name: out.get(name, []) for name in sets}


def differences(predicted, gold) -> dict[str, int]:
    """Each predicted bead that is not a gold bead, by kind: a skip of a sentence gold aligns; part of one gold
    bead (a split); the whole of one gold bead and more (a merge); anything else (wrong: it pairs sentences no
    gold bead pairs)."""
    keys = {(tuple(b.src), tuple(b.tgt)) for b in gold}
    owner_s = {i: k for k, b in enumerate(gold) for i in b.src}
    owner_t = {j: k for k, b in enumerate(gold) for j in b.tgt}
    out = {"skip where gold aligns": 0, "split": 0, "merge": 0, "wrong": 0}
    for b in predicted:
        if (tuple(b.src), tuple(b.tgt)) in keys:
            continue
        if not (b.src and b.tgt):
            out["skip where gold aligns"] += 1
            continue
        owners = {owner_s.get(i) for i in b.src} | {owner_t.get(j) for j in b.tgt}
        if len(owners) == 1 and None not in owners:
            out["split"] += 1
        elif all(set(b.src) >= set(gold[k].src) and set(b.tgt) >= set(gold[k].tgt) for k in owners - {None}) \
                and any(gold[k].src and gold[k].tgt for k in owners - {None}):
            out["merge"] += 1
        else:
            out["wrong"] += 1
    return out


def run_bertalign(python: str, tasks: list, embed) -> tuple[list, float]:
    from hmde.align.sentence_alignment import Bead

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "tasks.json").write_text(json.dumps([{"src": s, "tgt": t} for _, s, t, _ in tasks], ensure_ascii=False))
        subprocess.run([python, str(DRIVER), "texts", str(tmp / "tasks.json"), str(tmp / "texts.json")], check=True)
        texts = json.loads((tmp / "texts.json").read_text())
        np.save(tmp / "vectors.npy", embed(texts))
        subprocess.run([python, str(DRIVER), "align", str(tmp / "tasks.json"), str(tmp / "texts.json"),
                        str(tmp / "vectors.npy"), str(tmp / "beads.json")], check=True)
        out = json.loads((tmp / "beads.json").read_text())
    return [[Bead(s, t, 0.0) for s, t in r["beads"]] for r in out], sum(r["seconds"] for r in out)


def main() -> int:
    from hmde.align.sentence_alignment import AlignmentOptions, beads_f1
    from hmde.align.sentence_pairs import align_many
    from hmde.encoders.model_loading import load_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bertalign-python", help="the Python of a virtual environment with bertalign installed")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--models", default="hmde-e5,multilingual-e5-small")
    p.add_argument("--pairs", default=",".join(VERSE_PAIRS))
    p.add_argument("--variant", action="append", default=[], help="NAME=JSON of AlignmentOptions fields (hmde rows)")
    p.add_argument("--sets", default="verses,verses-dropped", help=f"of {', '.join(SETS)}")
    p.add_argument("--cache", help="a folder where each model's vectors of the texts are kept between runs")
    args = p.parse_args()
    names = [x for x in args.sets.split(",") if x]
    if unknown := sorted(set(names) - set(SETS)):
        p.error(f"--sets: unknown {', '.join(unknown)} (known: {', '.join(SETS)})")
    sets = tasks_of(Path(args.data), [x for x in args.pairs.split(",") if x], names)
    if not any(sets.values()):
        print(f"no dev documents under {Path(args.data)}")
        return 0
    variants = {"hmde": {}} | {v.split("=", 1)[0]: json.loads(v.split("=", 1)[1]) for v in args.variant}
    for name in args.models.split(","):
        kind, model = load_model(name, "cpu")
        lower = model.lower if kind == "hmde" else model
        cache: dict[str, np.ndarray] = {}
        stored = Path(args.cache) / f"{Path(name).name}.npz" if args.cache else None
        if stored is not None and stored.exists():
            with np.load(stored, allow_pickle=False) as z:
                cache.update(zip(z["texts"].tolist(), z["vectors"]))

        def embed(texts):
            new = [t for t in dict.fromkeys(texts) if t not in cache]
            if new:
                cache.update(zip(new, np.asarray(lower.encode(new), np.float32)))
            return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, lower.dim), np.float32)

        for set_name, tasks in sets.items():
            if not tasks:
                continue
            results, seconds = {}, {}
            for label, fields in variants.items():
                options = AlignmentOptions(**fields).check()
                align_many([(s, t, None, None) for _, s, t, _ in tasks], embed, options)  # fills the cache
                start = time.perf_counter()
                results[label] = align_many([(s, t, None, None) for _, s, t, _ in tasks], embed, options)
                seconds[label] = time.perf_counter() - start
            if args.bertalign_python:
                results["Bertalign"], seconds["Bertalign"] = run_bertalign(args.bertalign_python, tasks, embed)
            sentences = sum(len(s) + len(t) for _, s, t, _ in tasks) / 2
            print(f"\n### {name}, {set_name}: {len(tasks)} documents, {sentences:.0f} sentence pairs\n")
            labels = list(results)
            print("| pair | " + " | ".join(f"{x} strict / lax" for x in labels) + " |")
            print("|---|" + "---|" * len(labels))
            per_pair: dict[str, dict[str, list]] = {}
            kinds = {x: {} for x in labels}
            for k, (pair, _, _, gold) in enumerate(tasks):
                for x in labels:
                    f = beads_f1(results[x][k], gold)
                    per_pair.setdefault(pair, {}).setdefault(x, []).append((f["strict_f1"], f["lax_f1"]))
                    for kind, count in differences(results[x][k], gold).items():
                        kinds[x][kind] = kinds[x].get(kind, 0) + count
            means = {x: [] for x in labels}
            for pair, by in per_pair.items():
                cells = []
                for x in labels:
                    st, lx = np.mean([v[0] for v in by[x]]), np.mean([v[1] for v in by[x]])
                    means[x].append((st, lx))
                    cells.append(f"{st:.3f} / {lx:.3f}")
                print(f"| {pair} | " + " | ".join(cells) + " |")
            print("| **mean** | " + " | ".join(f"**{np.mean([v[0] for v in means[x]]):.3f}** / "
                                               f"**{np.mean([v[1] for v in means[x]]):.3f}**" for x in labels) + " |")
            print("| beads unlike the gold: skip / split / merge / wrong | " + " | ".join(
                " / ".join(str(kinds[x][k]) for k in ("skip where gold aligns", "split", "merge", "wrong"))
                for x in labels) + " |")
            print("| s per 1,000 sentence pairs (vectors given) | " + " | ".join(
                f"{1000 * seconds[x] / sentences:.2f}" for x in labels) + " |")
        if stored is not None:
            stored.parent.mkdir(parents=True, exist_ok=True)
            np.savez(stored, texts=np.array(list(cache)), vectors=np.stack(list(cache.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
