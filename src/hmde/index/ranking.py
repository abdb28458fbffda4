"""hmde's ranking, written once above the stores (:mod:`hmde.index.store_protocol`): what a search does with the
nearest documents and sentences a store finds. The language subspace and the query-language calibration (issue 56),
the exact re-scoring of candidates, the best-sentence + document-vector fusion (:mod:`hmde.index.multivector`), BM25
fusion, and each hit's evidence. ``Index.search``, the command line, the server and the framework integrations all
reach it through a store's ``search``, so an index ranks the same in hmde's own files and in Milvus.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError
from .multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES
from ..files.places import places_of
from .records import SearchHit
from .relevance import POOL as RELEVANCE_POOL
from .scoring import cosines, exact_scores, rescaled_scores

HYBRID_POOL = 100  # candidates each ranking contributes to the fusion
DEBIASED_POOL = 200  # documents a one-vector search re-scores where the index removes its languages' directions
SENTENCE_POOL = 1000  # sentences a multi-vector search retrieves per query before scoring their documents
# IVF-PQ: its codes rank the candidates approximately, so more are re-scored exactly (10M sentences, recall@10
# of the documents against exact search: 1,000 -> 0.937, 1,500 -> 0.969, 2,000 -> 0.981; docs/scaling.md)
COMPRESSED_SENTENCE_POOL = 2000
EXACT_RESCORE = 50  # IVF-PQ: documents whose fused score is recomputed from exact vectors
GROUP_POOL, GROUP_MIN = 10, 100  # a grouped search forms its groups from the best max(10 x top_k, 100) documents


def search(store, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None,
           sentences_of: Callable | None = None, ef_search: int | None = None, nprobe: int | None = None,
           hybrid_texts: Sequence[str] | None = None, hybrid_weights: Sequence[float] = (1.0, 1.0), rrf_k: int = 60,
           multi_vector: bool | None = None, top_sentences: int = DEFAULT_TOP_SENTENCES,
           doc_weight: float = DEFAULT_DOC_WEIGHT, candidates: int | None = None,
           query_langs: Sequence[str | None] | None = None, filter=None,
           group_by: str | None = None, hybrid_mode: str = "lexical") -> list[list[SearchHit]]:
    """Hits per query, best first, from ``store``; ``lang`` keeps only documents of that language; ``filter`` (an
    expression of :mod:`hmde.index.filters`, or its tree) only the documents it matches: the top hits of those, not
    a post-filtered top (the store searches the selection).

    ``query_langs``: each query's language (None: not known); an index that records ``subspace+calibrate``
    lowers the scores of the documents in it (:func:`hmde.index.language_debias.calibrate`).
    ``sentences_of(texts, langs) -> (sentences, vectors)`` gives the best sentence of hits whose sentence vectors
    were not stored (indexes built with ``--engine ray``). ``ef_search`` (HNSW) and ``nprobe`` (IVF) trade speed for
    recall per search. ``hybrid_texts`` (the query texts): BM25 counts too; ``hybrid_mode`` "lexical" (default): the
    dense ranking with a BM25 term for documents in the query's own language (:mod:`hmde.index.lexical_bonus`),
    "rrf": the document-vector ranking fused with BM25's by reciprocal rank (:mod:`hmde.index.lexical`; a hit's score
    is then the fused score). ``multi_vector`` (default: the
    index's own kind) scores documents by their best ``top_sentences`` sentences, plus ``doc_weight`` times the
    document vector's cosine; each hit's ``evidence`` lists the sentences that scored. ``candidates``: the nearest
    sentences a multi-vector search scores per query (default: SENTENCE_POOL, COMPRESSED_SENTENCE_POOL for IVF-PQ).
    ``group_by``: one hit per value of this metadata field (a source: LangChain's ``source``, LlamaIndex's
    ``ref_doc_id``...), its best document with its evidence, from the best ``GROUP_POOL`` x ``top_k``; a document
    without the field is a group of its own.
    """
    asked = top_k
    if hybrid_mode not in ("lexical", "rrf"):
        raise HmdeError(f"hybrid must be true (BM25 within the query's language) or 'rrf', got {hybrid_mode!r}")
    lexical = hybrid_texts is not None and hybrid_mode == "lexical"
    if group_by is not None:
        top_k = max(top_k * GROUP_POOL, GROUP_MIN)
    if lexical:  # re-ranked from a pool
        top_k = max(top_k, HYBRID_POOL)
    check_tuning(store, ef_search, nprobe)
    if candidates is not None and (isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1):
        raise HmdeError(f"candidates must be a whole number >= 1, got {candidates!r}")
    meta = store.meta
    multi_vector = meta.multi_vector if multi_vector is None else multi_vector
    if multi_vector and not meta.multi_vector:
        raise HmdeError(f"index {store.path} stores one vector per document: build it with --multi-vector "
                        "to score documents by their sentences")
    if multi_vector and hybrid_texts is not None and not lexical:
        raise HmdeError("--hybrid rrf fuses BM25 with the document vectors: search without --multi-vector scoring")
    if hybrid_texts is not None:
        store.require_bm25()
    q = normalize(np.asarray(query_vectors, np.float32))
    if q.shape[1] != meta.dim:
        raise HmdeError(f"query vectors have dimension {q.shape[1]}, the index {meta.dim}: "
                        "search with the model the index was built with")
    basis = store.language_basis
    if len(basis):  # no pull towards the query's own language (hmde.index.language_debias)
        from .language_debias import project_out

        q = normalize(project_out(q, basis))
    n = meta.live
    if n == 0:
        return [[] for _ in range(len(q))]
    selection = store.select(_same_language(store, lang) if lang else None, _tree(filter))
    if selection is not None:
        if not selection.count:
            return [[] for _ in range(len(q))]
        n = selection.count
    pool = min(n, max(top_k, HYBRID_POOL)) if hybrid_texts is not None and not lexical else \
        min(n, max(top_k, RELEVANCE_POOL))
    plan = _calibration_plan(store, q, query_langs, lang, multi_vector, top_sentences, doc_weight)
    references: list = [None] * len(q)  # each query's best candidate scores: its hits' relevance reads them
    if multi_vector:
        picked, references = _multi_vector_rows(store, q, top_k, selection, top_sentences, doc_weight, ef_search,
                                                nprobe, candidates, plan)
    else:
        if plan is None:
            scores, rows = _documents(store, q, pool, selection, ef_search, nprobe)
        else:  # a larger pool re-ranked: the calibration only lowers documents in the query's language
            scores, rows = _documents(store, q, min(n, max(pool, DEBIASED_POOL)), selection, ef_search, nprobe)
            scores, rows = _recalibrated(store, plan, scores, rows, pool)
        if hybrid_texts is not None and not lexical:  # fused ranks: no score a relevance can read
            picked = _fuse(store, rows, hybrid_texts, selection, pool, top_k, hybrid_weights, rrf_k)
        else:
            found = [[(float(s), int(r)) for s, r in zip(scores[qi], rows[qi]) if r >= 0] for qi in range(len(q))]
            picked, references = [x[:top_k] for x in found], [[s for s, _ in x] for x in found]
    if lexical:
        from .lexical_bonus import lexical_rerank

        picked = [x if group_by is not None else x[:asked]
                  for x in lexical_rerank(store, picked, hybrid_texts, query_langs)]
    wanted = sorted({r for hits in picked for _, r in hits})
    records = store.records(wanted) if wanted else {}  # every query's hits read at once (Milvus: two calls, not 2Q)
    if group_by is not None:
        picked = [grouped(hits, records, group_by, asked) for hits in picked]
    from .relevance import Relevance

    scale = Relevance(meta.model, top_sentences + doc_weight if multi_vector else 1.0)
    return [_hits(store, q[qi], picked[qi], top_sentences, sentences_of, records, references[qi], scale)
            for qi in range(len(q))]


def grouped(picked: list[tuple[float, int]], records: dict, field: str, top_k: int) -> list[tuple[float, int]]:
    """The first (best) of ``picked`` of each value of the metadata ``field``, ``top_k`` of them."""
    import json

    out, seen = [], set()
    for score, row in picked:
        metadata = records[row][5] or {}
        value = metadata.get(field) if isinstance(metadata, dict) else None
        key = ("doc", records[row][0]) if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            out.append((score, row))
            if len(out) == top_k:
                break
    return out


def check_tuning(store, ef_search: int | None, nprobe: int | None) -> None:
    """``ef_search`` and ``nprobe`` where they tune something: hmde's own HNSW and IVF indexes (a Milvus index's
    parameters are set in Milvus); one line otherwise, checked before any model loads."""
    kind = store.meta.index_type
    if (ef_search or nprobe) and store.meta.store:
        raise HmdeError(f"--ef-search and --nprobe tune hmde's own FAISS indexes; {store.path} keeps its vectors in "
                        f"{store.meta.store}, whose index is tuned there")
    if (ef_search and kind != "hnsw") or (nprobe and kind not in ("ivf", "ivfpq")):
        option = "--ef-search" if ef_search else "--nprobe"
        raise HmdeError(f"{option} applies to {'HNSW' if ef_search else 'IVF'} indexes; {store.path} is {kind}")


def _tree(expression):
    from .filter_forms import to_tree

    return to_tree(expression)


def _same_language(store, lang: str) -> list[str]:
    """The language codes stored for ``lang``: every code of the same language (el finds documents stored as ell;
    ace finds those stored as ACE and ace_Latn; a script named, those written in it); a language the index lacks is
    one line."""
    from ..text.language_codes import same_language

    langs = store.languages()
    same = [x for x in langs if x == lang or same_language(lang, x)]
    if not same:
        raise HmdeError(f"the index has no documents in '{lang}' (languages: {', '.join(map(str, langs))})")
    return same


def _calibration_plan(store, q: np.ndarray, query_langs, lang: str | None, multi_vector: bool, top_sentences: int,
                      doc_weight: float):
    """Per query (language number, baseline) for :func:`hmde.index.language_debias.calibrate`, or None where
    nothing is calibrated (the index does not, no query language, one language searched)."""
    if store.meta.language_debias != "subspace+calibrate" or query_langs is None or lang:
        return None
    if len(query_langs) != len(q):
        raise HmdeError(f"{len(query_langs)} query languages for {len(q)} queries")
    from ..ground.once import once
    from .calibration import QueryLanguageCalibration

    calibration = once(store, "_calibration", lambda: QueryLanguageCalibration(store))  # once per open snapshot
    codes = calibration.plan(query_langs)
    if all(c < 0 for c in codes):
        return None
    baselines = calibration.baselines(q, multi_vector, top_sentences, doc_weight)
    return [(c, float(b)) if c >= 0 else None for c, b in zip(codes, baselines)]


def _calibrated(store, plan, qi: int, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """One query's candidate scores calibrated by its plan (unchanged where it has none)."""
    if plan is None or plan[qi] is None:
        return scores
    from .language_debias import calibrate

    code, baseline = plan[qi]
    return calibrate(scores, store._calibration.row_language[rows] == code, baseline)


def _recalibrated(store, plan, scores: np.ndarray, rows: np.ndarray, k: int):
    """(Q, k) one-vector hits re-ranked after :func:`_calibrated` (rows -1: none)."""
    scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
    for qi in range(len(rows)):
        found = rows[qi] >= 0
        scores[qi, found] = _calibrated(store, plan, qi, rows[qi][found], scores[qi, found])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)


def _documents(store, q: np.ndarray, k: int, selection, ef_search, nprobe):
    """The nearest documents by their vectors; where the index removes its languages' directions, a larger pool by
    the projected query, re-scored with each document vector's projected length, best first."""
    if not len(store.language_basis):
        return store.nearest_documents(q, k, selection, ef_search, nprobe)
    total = store.meta.live if selection is None else selection.count
    sims, rows = store.nearest_documents(q, min(total, max(k, DEBIASED_POOL)), selection, ef_search, nprobe)
    sims = np.where(rows >= 0, sims, -np.inf).astype(np.float32)
    for qi in range(len(q)):
        found = rows[qi] >= 0
        sims[qi, found] = cosines(store.document_vectors(rows[qi][found]), q[qi], store.language_basis)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, 1), np.take_along_axis(rows, order, 1)


def _fuse(store, dense_rows: np.ndarray, texts: Sequence[str], selection, pool: int, top_k: int,
          weights: Sequence[float], rrf_k: int) -> list[list[tuple[float, int]]]:
    from .lexical import bm25_search, reciprocal_rank_fusion

    retriever = store.require_bm25()
    if len(texts) != len(dense_rows):
        raise HmdeError("hybrid search needs each query's text")
    allowed = None if selection is None else selection.rows
    live = store.meta.live
    lexical = bm25_search(retriever, texts, live if allowed is not None else pool, live)
    out = []
    for qi, text_hits in enumerate(lexical):
        bm25_rows = [r for r, _ in text_hits if allowed is None or r in allowed][:pool]
        dense = [int(r) for r in dense_rows[qi] if r >= 0]
        fused = reciprocal_rank_fusion([dense, bm25_rows], weights, rrf_k)[:top_k]
        out.append([(score, row) for row, score in fused])
    return out


def _multi_vector_rows(store, q: np.ndarray, top_k: int, selection, top_sentences: int, doc_weight: float,
                       ef_search: int | None, nprobe: int | None = None, pool: int | None = None,
                       plan=None) -> list[list[tuple[float, int]]]:
    """Documents by their best sentences (:mod:`hmde.index.multivector`): the ``pool`` nearest sentences of each
    query are grouped by document; a document's score is the sum of its ``top_sentences`` best among them, plus
    ``doc_weight`` times its document vector's cosine. Where the store ranks by compressed codes the candidates are
    scored exactly from their stored vectors."""
    from .multivector import check_scoring

    check_scoring(top_sentences, doc_weight)
    basis = store.language_basis
    compressed = store.meta.index_type == "ivfpq"  # approximate codes rank the candidates: re-scored exactly
    pool = pool or (COMPRESSED_SENTENCE_POOL if compressed else SENTENCE_POOL)
    sims, rows, owners = store.nearest_sentences(q, pool, selection, ef_search, nprobe)
    # compressed codes find the candidates, and their stored vectors score them exactly; where the index removes
    # its languages' directions, the candidates' cosines with both sides projected divide by each vector's length
    # outside them: from the store's table of those lengths where its search gave exact inner products, else from
    # the vectors read back
    norms = None if compressed or not len(basis) else store.sentence_residual_norms(rows)
    if norms is not None:  # exact inner products already: divided by the rows' stored lengths
        sims = rescaled_scores(sims, rows, norms, companion=owners)
    elif compressed or len(basis):
        sims = exact_scores(store.sentence_vectors_of, rows, q, basis, companion=owners)
    found = rows >= 0
    best = [_best_sentences(owners[qi][found[qi]], sims[qi][found[qi]], top_sentences) for qi in range(len(q))]
    # every query's candidate documents (ascending), their vectors read once
    candidates = best[0][0] if len(q) == 1 else \
        np.unique(np.concatenate([np.zeros(0, np.int64)] + [u for u, _ in best]))
    doc_vectors = store.document_vectors(candidates) if doc_weight and len(candidates) else None
    # their lengths outside the languages' directions, from the store's table where it keeps one (else projected)
    doc_norms = store.document_residual_norms(candidates) if doc_vectors is not None and len(basis) else None
    out, references = [], []
    for qi, (unique, total) in enumerate(best):
        if doc_weight and len(unique):
            at = np.searchsorted(candidates, unique)
            stored = cosines(doc_vectors[at], q[qi], basis) if doc_norms is None else \
                (doc_vectors[at] @ q[qi]) / doc_norms[at]
            total = total + doc_weight * stored
            if compressed:  # the leaders' document vectors exactly, where they can be (codes approximate)
                lead = np.argsort(-total, kind="stable")[:max(5 * top_k, EXACT_RESCORE)]
                exact = store.exact_document_vectors(unique[lead])
                if exact is not None:
                    total[lead] += doc_weight * (cosines(exact, q[qi], basis) - stored[lead])
        total = _calibrated(store, plan, qi, unique, total)  # by the query's language, where the index does
        order = np.argsort(-total, kind="stable")
        out.append([(float(total[j]), int(unique[j])) for j in order[:top_k]])
        references.append(total[order[:RELEVANCE_POOL]])
    return out, references


def _best_sentences(docs: np.ndarray, scores: np.ndarray, top_sentences: int) -> tuple[np.ndarray, np.ndarray]:
    """One query's candidate documents (ascending) and the sum of each one's ``top_sentences`` best of ``scores``
    (float64), given its candidate sentences' documents ``docs`` and ``scores``, best first."""
    if top_sentences == 1:  # the default: a document's first sentence is its best (one sort, not four steps)
        unique, first = np.unique(docs, return_index=True)
        return unique, scores[first].astype(np.float64)
    order = np.argsort(docs, kind="stable")  # grouped by document, best first within each
    docs, scores = docs[order], scores[order]
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
    rank_in_doc = np.arange(len(docs)) - np.repeat(starts, np.diff(np.r_[starts, len(docs)]))
    keep = rank_in_doc < top_sentences
    unique, slot = np.unique(docs[keep], return_inverse=True)
    return unique, np.bincount(slot, weights=scores[keep], minlength=len(unique)).astype(np.float64, copy=False)


def _hits(store, q: np.ndarray, picked: list[tuple[float, int]], top_sentences: int, sentences_of,
          records: dict, reference, scale) -> list[SearchHit]:
    """One query's hits: each picked row's record (of ``records``, read for every query at once), the sentences of
    the document that score best (evidence), and its relevance given ``reference``, the query's best candidate scores
    (None: fused ranks, no relevance)."""
    relevance = scale.of([s for s, _ in picked], reference) if reference is not None else [None] * len(picked)
    records = {r: records[r] for _, r in picked}
    lacking = [r for r in records.values() if not r[3] and r[2] and r[2].strip() and sentences_of is not None]
    if lacking:  # not stored: embed these few documents' sentences now
        units, vectors = sentences_of([r[2] for r in lacking], [r[1] for r in lacking])
        for r, u, v in zip(lacking, units, vectors):
            r[3], r[4] = list(u), normalize(np.asarray(v, np.float32).reshape(len(u), store.meta.dim))
    hits = []
    for rank, (score, row) in enumerate(picked, 1):
        doc_id, dlang, text, sents, vectors, metadata = records[row]
        best, best_score, evidence, places = "", float("nan"), [], []
        if len(sents):
            sims = cosines(vectors, q, store.language_basis)  # one document's alone: its evidence never depends on
            # which other hits a search returns (one product over all hits moved the last bit with them)
            order = np.argsort(-sims, kind="stable")[:max(1, top_sentences)]
            evidence = [(sents[j], float(sims[j])) for j in order]
            best, best_score = evidence[0]
            places = places_of(text, sents, [int(j) for j in order], metadata)  # a file's pages and sections
        hits.append(SearchHit(rank, score, doc_id, dlang, best, best_score, text, evidence, metadata,
                              relevance[rank - 1], places))
    return hits
