"""Language bias in a mixed-language collection (issue 56): does the query's own language win over meaning?

XQuAD's 240 paragraphs (and 48 articles), each concept in one of --pool languages in rotation (paragraph i in
pool[i % len(pool)]): the mixed pool. The same 240 in one language each: the single-language pools. The same
questions (one per paragraph, the first, so 240 queries; or --questions N) asked in each of --queries languages.
Ranking: `hmde search`'s default on a multi-vector index (a document's best sentence + 0.5 x its `mean` vector's
cosine), computed exactly in numpy from the model's sentence vectors (the flat index's ranking; the vectors are
embedded once and cached in --work).

For each query language it prints: MRR@10 in the mixed pool, the average MRR@10 over the single-language pools,
their difference, and the share of top-1 hits in the query's language against the share of answers in it
(the bias ratio: 1 is none). Each --variant is a way of removing the bias, fitted on the collection itself:

- ``none``: today's default;
- ``center``: each vector minus its language's mean (sentences and documents: their document's language's; the
  query: its own language's, given);
- ``subspace``: every vector (queries too, no language needed) with the span of the collection's centred
  language means projected out (LAWDR's language directions, from the languages' means);
- ``subspace+center``;
- ``query-subspace``: the queries alone projected (q.Ps = Pq.s: the same scores but for each stored vector's
  norm), so an index keeps its vectors and only records the basis;
- ``calibrate-z`` / ``calibrate-mean`` (alone or after ``+`` with one of the above): each query's scores
  standardised (or only centred) within each document language: a monotone change inside one language, so a
  single-language pool ranks exactly as before;
- ``lawdr-K``: LAWDR's per-language debiasing: each language's mean and its K dominant directions (of its centred
  sentence vectors) removed from its vectors; the query's with its own language's (given).
- ``same-B`` / ``same-spread-G`` / ``same-centroid-G`` (after ``+``): calibration by the query's language (given):
  the documents in it lose a constant B, or G x the query's match strength (its top score over the mean score
  of all documents, or over the score of the collection's mean sentence); a collection in one language ranks
  exactly as before;
- ``affinity-K-B`` (after ``+``): each document loses B x how much nearer its K nearest documents in the
  query's language are than its K nearest in all (CSLS's neighbourhood term within a language).

``--question 1`` (or 2) asks each paragraph's second (third) question instead of its first: a setting chosen on
the first questions is checked on questions it was not chosen on.

    python benchmarks/language_bias.py --data ../shared/data --work runs/bias
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from hmde.index.language_debias import calibrate, orthonormal_rows, project_out
from hmde.text.coverage import language_code

XQUAD = {"en": "eng", "el": "ell", "hi": "hin", "vi": "vie", "de": "deu", "ru": "rus", "zh": "zho", "ar": "ara",
         "es": "spa", "th": "tha", "tr": "tur", "ro": "ron"}
DOC_WEIGHT = 0.5


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def xquad(data: Path, lang: str, unit_kind: str, which: int = 0):
    """(documents, questions, each question's answer, each document's article): the article says which wrong hits
    are neighbours on the answer's own subject. ``which``: the paragraph's question asked (0: its first; a
    paragraph with fewer keeps its last), so a setting chosen on one set of questions can be checked on another."""
    with open(data / "eval" / "xquad" / f"xquad.{lang}.json", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    questions = [p["qas"][min(which, len(p["qas"]) - 1)]["question"] for a in articles for p in a["paragraphs"]]
    article_of = [k for k, a in enumerate(articles) for _ in a["paragraphs"]]  # each paragraph's (question's)
    if unit_kind == "paragraph":
        texts = [p["context"] for a in articles for p in a["paragraphs"]]
        return texts, questions, list(range(len(texts))), article_of
    texts = ["\n".join(p["context"] for p in a["paragraphs"]) for a in articles]
    return texts, questions, article_of, list(range(len(texts)))


BIBLE_CHAPTERS = 120


def bible(data: Path, langs: list[str]):
    """Bible pools (issue 56): the first BIBLE_CHAPTERS chapters that every one of ``langs`` has with as many
    verses; a chapter's middle verse is the query (in the query's language) and is left out of the chapter in
    every language, so no query is its document's own sentence. Returns {lang: (chapters as verse lists, queries)}
    and the answers (query i -> chapter i)."""
    import gzip

    books = {}
    for lang in langs:
        with gzip.open(data / "bible" / f"{lang}.jsonl.gz", "rt", encoding="utf-8") as f:
            books[lang] = {r["concept"]: r["verses"] for r in map(json.loads, f)}
    first = books[langs[0]]
    chapters = [c for c in first if all(c in books[x] and len(books[x][c]) == len(first[c]) >= 5 for x in langs)]
    chapters = chapters[:BIBLE_CHAPTERS]
    return {lang: middle_as_query([books[lang][c] for c in chapters]) for lang in langs}, list(range(len(chapters)))


def middle_as_query(units: list[list[str]], leave_out: bool = True) -> tuple[list[list[str]], list[str]]:
    """Each unit's middle sentence as its query, left out of the unit (``leave_out``) or kept in: (units, queries)."""
    mid = [len(u) // 2 for u in units]
    kept = [u[:k] + u[k + 1:] if leave_out else u for u, k in zip(units, mid)]
    return kept, [u[k] for u, k in zip(units, mid)]


def pud(data: Path, langs: list[str], leave_out: bool = True):
    """PUD pools (issue 64; news and Wikipedia, as the held-out news table): the documents of at least 3 sentences
    that every one of ``langs`` has with as many; a document's middle sentence is the query (in the query's language)
    and is left out of the document in every language, as :func:`bible` does with a chapter's middle verse.
    Returns {lang: (documents as sentence lists, queries)} and the answers (query i -> document i)."""
    import gzip

    docs = {}
    for lang in langs:
        with gzip.open(data / "eval" / "pud" / f"{lang}.jsonl.gz", "rt", encoding="utf-8") as f:
            docs[lang] = {r["concept"]: r["sentences"] for r in map(json.loads, f)}
    first = docs[langs[0]]
    concepts = [c for c in first if all(c in docs[x] and len(docs[x][c]) == len(first[c]) >= 3 for x in langs)]
    return ({lang: middle_as_query([docs[lang][c] for c in concepts], leave_out) for lang in langs},
            list(range(len(concepts))))


class Cache:
    """Sentence vectors of each (language, unit kind) collection and query vectors, embedded once."""

    def __init__(self, model_name: str, work: Path):
        self.model_name, self.work, self._model = model_name, work, None
        work.mkdir(parents=True, exist_ok=True)

    @property
    def model(self):
        if self._model is None:
            from hmde.encoders.model_loading import load_model

            self._model = load_model(self.model_name, "cpu")[1]
        return self._model

    def documents(self, key: str, texts: list[str], lang: str):
        path = self.work / f"docs-{key}.npz"
        if not path.exists():
            from hmde.methods.vectorizer import DocumentVectorizer

            _, units, sents = DocumentVectorizer(self.model, "mean").encode_with_sentences(texts, [lang] * len(texts))
            counts = np.array([len(u) for u in units])
            np.savez(path, vectors=np.concatenate(sents).astype(np.float32), counts=counts)
        data = np.load(path)
        return unit(data["vectors"]), data["counts"]

    def queries(self, key: str, texts: list[str]):
        path = self.work / f"queries-{key}.npy"
        if not path.exists():
            from hmde.methods.vectorizer import encode_query_texts

            np.save(path, np.asarray(encode_query_texts(self.model, texts), np.float32))
        return unit(np.load(path))


def rank(q: np.ndarray, sentences: np.ndarray, owners: np.ndarray, docs: np.ndarray,
         doc_langs: np.ndarray | None = None, calibrate: str = "", q_lang: str = "",
         neighbours: tuple[int, float] | None = None, same: tuple[str, float] | None = None,
         detected: np.ndarray | None = None, extra: np.ndarray | None = None) -> np.ndarray:
    """(Q, D) order of documents by best sentence + DOC_WEIGHT x the document vector's cosine; ``calibrate``
    ("z" or "mean"): each query's scores standardised within each document language (over that language's
    documents, or a sample of at most --calibration-sample of them)."""
    sims = q @ sentences.T
    best = np.full((len(q), len(docs)), -np.inf, np.float32)
    np.maximum.at(best.T, owners, sims.T)
    scores = best + DOC_WEIGHT * (q @ docs.T)
    if neighbours and doc_langs is not None:
        scores = scores - neighbours[1] * language_affinity(docs, doc_langs, q_lang, neighbours[0])
    if calibrate and doc_langs is not None:  # per document language first, then by the query's (same-*)
        rng = np.random.default_rng(0)
        for lang in set(doc_langs.tolist()):
            cols = np.flatnonzero(doc_langs == lang)
            sample = cols if len(cols) <= SAMPLE[0] else rng.choice(cols, SAMPLE[0], replace=False)
            if calibrate == "median":
                mean, std = np.median(scores[:, sample], axis=1, keepdims=True), 1.0
            else:
                mean = scores[:, sample].mean(1, keepdims=True)
                std = scores[:, sample].std(1, keepdims=True) if calibrate == "z" else 1.0
            scores[:, cols] = (scores[:, cols] - mean) / np.maximum(std, 1e-6)
    if same and doc_langs is not None:
        # each query's language as given, or (--detect) as hmde detects it: (Q, D) documents in it
        mine = (doc_langs[None, :] == q_lang) if detected is None else \
            np.array([[language_code(x) for x in doc_langs]]) == detected[:, None]
        scores = scores - same_language_penalty(q, scores, same, sentences, mine)
    if extra is not None:  # (Q, D) added to the final scores, or a function of them (crosslingual_gap.py --bm25-score)
        scores = extra(scores) if callable(extra) else scores + extra
    return np.argsort(-scores, axis=1, kind="stable")


SAMPLE = [10**9]


def language_affinity(docs: np.ndarray, doc_langs: np.ndarray, q_lang: str, k: int) -> np.ndarray:
    """(D,) how much closer each document is to the query language's documents than to the collection's: the
    mean cosine of its k nearest documents in the query's language minus that of its k nearest in all (CSLS's
    neighbourhood term, taken within one language). Zero for a collection in one language (either it is the
    query's, or the query's holds no document)."""
    sims = docs @ docs.T
    np.fill_diagonal(sims, -np.inf)
    cols = np.flatnonzero(doc_langs == q_lang)
    if len(cols) == 0 or len(cols) == len(docs):
        return np.zeros(len(docs), np.float32)

    def top_mean(m):  # at most one -inf a row (the document itself), so k <= columns - 1 keeps it out
        kk = min(k, m.shape[1] - 1)
        return np.sort(m, axis=1)[:, -kk:].mean(1)

    return top_mean(sims[:, cols]) - top_mean(sims)


def same_language_penalty(q: np.ndarray, scores: np.ndarray, same: tuple[str, float], sentences: np.ndarray,
                          mine: np.ndarray) -> np.ndarray:
    """(Q, D) what ``same-*`` takes from the scores of the documents in the query's language (``mine``): a constant
    (``same-B``), or G x the query's match strength, its top score over a baseline: the mean score of all the
    documents (``same-spread-G``), or the score of the collection's mean sentence, (1 + DOC_WEIGHT) q.mean, which
    an index can compute from what it records (``same-centroid-G``). A constant within one language: a
    collection in one language ranks exactly as before."""
    kind, g = same
    mine = np.broadcast_to(mine, scores.shape)
    if kind == "spread":  # what an index applies (hmde.index.language_debias.calibrate), the mean over a sample
        rng = np.random.default_rng(0)
        cols = np.arange(scores.shape[1])
        sample = cols if len(cols) <= SAMPLE[0] else rng.choice(cols, SAMPLE[0], replace=False)
        return np.stack([scores[i] - calibrate(scores[i], mine[i], scores[i, sample].mean(), g)
                         for i in range(len(scores))])
    if kind == "constant":
        strength = np.ones((len(scores), 1), np.float32)
    else:
        strength = scores.max(1, keepdims=True) - (1 + DOC_WEIGHT) * (q @ sentences.mean(0))[:, None]
    return g * strength * mine


def same_language(variant: str) -> tuple[str, float] | None:
    """``same-B``, ``same-spread-G``, ``same-centroid-G``: see :func:`same_language_penalty`."""
    for part in variant.split("+"):
        if part.startswith("same-"):
            bits = part.split("-")
            return ("constant", float(bits[1])) if len(bits) == 2 else (bits[1], float(bits[2]))
    return None


def neighbourhood(variant: str) -> tuple[int, float] | None:
    """``affinity-K-B``: subtract B x :func:`language_affinity` over K neighbours."""
    for part in variant.split("+"):
        if part.startswith("affinity-"):
            _, k, b = part.split("-")
            return int(k), float(b)
    return None


def mrr(order: np.ndarray, answer: np.ndarray, k: int = 10) -> float:
    hit = order[:, :k] == answer[:, None]
    ranks = np.where(hit.any(1), hit.argmax(1) + 1, 0)
    return float(np.mean(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)))


def language_subspace(vectors: np.ndarray, langs: np.ndarray) -> np.ndarray:
    """The basis an index of these sentence vectors records (:class:`hmde.index.language_debias.LanguageStats`):
    the span of the languages' centred mean vectors, as a search removes it."""
    from hmde.index.language_debias import LanguageStats

    stats = LanguageStats(vectors.shape[1])
    codes = sorted(set(langs.tolist()))
    stats.update(codes, [vectors[langs == c] for c in codes])
    return stats.basis()


def own_directions(s: np.ndarray, langs: np.ndarray, k: int) -> dict:
    """Each language's mean and the K dominant directions of its centred vectors: {lang: (mean, (K, dim))}."""
    out = {}
    for c in sorted(set(langs.tolist())):
        mean = s[langs == c].mean(0)
        out[c] = (mean, np.linalg.svd(s[langs == c] - mean, full_matrices=False)[2][:k])
    return out


def wider_subspace(variant: str, s: np.ndarray, langs: np.ndarray) -> np.ndarray:
    """The subspace and more: ``lir-K`` adds every language's own K principal directions (LIR's union);
    ``inlp-K`` adds, K times, the directions of a logistic-regression language classifier trained on the
    vectors with what is removed so far removed (iterative null-space projection). One language: nothing."""
    from sklearn.linear_model import LogisticRegression

    codes = sorted(set(langs.tolist()))
    basis = language_subspace(s, langs)
    if len(codes) < 2:
        return basis
    k = int(variant.split("-")[1])
    if variant.startswith("lir-"):
        return orthonormal_rows(np.concatenate([basis, *(top for _, top in own_directions(s, langs, k).values())]))
    for _ in range(k):
        x = project_out(s, basis)
        weights = LogisticRegression(C=1000.0, max_iter=1000).fit(x, langs).coef_
        weights = project_out(weights - weights.mean(0) if len(codes) > 2 else weights, basis)
        weights = weights / np.linalg.norm(weights, axis=1, keepdims=True).clip(1e-12)  # its scale is C's, not ours
        basis = orthonormal_rows(np.concatenate([basis, weights]))
    return basis


def apply(variant: str, sentences, sentence_langs, q, q_lang):
    """The variant's vectors: (sentences, queries), fitted on the collection's sentences."""
    s, qq = sentences, q
    for name in ("calibrate-z", "calibrate-mean", "calibrate-median"):
        variant = variant.replace(name, "")
    variant = "+".join(p for p in variant.split("+") if p and not p.startswith(("affinity-", "same-"))) or "none"
    if variant == "query-subspace":  # the queries alone projected: the stored vectors stay as they are
        return s, unit(project_out(q, language_subspace(sentences, sentence_langs)))
    if variant.startswith("lawdr-"):  # LAWDR's per-language debiasing: its mean and its k dominant directions out
        fitted = own_directions(s, sentence_langs, int(variant.split("-")[1]))
        out = np.empty_like(s)
        for c, (mean, top) in fitted.items():
            rows = sentence_langs == c
            out[rows] = project_out(s[rows] - mean, top)
        mean, top = fitted.get(q_lang, (np.zeros(s.shape[1], np.float32), np.zeros((0, s.shape[1]), np.float32)))
        return unit(out), unit(project_out(qq - mean, top))
    if variant.startswith(("lir-", "inlp-")):  # more directions removed with the subspace, one map for all
        basis = wider_subspace(variant, sentences, sentence_langs)
        return unit(project_out(s, basis)), unit(project_out(qq, basis))
    if "subspace" in variant:
        basis = language_subspace(sentences, sentence_langs)
        s, qq = project_out(s, basis), project_out(qq, basis)
    if "center" in variant:
        means = {c: s[sentence_langs == c].mean(0) for c in set(sentence_langs.tolist())}
        s = s - np.stack([means[c] for c in sentence_langs])
        if q_lang in means:
            qq = qq - means[q_lang]
    return unit(s), unit(qq)


def calibration(variant: str) -> str:
    return "z" if "calibrate-z" in variant else "mean" if "calibrate-mean" in variant else \
        "median" if "calibrate-median" in variant else ""


def load_texts(data: Path, unit_kind: str, langs: list[str], question: int = 0):
    """Every language's documents and questions of a dev pool (Bible chapters, or XQuAD paragraphs or articles),
    the answers, and the XQuAD articles of the answers (None for the Bible): {lang: texts}, {lang: questions},
    answers, articles."""
    texts, questions, articles = {}, {}, None
    if unit_kind in ("chapter", "pud", "pud-in"):
        loaded, answer = (bible(data, sorted(set(langs))) if unit_kind == "chapter"
                          else pud(data, sorted(set(langs)), leave_out=unit_kind == "pud"))
        for lang, (chapters, verses) in loaded.items():
            texts[lang], questions[lang] = chapters, verses
        return texts, questions, answer, articles
    for lang in sorted(set(langs)):
        texts[lang], questions[lang], answer, articles = xquad(data, lang, unit_kind, question)
    return texts, questions, answer, articles


def evaluate(args) -> None:
    SAMPLE[0] = args.calibration_sample
    data, cache = Path(args.data), Cache(args.model, Path(args.work))
    pool = args.pool.split(",")
    asked = args.queries.split(",")
    texts, questions, answer, articles = load_texts(data, args.unit, pool + asked, args.question)
    # a wrong top hit of the answer's own article is a neighbour on the same subject (paragraphs only)
    subject = np.array(articles) if args.unit == "paragraph" else None
    answer = np.array(answer)[:args.questions]
    n_docs = len(texts[pool[0]])
    per_lang = {lang: cache.documents(f"{args.unit}-{lang}", texts[lang], XQUAD.get(lang, lang)) for lang in pool}
    starts = {lang: np.concatenate([[0], np.cumsum(c)[:-1]]) for lang, (_, c) in per_lang.items()}

    def collection(choice: list[str]):
        """Document i in language choice[i]: its sentences, owners, the sentences' languages."""
        rows, owners, langs = [], [], []
        for i, lang in enumerate(choice):
            vectors, counts = per_lang[lang]
            rows.append(vectors[starts[lang][i]:starts[lang][i] + counts[i]])
            owners += [i] * counts[i]
            langs += [lang] * counts[i]
        return np.concatenate(rows), np.array(owners), np.array(langs)

    mixed_choice = [pool[i % len(pool)] for i in range(n_docs)]
    print(f"{'Bible' if args.unit == 'chapter' else 'XQuAD'} {args.unit}s ({n_docs}), {len(answer)} questions, pool {'/'.join(pool)} in rotation; "
          f"{args.model}; best sentence + {DOC_WEIGHT} x mean")
    print("| variant | query | mixed MRR@10 | single-language pools MRR@10 (mean) | mixed - single | top-1 in the "
          "query's language / answers in it | ratio | wrong top-1 in the query's language: of the answer's article "
          "/ all |\n|---|---|---|---|---|---|---|---|")
    summary = {}
    for variant in args.variants.split(","):
        for qlang in asked:
            asked_as = f"{args.unit}-{qlang}" + (f"-q{args.question}" if args.question else "")
            q = cache.queries(asked_as, questions[qlang])[:len(answer)]
            detected = None
            if args.detect:  # hmde's language identifier, as a search that is not told the language
                from hmde.text.language_id import detect_languages

                detected = np.array([x or "" for x in detect_languages(questions[qlang][:len(answer)])])
            singles = []
            for lang in pool:
                s, owners, slangs = collection([lang] * n_docs)
                s2, q2 = apply(variant, s, slangs, q, qlang)
                docs = unit(np.stack([s2[owners == i].mean(0) for i in range(n_docs)]))
                singles.append(mrr(rank(q2, s2, owners, docs, np.array([lang] * n_docs), calibration(variant),
                                        qlang, neighbourhood(variant), same_language(variant), detected), answer))
            s, owners, slangs = collection(mixed_choice)
            s2, q2 = apply(variant, s, slangs, q, qlang)
            docs = unit(np.stack([s2[owners == i].mean(0) for i in range(n_docs)]))
            doc_lang = np.array(mixed_choice)
            order = rank(q2, s2, owners, docs, doc_lang, calibration(variant), qlang, neighbourhood(variant),
                         same_language(variant), detected)
            mixed = mrr(order, answer)
            top1_share = float(np.mean(doc_lang[order[:, 0]] == qlang))
            answer_share = float(np.mean(doc_lang[answer] == qlang))
            ratio = top1_share / answer_share if answer_share else float("nan")
            single = float(np.mean(singles))
            summary[(variant, qlang)] = (mixed, single, ratio)
            wrong = (order[:, 0] != answer) & (doc_lang[order[:, 0]] == qlang)
            neighbours = f"{int(np.sum(wrong & (subject[order[:, 0]] == subject[answer])))} / {int(wrong.sum())}" \
                if subject is not None else "–"
            print(f"| {variant} | {qlang} | {mixed:.3f} | {single:.3f} | {mixed - single:+.3f} | "
                  f"{top1_share:.3f} / {answer_share:.3f} | {ratio:.2f} | {neighbours} |", flush=True)
    (Path(args.work) / f"summary-{args.unit}.json").write_text(json.dumps(
        {f"{v}|{q}": list(x) for (v, q), x in summary.items()}, indent=1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--work", default="runs/bias")
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--unit", choices=["paragraph", "article", "chapter", "pud", "pud-in"], default="paragraph",
                   help="chapter: Bible pools (--pool eng,spa,zho,hye,guj,swh --queries ...,por: ISO 639-3)")
    p.add_argument("--pool", default="en,el,hi,vi,de,ru")
    p.add_argument("--queries", default="en,el,hi,vi,de,ru,zh")
    p.add_argument("--questions", type=int, default=240)
    p.add_argument("--detect", action="store_true", help="same-*: each query's language detected as a search "
                   "detects it (hmde.text.language_id), not given")
    p.add_argument("--question", type=int, default=0, help="XQuAD: which question of each paragraph is asked (0: the "
                   "first; 1: the second, to check a setting chosen on the first)")
    p.add_argument("--variants", default="none,center,subspace,subspace+center")
    p.add_argument("--calibration-sample", type=int, default=10**9, help="calibrate-*: documents per language the "
                   "statistics are taken over (default: all)")
    evaluate(p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
