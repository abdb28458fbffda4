"""The cross-lingual gap, as a dev table (issue 64): a query finds its document less well across languages than
within one. The same documents (XQuAD paragraphs, or Bible chapters or PUD's news and Wikipedia documents with their
middle verse or sentence as the query, left out of the document in every language) searched three ways by the same
queries: all in the query's language (monolingual), all in one other language (cross-lingual, per language pair),
and mixed over the pool's languages in rotation (hmde's default there: the language subspace and the query-language
calibration). Ranking: ``hmde search``'s default on a multi-vector
index (best sentence + 0.5 x the document vector), computed exactly in numpy from the model's sentence vectors
(benchmarks/language_bias.py's loaders, cache and ranking: the vectors are embedded once into --work).

``--hubness B1,B2,...``: each sentence's score loses B x its hubness, the mean cosine of the sentence with its
``--hub-k`` nearest sentences of other documents in the collection (CSLS's neighbourhood term, computable when an
index is built): a short generic sentence close to everything ("CNN reported.") should not win a document for an
unrelated query. B = 0 is today's ranking.

The gap to close: the mean over the query languages of (monolingual - cross-lingual mean) and (monolingual - mixed).

    python benchmarks/crosslingual_gap.py --data ../shared/data --work runs/bias --unit paragraph
    python benchmarks/crosslingual_gap.py --unit chapter --pool eng,spa,zho,hye,guj,swh --queries eng,spa,zho
    python benchmarks/crosslingual_gap.py --unit pud --pool eng,deu,rus,zho,ara,hin --queries eng,deu,zho,ara
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from language_bias import XQUAD, Cache, apply, load_texts, mrr, rank, same_language, unit  # noqa: E402


def hubness(sentences: np.ndarray, owners: np.ndarray, k: int) -> np.ndarray:
    """(N,) each sentence's mean cosine with its k nearest sentences of other documents."""
    sims = sentences @ sentences.T
    sims[owners[:, None] == owners[None, :]] = -np.inf
    k = min(k, max(1, len(sentences) - 1))
    top = np.partition(sims, -k, axis=1)[:, -k:]
    return np.where(np.isfinite(top), top, 0.0).mean(1).astype(np.float32)


def ranked(q, s, owners, n_docs, doc_langs, qlang, variant: str, beta: float, hub: np.ndarray | None,
           extra: np.ndarray | None = None):
    """The document order of ``variant`` (none, or the default's subspace+same-spread-0.15) with the sentences'
    scores lowered by ``beta`` x their hubness."""
    s2, q2 = apply(variant, s, doc_langs[owners], q, qlang)
    docs = unit(np.stack([s2[owners == i].mean(0) for i in range(n_docs)]))
    if not beta:
        return rank(q2, s2, owners, docs, doc_langs, "", qlang, None, same_language(variant), extra=extra)
    # a hub-corrected sentence score: cos(q, s) - beta x hub(s); rank() takes max over a document's sentences of
    # q.s, so the correction is folded in as an extra dimension: [q, -beta] . [s, hub] = q.s - beta x hub
    s3 = np.concatenate([s2, hub[:, None]], 1)
    q3 = np.concatenate([q2, np.full((len(q2), 1), -beta, np.float32)], 1)
    docs3 = np.concatenate([docs, np.zeros((n_docs, 1), np.float32)], 1)
    return rank(q3, s3, owners, docs3, doc_langs, "", qlang, None, same_language(variant))


class LexicalScore:
    """``--bm25-score W``: each document's BM25 score for the query over the query's best, times W, added to the
    documents in the query's own language only (the other languages' texts share no words with it)."""

    def __init__(self, capped: bool = False):
        self.folder, self.built, self.capped = None, {}, capped

    def extra(self, weight: float, key: str, documents: list[str], queries: list[str], doc_langs, qlang):
        from hmde.index.lexical import bm25_search, build_bm25, load_bm25

        if not weight:
            return None
        if key not in self.built:
            self.folder = self.folder or tempfile.TemporaryDirectory()
            build_bm25(documents, Path(self.folder.name) / key)
            self.built[key] = load_bm25(Path(self.folder.name) / key, len(documents))
        out = np.zeros((len(queries), len(documents)), np.float32)
        for qi, hits in enumerate(bm25_search(self.built[key], queries, len(documents), len(documents))):
            for row, score in hits:
                out[qi, row] = score
        mine = (np.asarray(doc_langs) == qlang)[None, :]
        out *= mine
        out /= np.maximum(out.max(1, keepdims=True), 1e-9)
        if not self.capped:
            return weight * out

        def capped(scores):  # hmde.index.lexical_bonus: no document of the query's language passes another's
            new = scores.copy()
            for qi in range(len(scores)):
                cap = np.inf
                for j in np.argsort(-scores[qi], kind="stable"):
                    if mine[0, j]:
                        new[qi, j] = max(scores[qi, j], min(scores[qi, j] + weight * out[qi, j], cap - 1e-6))
                    else:
                        cap = scores[qi, j]
            return new
        return capped


class Lexical:
    """BM25 fused into the table's ranking (``--bm25-fusion W``): each collection's BM25 index built by
    hmde.index.lexical into a temporary folder, its ranking fused with the multi-vector one by that module's
    reciprocal rank fusion (weights 1 and W, k = 60). (``hmde search --hybrid`` fuses BM25 with the document-vector
    ranking instead.)"""

    def __init__(self, weight: float):
        self.weight, self.folder, self.built = weight, None, {}

    def fuse(self, order: np.ndarray, key: str, documents: list[str], queries: list[str]) -> np.ndarray:
        from hmde.index.lexical import bm25_search, build_bm25, load_bm25, reciprocal_rank_fusion

        if not self.weight:
            return order
        if key not in self.built:
            self.folder = self.folder or tempfile.TemporaryDirectory()  # removed with this object
            build_bm25(documents, Path(self.folder.name) / key)
            self.built[key] = load_bm25(Path(self.folder.name) / key, len(documents))
        hits = bm25_search(self.built[key], queries, len(documents), len(documents))
        return np.array([[row for row, _ in reciprocal_rank_fusion([dense.tolist(), [r for r, _ in lexical]],
                                                                   [1.0, self.weight])]
                         for dense, lexical in zip(order, hits)])


def evaluate(args) -> dict:
    data, cache = Path(args.data), Cache(args.model, Path(args.work))
    pool, asked = args.pool.split(","), args.queries.split(",")
    texts, questions, answer, _ = load_texts(data, args.unit, pool + asked, args.question)
    answer = np.array(answer)[:args.questions]
    n_docs = len(texts[pool[0]])
    langs = sorted(set(pool) | set(asked))
    per_lang = {x: cache.documents(f"{args.unit}-{x}", texts[x], XQUAD.get(x, x)) for x in langs}
    starts = {x: np.concatenate([[0], np.cumsum(c)[:-1]]) for x, (_, c) in per_lang.items()}

    def collection(choice):
        rows, owners = [], []
        for i, x in enumerate(choice):
            vectors, counts = per_lang[x]
            rows.append(vectors[starts[x][i]:starts[x][i] + counts[i]])
            owners += [i] * counts[i]
        return np.concatenate(rows), np.array(owners)

    betas = [float(b) for b in args.hubness.split(",")]
    lexical = Lexical(args.bm25_fusion)
    scored = LexicalScore(args.bm25_capped)
    weights = [float(w) for w in args.bm25_score.split(",")] if args.bm25_score else None
    if weights:  # the table's first column is the BM25 weight W instead (hubness 0)
        betas, hub_off = weights, True
    else:
        hub_off = False

    def text(x, i):
        return " ".join(texts[x][i]) if isinstance(texts[x][i], list) else texts[x][i]
    mixed_choice = [pool[i % len(pool)] for i in range(n_docs)]
    hubs = {}
    results = {}
    for beta in betas:
        for qlang in asked:
            q = cache.queries(f"{args.unit}-{qlang}" + (f"-q{args.question}" if args.question else ""),
                              questions[qlang])[:len(answer)]
            row = {}
            for dlang in [qlang] + [x for x in pool if x != qlang]:
                s, owners = collection([dlang] * n_docs)
                if beta and not hub_off and ("single", dlang) not in hubs:
                    hubs[("single", dlang)] = hubness(s, owners, args.hub_k)
                extra = scored.extra(beta if hub_off else 0, dlang, [text(dlang, i) for i in range(n_docs)],
                                     questions[qlang][:len(answer)], [dlang] * n_docs, qlang)
                order = ranked(q, s, owners, n_docs, np.array([dlang] * n_docs), qlang, "none",
                               0 if hub_off else beta, hubs.get(("single", dlang)), extra)
                order = lexical.fuse(order, dlang, [text(dlang, i) for i in range(n_docs)],
                                     questions[qlang][:len(answer)])
                row[dlang] = mrr(order, answer)
            s, owners = collection(mixed_choice)
            if beta and not hub_off and "mixed" not in hubs:
                hubs["mixed"] = hubness(s, owners, args.hub_k)
            extra = scored.extra(beta if hub_off else 0, "mixed", [text(x, i) for i, x in enumerate(mixed_choice)],
                                 questions[qlang][:len(answer)], mixed_choice, qlang)
            order = ranked(q, s, owners, n_docs, np.array(mixed_choice), qlang, args.mixed_variant,
                           0 if hub_off else beta, hubs.get("mixed"), extra)
            order = lexical.fuse(order, "mixed", [text(x, i) for i, x in enumerate(mixed_choice)],
                                 questions[qlang][:len(answer)])
            row["mixed"] = mrr(order, answer)
            results[(beta, qlang)] = row
    name = {"chapter": "Bible chapters", "pud": "PUD documents, the query left out",
            "pud-in": "PUD documents, the query in its document"}.get(args.unit, f"XQuAD {args.unit}s")
    print(f"{name} ({n_docs}), {len(answer)} "
          f"queries a language, {args.model}; MRR@10; mixed: {'/'.join(pool)} in rotation, {args.mixed_variant}"
          + (f"; fused with BM25 (RRF, weight {args.bm25_fusion:g})" if args.bm25_fusion else "") + "\n")
    print("| hubness B | query | mono | " + " | ".join(f"-> {x}" for x in pool) + " | cross mean | mixed | "
          "mono - cross | mono - mixed |")
    print("|---|---|---|" + "---|" * len(pool) + "---|---|---|---|")
    summary = {}
    for beta in betas:
        gaps = []
        for qlang in asked:
            row = results[(beta, qlang)]
            cross = float(np.mean([row[x] for x in pool if x != qlang]))
            gaps.append((row[qlang] - cross, row[qlang] - row["mixed"], row[qlang], cross, row["mixed"]))
            cells = " | ".join("–" if x == qlang else f"{row[x]:.3f}" for x in pool)
            print(f"| {beta:g} | {qlang} | {row[qlang]:.3f} | {cells} | {cross:.3f} | {row['mixed']:.3f} | "
                  f"{row[qlang] - cross:+.3f} | {row[qlang] - row['mixed']:+.3f} |")
        mean = np.mean(gaps, 0)
        summary[beta] = {"mono": mean[2], "cross": mean[3], "mixed": mean[4], "gap_cross": mean[0],
                         "gap_mixed": mean[1]}
        print(f"| {beta:g} | **mean** | {mean[2]:.3f} | " + " | ".join("" for _ in pool) +
              f" | {mean[3]:.3f} | {mean[4]:.3f} | {mean[0]:+.3f} | {mean[1]:+.3f} |", flush=True)
    (Path(args.work) / f"gap-{args.unit}.json").write_text(json.dumps(
        {str(b): {k: float(v) for k, v in x.items()} for b, x in summary.items()}, indent=1))
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--work", default="runs/bias")
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--unit", choices=["paragraph", "article", "chapter", "pud", "pud-in"], default="paragraph")
    p.add_argument("--pool", default="en,el,hi,vi,de,ru")
    p.add_argument("--queries", default="en,el,de,hi")
    p.add_argument("--questions", type=int, default=240)
    p.add_argument("--question", type=int, default=0)
    p.add_argument("--hubness", default="0", help="comma-separated B values (0: today's ranking)")
    p.add_argument("--hub-k", type=int, default=10)
    p.add_argument("--mixed-variant", default="subspace+same-spread-0.15",
                   help="the mixed pool's debiasing (benchmarks/language_bias.py's variants; default: hmde's)")
    p.add_argument("--bm25-score", default="", help="comma-separated W values: each document in the query's own "
                   "language gains W x its BM25 score over the query's best (the table's first column is W)")
    p.add_argument("--bm25-capped", action="store_true", help="--bm25-score: a document of the query's language "
                   "never passes one of another language the dense ranking put above it (hmde's --hybrid)")
    p.add_argument("--bm25-fusion", type=float, default=0.0, help="fuse each ranking with BM25's by reciprocal rank "
                   "fusion, this weight for BM25 (0: dense only)")
    evaluate(p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
