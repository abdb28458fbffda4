"""hmde's own index's FAISS files: a new (trained) index of each type, an index read back (a damaged file is one line),
and how many inverted lists an IVF sentence index gets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import HmdeError, InputError
from .meta import INDEX_TYPES, PQ_BITS, first_line

SENTENCE_INDEX = "sentences.faiss"
SENTENCE_LISTS_PER_DOCUMENT_LIST = 4  # an IVF sentence index: about sqrt(20 sentences per document) more lists


def sentence_lists_for(ivf_lists: int, sentence_train: np.ndarray | None) -> int:
    """Inverted lists of an IVF sentence index: four times the documents' (a collection holds about 16
    times more sentences than documents, and lists grow with the square root), at most what the training
    sample supports (FAISS wants about 39 vectors per list)."""
    available = 0 if sentence_train is None else len(sentence_train) // 39
    return max(1, min(ivf_lists * SENTENCE_LISTS_PER_DOCUMENT_LIST, available))



def new_faiss_index(index_type: str, dim: int, n_train: np.ndarray | None, hnsw_m: int, ivf_lists: int,
                     pq_m: int = 0):
    """An empty (trained, for IVF) FAISS index; inner product on unit vectors, i.e. cosine.

    ``ivfpq`` stores each vector as ``pq_m`` bytes (product quantisation) inside IVF lists:
    100M 768-d documents take about 10 GB instead of 307 GB, at some loss of recall.
    """
    import faiss

    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 128
        return index
    if index_type in ("ivf", "ivfpq"):
        need = max(ivf_lists, 2**PQ_BITS if index_type == "ivfpq" else 0)
        if n_train is None or len(n_train) < need:
            raise HmdeError(f"an {index_type.upper()} index with {ivf_lists} lists needs at least {need} documents to "
                            f"train on, got {0 if n_train is None else len(n_train)}: lower --ivf-lists or use --type flat")
        quantizer = faiss.IndexFlatIP(dim)
        if index_type == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, ivf_lists, faiss.METRIC_INNER_PRODUCT)
        else:
            if pq_m < 1 or dim % pq_m:
                raise HmdeError(f"--pq-m must divide the dimension {dim}, got {pq_m}")
            index = faiss.IndexIVFPQ(quantizer, dim, ivf_lists, pq_m, PQ_BITS, faiss.METRIC_INNER_PRODUCT)
        index.train(n_train)
        index.nprobe = max(1, ivf_lists // 8)
        return index
    raise HmdeError(f"unknown index type '{index_type}' ({', '.join(INDEX_TYPES)})")


def read_faiss(path: Path):
    import faiss

    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        detail = first_line(exc).split("Error: ")[-1]  # FAISS prefixes the C++ function's signature
        raise InputError(f"not a readable FAISS index ({detail}); rebuild the index", path=str(path)) from None


