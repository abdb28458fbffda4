"""float16 sentence vectors against float32 (issue 96, item 3), side by side in one run: the same dev collections
indexed twice with hmde-e5 and the defaults, once with ``sentence_dtype="float32"`` and once with ``"float16"``,
searched with the same queries. Prints per collection MRR@10 and recall@10 of each, the share of queries whose top
10 is the same, the largest score difference, and sentences.npy's size.

Collections (all their documents; benchmarks/answerability.py builds them): XQuAD articles (48, in German, Greek,
Hindi or English; English and Greek questions), XQuAD paragraphs (240; English questions, Spanish first sentences),
PUD (397, in German, French, Chinese or English; Spanish and Russian first sentences), MasakhaNEWS French (300
articles; their headlines).

    python benchmarks/sentence_dtype.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

NAMES = ("xquad-articles", "xquad-paragraphs", "pud", "masakhanews-fra")


def scores(results, queries) -> tuple[float, float]:
    """MRR@10 and recall@10 of ``results`` (hits per query) for ``queries`` ((text, wanted doc_id))."""
    mrr = recall = 0.0
    for hits, (_, want) in zip(results, queries):
        ids = [h.doc_id for h in hits]
        if want in ids:
            mrr += 1 / (ids.index(want) + 1)
            recall += 1
    return mrr / len(queries), recall / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", default="hmde-e5")
    parser.add_argument("--collections", nargs="+", default=list(NAMES))
    args = parser.parse_args()
    import answerability

    from hmde.index.search import Index

    collections = answerability.collections(args.data)
    work = Path(tempfile.mkdtemp(prefix="hmde-sentence-dtype-"))
    print("| collection | queries | MRR@10 float32 | MRR@10 float16 | recall@10 float32 | recall@10 float16 | "
          "same top 10 | largest score difference | sentences.npy float32 / float16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.collections:
        docs, queries = collections[name]
        out = {}
        for dtype in ("float32", "float16"):
            with Index.create(str(work / f"{name}-{dtype}"), docs, model=args.model, sentence_dtype=dtype) as index:
                out[dtype] = index.search([q for q, _ in queries], top_k=10)
        a, b = out["float32"], out["float16"]
        same = sum([h.doc_id for h in x] == [h.doc_id for h in y] for x, y in zip(a, b)) / len(queries)
        diff = max(abs(x.score - y.score) for X, Y in zip(a, b) for x, y in zip(X, Y) if x.doc_id == y.doc_id)
        (m32, r32), (m16, r16) = scores(a, queries), scores(b, queries)
        sizes = [(work / f"{name}-{d}" / "sentences.npy").stat().st_size / 1e6 for d in ("float32", "float16")]
        print(f"| {name} | {len(queries)} | {m32:.4f} | {m16:.4f} | {r32:.4f} | {r16:.4f} | {same:.3f} | {diff:.1e} | "
              f"{sizes[0]:.1f} / {sizes[1]:.1f} MB |", flush=True)


if __name__ == "__main__":
    main()
