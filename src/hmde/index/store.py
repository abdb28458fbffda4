"""A document index folder: FAISS for vectors, DuckDB for everything a hit shows.

Layout of ``INDEX_DIR``::

    index.json      model name and hash, dimension, method, index type, document count
    vectors.faiss   the FAISS index (row i = document i)
    sentences.npy   every document's sentence vectors, stacked (for the best-sentence snippet)
    docs.duckdb     table docs(row, doc_id, lang, text, sent_start, sent_count, sentences)

Queries go through the lower encoder alone (the paper's CLIR protocol). For each hit
the sentence of the document most similar to the query is shown: the hierarchical
model has the sentence vectors anyway. A build or an incremental add writes a new
folder beside the old one and swaps it in, so an interrupted run never leaves a
half-written index.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import atomic_dir
from ..errors import HmdeError, InputError
from ..similarity import normalize

INDEX_FORMAT = "hmde-index/1"
INDEX_TYPES = ("flat", "hnsw", "ivf")


@dataclass
class IndexMeta:
    model: str
    model_sha256: str | None
    dim: int
    method: str
    index_type: str
    count: int
    format: str = INDEX_FORMAT
    hnsw_m: int = 32
    ivf_lists: int = 0


@dataclass
class SearchHit:
    rank: int
    score: float
    doc_id: str
    lang: str | None
    best_sentence: str
    sentence_score: float
    text: str

    def snippet(self, width: int = 160) -> str:
        s = self.best_sentence or self.text
        return s if len(s) <= width else s[: width - 1] + "…"


def _new_faiss_index(index_type: str, dim: int, n_train: np.ndarray | None, hnsw_m: int, ivf_lists: int):
    import faiss

    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 128
        return index
    if index_type == "ivf":
        if n_train is None or len(n_train) < ivf_lists:
            raise HmdeError(f"an IVF index with {ivf_lists} lists needs at least that many documents to train on")
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, ivf_lists, faiss.METRIC_INNER_PRODUCT)
        index.train(n_train)
        index.nprobe = max(1, ivf_lists // 8)
        return index
    raise HmdeError(f"unknown index type '{index_type}' ({', '.join(INDEX_TYPES)})")


class DocumentIndex:
    """Open with :meth:`open`; create or extend with :meth:`write`."""

    def __init__(self, path: Path, meta: IndexMeta, index, sentences: np.ndarray):
        self.path, self.meta, self.index, self.sentence_vectors = path, meta, index, sentences

    # -- writing ---------------------------------------------------------------------------
    @classmethod
    def write(cls, path: str | Path, meta: IndexMeta, doc_ids: Sequence[str], langs: Sequence[str | None],
              texts: Sequence[str], doc_vectors: np.ndarray, sentences: Sequence[Sequence[str]],
              sentence_vectors: Sequence[np.ndarray], add: bool = False) -> "DocumentIndex":
        """Write a new index at ``path`` (or, with ``add``, the old one plus these documents)."""
        import duckdb
        import faiss

        path = Path(path)
        doc_vectors = normalize(doc_vectors)
        if doc_vectors.shape[1] != meta.dim:
            raise HmdeError(f"vectors have dimension {doc_vectors.shape[1]}, the index {meta.dim}")
        old = cls.open(path) if add else None
        if old is not None:
            check_compatible(old.meta, meta.model_sha256, meta.dim, path)
            known = set(old.doc_ids())
            dup = [d for d in doc_ids if d in known]
            if dup:
                raise HmdeError(f"{len(dup)} document id(s) are already in the index, e.g. '{dup[0]}'")
            meta = IndexMeta(**{**asdict(old.meta), "count": old.meta.count + len(doc_ids)})
        elif len(set(doc_ids)) != len(doc_ids):
            raise HmdeError("document ids must be unique")
        flat_sents = [np.asarray(v, np.float32).reshape(-1, meta.dim) for v in sentence_vectors]
        new_sent = normalize(np.concatenate(flat_sents)) if flat_sents and sum(len(v) for v in flat_sents) else \
            np.zeros((0, meta.dim), np.float32)
        with atomic_dir(path) as tmp:
            if old is not None:
                index = faiss.read_index(str(path / "vectors.faiss"))
                all_sent = np.concatenate([old.sentence_vectors, new_sent])
                shutil.copy(path / "docs.duckdb", tmp / "docs.duckdb")
                first_row, sent_offset = old.meta.count, len(old.sentence_vectors)
            else:
                index = _new_faiss_index(meta.index_type, meta.dim, doc_vectors, meta.hnsw_m, meta.ivf_lists)
                all_sent, first_row, sent_offset = new_sent, 0, 0
            index.add(doc_vectors)
            faiss.write_index(index, str(tmp / "vectors.faiss"))
            np.save(tmp / "sentences.npy", all_sent)
            con = duckdb.connect(str(tmp / "docs.duckdb"))
            con.execute("CREATE TABLE IF NOT EXISTS docs (row BIGINT PRIMARY KEY, doc_id VARCHAR UNIQUE, lang VARCHAR, "
                        "text VARCHAR, sent_start BIGINT, sent_count INTEGER, sentences VARCHAR[])")
            rows, start = [], sent_offset
            for i, (d, lang, text, sents) in enumerate(zip(doc_ids, langs, texts, sentences)):
                rows.append((first_row + i, d, lang, text, start, len(sents), list(sents)))
                start += len(sents)
            con.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            con.close()
            (tmp / "index.json").write_text(json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8")
        return cls.open(path)

    # -- reading ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> "DocumentIndex":
        import faiss

        path = Path(path)
        if not path.is_dir():
            raise InputError("index folder not found (build one with `hmde index build`)", path=str(path))
        meta_path = path / "index.json"
        if not meta_path.exists():
            raise InputError("not an hmde index (no index.json)", path=str(path))
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
        if raw.get("format") != INDEX_FORMAT:
            raise InputError(f"index format {raw.get('format')!r}, expected {INDEX_FORMAT!r}", path=str(meta_path))
        meta = IndexMeta(**raw)
        index = faiss.read_index(str(path / "vectors.faiss"))
        sentences = np.load(path / "sentences.npy")
        return cls(path, meta, index, sentences)

    def _query(self, sql: str, params=()):
        import duckdb

        con = duckdb.connect(str(self.path / "docs.duckdb"), read_only=True)
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def doc_ids(self) -> list[str]:
        return [r[0] for r in self._query("SELECT doc_id FROM docs ORDER BY row")]

    def _search(self, q: np.ndarray, k: int, allowed: set[int] | None):
        """FAISS search, restricted to the rows in ``allowed`` by an ID selector (exact, no over-fetching)."""
        import faiss

        if allowed is None:
            return self.index.search(q, k)
        selector = faiss.IDSelectorBatch(np.fromiter(allowed, dtype=np.int64))
        kind = {"hnsw": faiss.SearchParametersHNSW, "ivf": faiss.SearchParametersIVF}.get(self.meta.index_type,
                                                                                          faiss.SearchParameters)
        params = kind(sel=selector)
        if self.meta.index_type == "hnsw":
            params.efSearch = max(128, k)
        elif self.meta.index_type == "ivf":
            params.nprobe = self.index.nprobe
        return self.index.search(q, min(k, len(allowed)), params=params)

    def search(self, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None) -> list[list[SearchHit]]:
        """Hits per query, best first; ``lang`` keeps only documents of that language."""
        q = normalize(query_vectors)
        if q.shape[1] != self.meta.dim:
            raise HmdeError(f"query vectors have dimension {q.shape[1]}, the index {self.meta.dim}: "
                            "search with the model the index was built with")
        n = self.index.ntotal
        if n == 0:
            return [[] for _ in range(len(q))]
        allowed = None
        if lang:
            allowed = {r[0] for r in self._query("SELECT row FROM docs WHERE lang = ?", (lang,))}
            if not allowed:
                langs = [r[0] for r in self._query("SELECT DISTINCT lang FROM docs ORDER BY 1")]
                raise HmdeError(f"the index has no documents in '{lang}' (languages: {', '.join(map(str, langs))})")
        scores, rows = self._search(q, min(n, top_k), allowed)
        out = []
        for qi in range(len(q)):
            picked = [(float(s), int(r)) for s, r in zip(scores[qi], rows[qi]) if r >= 0]
            records = {}
            if picked:
                marks = ",".join("?" * len(picked))
                for row, doc_id, dlang, text, start, count, sents in self._query(
                        f"SELECT row, doc_id, lang, text, sent_start, sent_count, sentences FROM docs WHERE row IN ({marks})",
                        [r for _, r in picked]):
                    records[row] = (doc_id, dlang, text, start, count, sents)
            hits = []
            for rank, (score, row) in enumerate(picked, 1):
                doc_id, dlang, text, start, count, sents = records[row]
                best, best_score = "", float("nan")
                if count:
                    sims = self.sentence_vectors[start:start + count] @ q[qi]
                    j = int(np.argmax(sims))
                    best, best_score = sents[j], float(sims[j])
                hits.append(SearchHit(rank, score, doc_id, dlang, best, best_score, text))
            out.append(hits)
        return out


def check_compatible(meta: IndexMeta, model_sha256: str | None, dim: int, path: Path) -> None:
    """An index is searched and extended only with the model it was built with."""
    if meta.dim != dim:
        raise HmdeError(f"index {path} was built with {meta.dim}-dimensional vectors, this model gives {dim}: "
                        f"use the index's model ({meta.model})")
    if meta.model_sha256 and model_sha256 and meta.model_sha256 != model_sha256:
        raise HmdeError(f"index {path} was built with another model ({meta.model}, sha256 {meta.model_sha256[:12]}…); "
                        "search it with that model or rebuild the index")
