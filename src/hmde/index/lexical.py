"""Lexical (BM25) retrieval over an index's stored texts, and its fusion with the dense ranking.

Dense vectors of long documents average away the exact words a monolingual query shares
with its document; BM25 keeps them (on MLDR, BM25 scores 64.1 nDCG@10 against 52.5 for
BGE-M3's dense vectors). An index built with ``--bm25`` also holds a BM25 index
(``bm25/``, bm25s's own files: numpy arrays and JSON, no pickle), and ``hmde search
--hybrid`` fuses the two rankings by reciprocal rank fusion (Cormack et al., 2009):

    score(d) = w_dense / (k + rank_dense(d)) + w_bm25 / (k + rank_bm25(d))

with k = 60 and equal weights by default; a document missing from one list gets nothing
from it. Tokens are runs of two or more word characters, lower-cased, no stemming and no
stop words (languages differ); scripts written without spaces (Chinese, Japanese, Thai)
become one token per run, which BM25 matches poorly: use the dense ranking there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

BM25_DIR = "bm25"
RRF_K = 60


def _tokenize(texts: Sequence[str]):
    import bm25s

    return bm25s.tokenize(list(texts), lower=True, stopwords=None, show_progress=False)


ROWS_FILE = "rows.npy"  # the index row of each BM25 document, where some rows were deleted
EMPTY = "hmde_no_words"  # params.index.json of a BM25 index over documents without a word (or none): it matches nothing


def build_bm25(texts: Sequence[str], folder: str | Path, rows: Sequence[int] | None = None) -> None:
    """Index ``texts`` with BM25 into ``folder``: text i is the index's row ``rows[i]`` (default: row i). Only
    the live documents are given, so a deleted one counts in no statistic (document count, lengths, IDF)."""
    import json

    import bm25s
    import numpy as np

    tokens = _tokenize(texts)
    if not tokens.vocab:  # no documents yet (a framework store's first, empty index), or no word in any
        Path(folder).mkdir(parents=True, exist_ok=True)  # bm25s cannot index no words: nothing to match, said so
        (Path(folder) / "params.index.json").write_text(json.dumps({"num_docs": len(texts), EMPTY: True}),
                                                        encoding="utf-8")
        return
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    retriever.save(str(folder), show_progress=False)
    if rows is not None and not np.array_equal(np.asarray(rows), np.arange(len(texts))):
        np.save(Path(folder) / ROWS_FILE, np.asarray(rows, np.int64), allow_pickle=False)


def bm25_rows(folder: str | Path, n_docs: int):
    """The index row of each BM25 document (the identity where none was deleted), checked against ``n_docs``."""
    import numpy as np

    from ..errors import InputError

    path = Path(folder) / ROWS_FILE
    if not path.is_file():
        return np.arange(n_docs, dtype=np.int64)
    try:
        rows = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"not a readable .npy array ({exc}); rebuild the index with --bm25 --overwrite",
                         path=str(path)) from None
    if rows.ndim != 1 or len(rows) != n_docs or rows.dtype.kind != "i":
        raise InputError(f"holds {rows.shape} rows of {rows.dtype}, the BM25 index {n_docs} documents; rebuild the "
                         "index with --bm25 --overwrite", path=str(path))
    return rows


BM25_FILES = ("params.index.json", "vocab.index.json", "data.csc.index.npy", "indices.csc.index.npy",
              "indptr.csc.index.npy")


def load_bm25(folder: str | Path, n_docs: int):
    """The BM25 index in ``folder``, checked: a missing or damaged file, or one built over another
    number of documents than the index holds, is a one-line error naming the file."""
    import json

    import bm25s

    from ..errors import InputError

    folder = Path(folder)
    try:
        if json.loads((folder / "params.index.json").read_text(encoding="utf-8")).get(EMPTY) is True:
            return None  # nothing to match (bm25_search answers no rows)
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        pass  # checked below, file by file
    for name in BM25_FILES:
        if not (folder / name).is_file():
            raise InputError(f"the BM25 index lacks {name}; rebuild the index with --bm25 --overwrite",
                             path=str(folder / name))
    try:
        params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
        built_over = params["num_docs"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"not BM25 parameters ({type(exc).__name__}); rebuild the index with --bm25 --overwrite",
                         path=str(folder / "params.index.json")) from None
    if built_over != n_docs:  # n_docs: the live documents
        raise InputError(f"the BM25 index covers {built_over} documents, the index {n_docs}; rebuild it with --bm25 "
                         "--overwrite", path=str(folder / "params.index.json"))
    try:
        retriever = bm25s.BM25.load(str(folder), show_progress=False, verbosity=0)
    except Exception as exc:  # noqa: BLE001 - numpy, json and scipy each fail their own way on a damaged file
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"a damaged BM25 file ({first}); rebuild the index with --bm25 --overwrite",
                         path=str(folder)) from None
    scores, vocab = retriever.scores, getattr(retriever, "vocab_dict", None) or {}
    indptr, indices, data = scores.get("indptr"), scores.get("indices"), scores.get("data")
    if indptr is None or indices is None or data is None or len(indptr) - 1 > len(vocab) or \
            int(indptr[-1]) != len(indices) or len(indices) != len(data):
        raise InputError("the BM25 files disagree (vocabulary and postings); rebuild the index with --bm25 --overwrite",
                         path=str(folder))
    retriever.hmde_rows = bm25_rows(folder, n_docs)
    return retriever


def bm25_search(retriever, queries: Sequence[str], k: int, n_docs: int) -> list[list[tuple[int, float]]]:
    """Per query, up to ``k`` (row, BM25 score) pairs, best first (rows scoring 0 are left out);
    ``retriever`` from :func:`load_bm25`."""
    k = min(k, n_docs)
    if k < 1 or retriever is None:  # None: an index of no words
        return [[] for _ in queries]
    positions, scores = retriever.retrieve(_tokenize(queries), k=k, show_progress=False)
    rows = getattr(retriever, "hmde_rows", None)
    return [[(int(rows[p] if rows is not None else p), float(s)) for p, s in zip(pp, ss) if s > 0]
            for pp, ss in zip(positions, scores)]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], weights: Sequence[float] | None = None,
                           k: int = RRF_K) -> list[tuple[int, float]]:
    """Fused (row, score) pairs, best first; ``rankings`` are row lists, best first."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    fused: dict[int, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, row in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + w / (k + rank)
    order = sorted(fused.items(), key=lambda x: (-x[1], x[0]))
    return [(row, float(score)) for row, score in order]


def has_bm25(index_folder: str | Path) -> bool:
    return (Path(index_folder) / BM25_DIR / "params.index.json").is_file()


