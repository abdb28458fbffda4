"""The flags of ``hmde index build`` and of ``hmde index add|upsert``, which take the same documents and the
same encoding flags (an add or upsert keeps the index's own settings: type, mode, BM25, method)."""

from __future__ import annotations

from ..encoders.config import DOCUMENT_METHODS
from .arg_types import bounded_int, language_code, positive_int
from .inputs import add_input_arguments
from .common import BF16_HELP, add_backend_argument, add_device_argument, add_lawdr_fit_arguments, add_model_argument
from .length_arguments import add_length_arguments
from .ray_arguments import add_ray_arguments

# what an add or upsert takes from the index itself, never from a flag
INDEX_OWN = dict(add=True, overwrite=False, store="", language_debias="subspace+calibrate", type="flat", hnsw_m=32, ivf_lists=1024, pq_m=96, multi_vector=None,
                 sentence_vectors=None, bm25=False, method=None)


def add_build_arguments(b, new_index: bool = True) -> None:
    """`hmde index build` (``new_index``: [MODEL] INPUT -o INDEX_DIR and the new index's settings) or `hmde index
    add|upsert` (INDEX_DIR INPUT: the index's model, method and settings)."""
    if new_index:
        add_model_argument(b, "; with --add: the index's model")
        b.set_defaults(model=None)  # --add without a model uses the index's
        add_input_arguments(b, help_more="; with --engine ray a folder of .jsonl(.gz)/.parquet shards")
        b.add_argument("--output", "-o", required=True, metavar="INDEX_DIR")
        b.add_argument("--add", action="store_true", help="add INPUT's documents to an existing index")
        b.add_argument("--overwrite", action="store_true", help="replace an existing index at INDEX_DIR (a folder "
                       "holding anything else is never replaced)")
        b.add_argument("--type", choices=["flat", "hnsw", "ivf", "ivfpq"], default="flat",
                       help="flat: exact (default); hnsw or ivf: approximate, for large collections; ivfpq: "
                       "approximate and compressed to --pq-m bytes per vector, for collections whose vectors exceed "
                       "memory")
        b.add_argument("--hnsw-m", type=bounded_int(2, 256), default=32, help="HNSW: links per node (2-256)")
        b.add_argument("--ivf-lists", type=positive_int, default=1024,
                       help="ivf/ivfpq: inverted lists (about sqrt(documents))")
        b.add_argument("--pq-m", type=int, default=96,
                       help="ivfpq: bytes per vector (sub-quantisers; must divide the dimension; 96 for 768-d)")
        vectors = b.add_mutually_exclusive_group()
        vectors.add_argument("--multi-vector", dest="multi_vector", action="store_const", const=True, default=None,
                             help="store every sentence's vector in a sentence-level FAISS index beside the "
                             "document vectors, so that `hmde search` ranks a document by its best sentence fused with "
                             "its document vector and shows the matching sentences (the default, on either engine; "
                             "with --add: the index's mode)")
        vectors.add_argument("--single-vector", dest="multi_vector", action="store_const", const=False,
                             help="store one vector per document only (smaller; the default of --preset paper, on either "
                             "engine)")
        b.add_argument("--sentence-vectors", choices=["lower", "context"], default=None,
                       help="multi-vector: the sentence encoder's own vectors (lower, default: best measured, "
                       "docs/defaults.md) or HMDE's contextualised ones (context: method hmde, --backend torch)")
        b.add_argument("--sentence-dtype", choices=["float32", "float16"], default=None,
                       help="how sentences.npy stores each sentence vector (default float32; float16: half the "
                       "disk and a flat index's memory, a faster search, the same MRR on the dev collections, "
                       "docs/scaling.md; with --add: the index's)")
        b.add_argument("--store", metavar="milvus:PATH_OR_URI", help="keep the vectors in Milvus (a Milvus Lite file, "
                       "or a server's URI; pip install 'hmde[milvus]'): INDEX_DIR holds hmde's record, and `hmde search`, "
                       "`hmde serve` and the writes work as on an index of hmde's own")
        b.add_argument("--language-debias", choices=["subspace+calibrate", "subspace", "none"],
                       default=None,
                       help="so that a mixed-language collection ranks by meaning, not by the query's language "
                       "(docs/defaults.md): subspace, each query loses the directions in which the indexed "
                       "languages' mean vectors differ; +calibrate (default), then the documents in the query's own "
                       "language (detected, or `hmde search --query-lang`) lose 0.15 x the query's top score over "
                       "its mean score; none: queries as embedded")
        b.add_argument("--bm25", action="store_true", help="also index the texts with BM25 (bm25s), for `hmde search "
                       "--hybrid`; kept up to date by --add")
    else:
        b.add_argument("index", metavar="INDEX_DIR", help="the index to write (its model, method and settings)")
        add_input_arguments(b)
        b.add_argument("--model", default=None, help="the index's model where it is not where the index says")
        b.set_defaults(**INDEX_OWN)
    if new_index:
        b.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                       help="document vectors (default: the model's recommended method: mean for hmde-e5, hmde for "
                       "other hmde models, mean for a sentence encoder; with --add: the index's)")
    b.add_argument("--lawdr-stats", help="LAWDR statistics to use (required for --method lawdr with --add)")
    add_lawdr_fit_arguments(b)
    b.add_argument("--lang", type=language_code, default=None, help="language of all documents (overrides --lang-field); an ISO 639 "
                   "code or BCP-47 tag, e.g. en, deu, zh-Hant")
    b.add_argument("--text-field", default="text", help="the field holding a document's text (default text)")
    b.add_argument("--id-field", default="doc_id", help="the field holding a document's id (default doc_id)")
    b.add_argument("--lang-field", default="lang", help="the field holding a document's language (default lang; "
                   "'' for none)")
    add_device_argument(b)
    b.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_backend_argument(b, default=None, help_suffix="; with --add: one that gives the index's vectors")
    b.add_argument("--no-progress", action="store_true")
    add_length_arguments(b)
    add_ray_arguments(b, "(then the index is built shard by shard; sentence vectors are not stored, a hit's best "
                      "sentence is embedded at search time)")
    b.add_argument("--vectors-dir", help="--engine ray: where the encoded shards go (default: INDEX_DIR.vectors); "
                   "a rerun reuses its finished shards")
