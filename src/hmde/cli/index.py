"""``hmde index build`` and ``hmde search``: a FAISS + DuckDB index of documents."""

from __future__ import annotations

import argparse
import math
import json
import sys
from pathlib import Path

import numpy as np

from .arg_types import bounded_int, nonnegative_int, positive_int
from ..config import DOCUMENT_METHODS
from ..document_methods import default_method, method_class
from ..coverage import languages_of, warn_uncovered
from ..errors import HmdeError, InputError
from ..length_settings import add_length_arguments
from ..registry import DEFAULT_MODEL
from .common import (
    add_backend_argument,
    add_sentence_scoring_arguments,
    add_lawdr_fit_arguments,
    add_model_argument,
    BF16_HELP,
    autocast_dtype,
    lawdr_fit_options,
    load_model,
    pick_device,
    warn,
)
from .preflight import check_records
from .ray_arguments import add_ray_arguments, encode_spec, ray_options


def register(sub) -> None:
    p = sub.add_parser("index", help="build or extend a searchable document index")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION")
    isub.required = True
    b = isub.add_parser("build", help="embed INPUT and write (or, with --add, extend) INDEX_DIR",
                        description="Documents go through the chosen method (default: the hierarchical model); "
                        "their sentences are kept for the best-sentence snippet of each hit.")
    add_model_argument(b, "; with --add: the index's model")
    b.set_defaults(model=None)  # --add without a model uses the index's
    b.add_argument("input", metavar="INPUT", help=".jsonl/.jsonl.gz, .tsv, .txt or .parquet documents; with "
                   "--engine ray also a folder of .jsonl(.gz)/.parquet shards")
    b.add_argument("--output", "-o", required=True, metavar="INDEX_DIR")
    b.add_argument("--add", action="store_true", help="add INPUT's documents to an existing index")
    b.add_argument("--overwrite", action="store_true", help="replace an existing index at INDEX_DIR (a folder "
                   "holding anything else is never replaced)")
    b.add_argument("--type", choices=["flat", "hnsw", "ivf", "ivfpq"], default="flat",
                   help="flat: exact (default); hnsw or ivf: approximate, for large collections; ivfpq: approximate "
                   "and compressed to --pq-m bytes per vector, for collections whose vectors exceed memory")
    b.add_argument("--hnsw-m", type=bounded_int(2, 256), default=32, help="HNSW: links per node (2-256)")
    b.add_argument("--ivf-lists", type=positive_int, default=1024, help="ivf/ivfpq: inverted lists (about sqrt(documents))")
    b.add_argument("--pq-m", type=int, default=96,
                   help="ivfpq: bytes per vector (sub-quantisers; must divide the dimension; 96 for 768-d)")
    b.add_argument("--multi-vector", action="store_true",
                   help="also store every sentence's contextualised vector (HMDE's upper encoder; method hmde) in a "
                   "sentence-level FAISS index: `hmde search` then scores a document by its best sentences and "
                   "returns them as evidence (flat or hnsw; with --add: the index's mode)")
    b.add_argument("--bm25", action="store_true", help="also index the texts with BM25 (bm25s), for `hmde search "
                   "--hybrid`; kept up to date by --add")
    b.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                   help="document vectors (default: hmde for an hmde model, else mean; with --add: the index's)")
    b.add_argument("--lawdr-stats", help="LAWDR statistics to use (required for --method lawdr with --add)")
    add_lawdr_fit_arguments(b)
    b.add_argument("--text-field", default="text")
    b.add_argument("--id-field", default="doc_id")
    b.add_argument("--lang-field", default="lang")
    b.add_argument("--device", default="auto")
    b.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_backend_argument(b, default=None, help_suffix="; default torch, with --add: the index's")
    b.add_argument("--no-progress", action="store_true")
    add_length_arguments(b)
    add_ray_arguments(b, "(then the index is built shard by shard; sentence vectors are not stored, a hit's best "
                      "sentence is embedded at search time)")
    b.add_argument("--vectors-dir", help="--engine ray: where the encoded shards go (default: INDEX_DIR.vectors); "
                   "a rerun reuses its finished shards")
    b.set_defaults(func=run_build)

    s = sub.add_parser("search", help="search an index with a query (through the sentence encoder)")
    s.add_argument("index", metavar="INDEX_DIR")
    s.add_argument("query", nargs="*", help="query texts: each argument is one query (quote a query of several words)")
    s.add_argument("--queries", metavar="FILE", help="queries as TSV (qid<TAB>text) or JSONL (qid, text)")
    s.add_argument("--run", metavar="OUT", help="write a TREC run file (qid Q0 docid rank score tag) for trec_eval or "
                   "ir-measures; hits are then not printed unless --json")
    s.add_argument("--qrels", help="TREC qrels: print the run's ir-measures metrics")
    s.add_argument("--measures", default="AP,RR,nDCG@10,R@100", help="ir-measures names, with --qrels")
    s.add_argument("--tag", default="hmde", help="the run tag column of --run")
    s.add_argument("--hybrid", action="store_true", help="fuse the dense ranking with BM25's (index built with --bm25) "
                   "by reciprocal rank fusion: strong on monolingual long documents")
    s.add_argument("--hybrid-weights", default="1,1", metavar="DENSE,BM25",
                   help="weights of the two rankings in the fusion (default 1,1)")
    s.add_argument("--rrf-k", type=nonnegative_int, default=60, help="reciprocal rank fusion constant (default 60)")
    s.add_argument("--top-k", type=int, default=10)
    add_sentence_scoring_arguments(s, "multi-vector index")
    s.add_argument("--single-vector", action="store_true",
                   help="on a multi-vector index, rank by the document vectors alone")
    s.add_argument("--lang", help="only documents of this language")
    s.add_argument("--model", help="model to embed the query with (default: the one the index was built with)")
    s.add_argument("--json", action="store_true", help="one JSON object per hit, for machines")
    s.add_argument("--device", default="auto")
    add_backend_argument(s, default=None, help_suffix="; default: the one the index was built with")
    s.add_argument("--ef-search", type=positive_int, help="HNSW: candidates explored per query (default 128; more: higher recall)")
    s.add_argument("--nprobe", type=positive_int, help="IVF: lists searched per query (default lists/8; more: higher recall)")
    s.set_defaults(func=run_search)


def index_meta(args: argparse.Namespace, model: str, model_sha256: str | None, dim: int, method: str):
    from ..index.store import IndexMeta

    ivf = args.type in ("ivf", "ivfpq")
    return IndexMeta(model=model, model_sha256=model_sha256, dim=dim, method=method, index_type=args.type, count=0,
                     hnsw_m=args.hnsw_m, ivf_lists=args.ivf_lists if ivf else 0,
                     pq_m=args.pq_m if args.type == "ivfpq" else 0, bm25=bool(getattr(args, "bm25", False)),
                     backend=getattr(args, "backend", None) or "torch",
                     multi_vector=bool(getattr(args, "multi_vector", False)))


def check_build_output(args: argparse.Namespace):
    """Before any encoding: the output may be created or replaced (see hmde.output_dirs); with
    ``--add``, the index there opens whole and the model and method agree with it.

    Returns the open index for ``--add`` (closed by the caller), else None. Without
    ``--model``/``--method``, an add uses the index's own.
    """
    from ..index.store import DocumentIndex
    from ..output_dirs import check_replaceable, check_writable_parent, is_hmde_index
    from ..registry import bundled_folder, recorded_model

    check_writable_parent(args.output)
    if args.multi_vector and args.type not in ("flat", "hnsw"):
        raise HmdeError(f"--multi-vector indexes sentences in a flat or hnsw FAISS index, not {args.type}")
    if args.multi_vector and args.method and not method_class(args.method).contextual:
        raise HmdeError(f"--multi-vector stores HMDE's contextualised sentence vectors: method hmde, not {args.method}")
    if args.multi_vector and args.engine == "ray":
        raise HmdeError("--multi-vector builds with --engine local (the Ray engine stores no sentence vectors)")
    if not args.add:
        check_replaceable(args.output, "hmde index", is_hmde_index, args.overwrite)
        args.model = args.model or DEFAULT_MODEL
        args.backend = args.backend or "torch"
        check_multi_vector_model(args)
        return None
    if not is_hmde_index(Path(args.output)):
        raise HmdeError(f"{args.output}: --add needs an existing hmde index there")
    index = DocumentIndex.open(args.output)
    try:
        meta = index.meta
        if args.method and args.method != meta.method:
            raise HmdeError(f"index {args.output} holds '{meta.method}' document vectors; add to it with "
                            f"--method {meta.method} (or leave --method out), not {args.method}")
        args.method = meta.method
        if args.backend and args.backend != meta.backend:
            raise HmdeError(f"index {args.output} was encoded with --backend {meta.backend}; add to it with that "
                            f"backend (or leave --backend out), not {args.backend}")
        args.backend = meta.backend
        if args.multi_vector and not meta.multi_vector:
            raise HmdeError(f"index {args.output} stores one vector per document; --multi-vector needs an index built "
                            "with it (rebuild, or add without --multi-vector)")
        args.multi_vector = meta.multi_vector
        if args.model is None:
            model = recorded_model(meta.model)
            if not Path(model).exists() and bundled_folder(model) is None:
                raise HmdeError(f"index {args.output} was built with {meta.model}, which is not there any more: "
                                "name the model to add with")
            args.model = model
        check_same_model(index, args.model)
        if meta.bm25:
            index.require_bm25()  # a damaged BM25 index is refused like any damaged file of the index
        if method_class(args.method).fitted and not args.lawdr_stats:
            raise HmdeError(f"--method {args.method} with --add needs --lawdr-stats (the statistics the index was "
                            "built with)")
    except BaseException:
        index.close()
        raise
    return index


def check_multi_vector_model(args: argparse.Namespace) -> None:
    """--multi-vector needs the hierarchical model on PyTorch: checked on the folder, before loading it."""
    from ..model_folder import is_hmde_folder
    from ..registry import resolve_model_path

    if not args.multi_vector:
        return
    if args.backend != "torch":
        raise HmdeError("--multi-vector needs --backend torch: the exported upper graph gives document vectors only")
    try:
        hmde_model = is_hmde_folder(resolve_model_path(args.model))
    except HmdeError:
        hmde_model = False
    if not hmde_model:
        raise HmdeError(f"--multi-vector stores HMDE's contextualised sentence vectors: '{args.model}' is not an hmde "
                        "model")


def check_same_model(index, name: str) -> None:
    """The model's files hash as the index's did (hashing reads files; no model is loaded)."""
    from ..evaluation.provenance import model_hash
    from ..registry import resolve_model_path, same_model_hash

    sha = model_hash(resolve_model_path(name))
    if not same_model_hash(index.meta.model_sha256, sha):
        raise HmdeError(f"index {index.path} was built with another model ({index.meta.model}, sha256 "
                        f"{index.meta.model_sha256[:12]}…) than {name}; add with that model, or leave the model out")


def check_new_ids(index, lines: dict[str, int | None], args) -> None:
    """On --add, ids already in the index are refused before encoding, naming the first one's input line.
    ``lines``: each input id's line (from :func:`hmde.cli.preflight.check_records`)."""
    if index is None:
        return
    known = index.known_ids(list(lines))
    if known:
        first = min(known, key=lambda i: lines[i] or 0)
        raise InputError(f"the id '{first}' is already in the index {args.output}", str(args.input), lines[first],
                         args.id_field)


def run_build(args: argparse.Namespace) -> int:
    existing = check_build_output(args)
    try:
        return run_build_ray(args) if args.engine == "ray" else run_build_local(args, existing)
    finally:
        if existing is not None:
            existing.close()


def run_build_local(args: argparse.Namespace, existing) -> int:
    """Stream INPUT into the index a chunk at a time (LAWDR fitted on INPUT takes it whole)."""
    from ..lawdr import LawdrStats

    stats = LawdrStats.load(args.lawdr_stats) if args.lawdr_stats else None
    if args.method and method_class(args.method).fitted and stats is None:
        return run_build_in_memory(args, existing)
    from collections import Counter

    languages: Counter = Counter()
    count = scan_for_index(args, existing, languages)
    return stream_into_index(args, existing, stats, count, languages)


def scan_for_index(args: argparse.Namespace, existing, languages=None) -> int:
    """A first pass that keeps no text: every check of :mod:`hmde.cli.preflight` and the ids already
    in the index, before any model loads; returns the document count (``languages``: a Counter of
    the documents' languages, for :func:`hmde.coverage.warn_uncovered`)."""
    from collections import Counter

    from ..coverage import tally
    from ..io.documents import read_documents
    from .preflight import check_index_size

    records = read_documents(args.input, args.text_field, args.id_field, args.lang_field or None)
    lines = check_records(tally(records, Counter() if languages is None else languages), args)
    check_new_ids(existing, lines, args)
    check_index_size(len(lines), args)
    return len(lines)


def load_index_model(args: argparse.Namespace, existing):
    """The model, its method, the name the index records for it (hmde.registry.recorded_name) and its
    dimension, checked against --pq-m and, on --add, the index."""
    from ..registry import recorded_name
    from .preflight import check_pq

    kind, model = load_model(args.model, pick_device(args.device), args=args)
    method = args.method or default_method(kind == "hmde")
    dim = (model.lower if kind == "hmde" else model).dim
    check_pq(dim, args)
    if existing is not None and existing.meta.dim != dim:
        raise HmdeError(f"index {args.output} holds {existing.meta.dim}-dimensional vectors, {args.model} gives {dim}")
    return model, method, recorded_name(args.model), dim


def stream_into_index(args: argparse.Namespace, existing, stats, count: int, languages=None) -> int:
    import itertools

    from tqdm.auto import tqdm

    from ..evaluation.provenance import model_hash
    from ..finite_vectors import require_finite
    from ..index.store import DocumentBatch, DocumentIndex
    from ..methods import DocumentVectorizer, MethodOptions, flat_text
    from ..registry import resolve_model_path
    from .encode import input_chunks

    model, method, path, dim = load_index_model(args, existing)
    if languages:
        warn_uncovered(args.model, model, languages)
    vectorizer = DocumentVectorizer(model, method, MethodOptions(autocast_dtype=autocast_dtype(args.bf16),
                                                                 **lawdr_fit_options(args)), stats)
    bar = tqdm(total=count, desc="documents", unit="doc", disable=args.no_progress)

    def encoded():
        for chunk in input_chunks(args, vectorizer.options.batch_size):  # one batch at a time: progress per batch
            langs = [r.lang for r in chunk]
            vectors, units, sents = vectorizer.encode_with_sentences([r.text for r in chunk], langs,
                                                                     contextual=args.multi_vector)
            require_finite(vectors, [r.doc_id for r in chunk])
            bar.update(len(chunk))
            yield DocumentBatch([r.doc_id for r in chunk], langs, [flat_text(r.text) for r in chunk], vectors,
                                units, sents)

    batches, first, train = encoded(), [], None
    if args.type in ("ivf", "ivfpq") and not args.add:  # IVF trains on the first chunks, kept for writing
        need = args.ivf_lists * IVF_TRAIN_PER_LIST
        for batch in batches:
            first.append(batch)
            if sum(len(b.doc_ids) for b in first) >= need:
                break
        train = np.concatenate([b.doc_vectors for b in first])[:need]
    meta = index_meta(args, path, model_hash(resolve_model_path(path)), dim, method)
    index = DocumentIndex.write_batches(args.output, meta, itertools.chain(first, batches), add=args.add,
                                        train_vectors=train)
    bar.close()
    print(f"{'added' if args.add else 'indexed'} {count} documents; {args.output} holds {index.meta.count}")
    index.close()
    return 0


def run_build_in_memory(args: argparse.Namespace, existing) -> int:
    """The whole input at once: LAWDR fitted on INPUT needs every sentence vector before the first document."""
    from ..evaluation.provenance import model_hash
    from ..finite_vectors import require_finite
    from ..index.store import DocumentIndex
    from ..io.documents import read_documents
    from ..methods import DocumentVectorizer, MethodOptions, flat_text
    from ..registry import resolve_model_path
    from .preflight import check_index_size, check_lawdr_inputs

    records = list(read_documents(args.input, args.text_field, args.id_field, args.lang_field or None))
    check_new_ids(existing, check_records(records, args), args)
    check_index_size(len(records), args)
    check_lawdr_inputs(records, [r.lang for r in records], args, have_stats=False)
    model, method, path, _ = load_index_model(args, existing)
    warn_uncovered(args.model, model, languages_of([r.lang for r in records], [r.text for r in records]))
    options = MethodOptions(autocast_dtype=autocast_dtype(args.bf16), show_progress_bar=not args.no_progress,
                            **lawdr_fit_options(args))
    doc_vectors, units, sents = DocumentVectorizer(model, method, options).encode_with_sentences(
        [r.text for r in records], [r.lang for r in records])
    require_finite(doc_vectors, [r.doc_id for r in records])
    meta = index_meta(args, path, model_hash(resolve_model_path(path)), int(doc_vectors.shape[1]), method)
    texts = [flat_text(r.text) for r in records]
    index = DocumentIndex.write(args.output, meta, [r.doc_id for r in records], [r.lang for r in records], texts,
                                doc_vectors, units, sents, add=args.add)
    print(f"{'added' if args.add else 'indexed'} {len(records)} documents; {args.output} holds {index.meta.count}")
    index.close()
    return 0


IVF_TRAIN_PER_LIST = 64  # training vectors per IVF list (FAISS wants 30-256)


def run_build_ray(args: argparse.Namespace) -> int:
    """Encode with Ray into Parquet shards, then stream them into the index, shard by shard."""
    from ..index.store import DocumentBatch, DocumentIndex
    from ..scale.ray_encode import encode_with_ray, input_shards, iter_shard_tables, table_vectors

    spec = encode_spec(args, args.method, keep_text=True)
    vectors_dir = Path(args.vectors_dir or f"{str(args.output).rstrip('/')}.vectors")
    manifest = encode_with_ray(spec, [args.input], vectors_dir, device=pick_device(args.device),
                               options=ray_options(args), show_progress=not args.no_progress)
    shards = input_shards([args.input])
    from ..registry import recorded_name

    meta = index_meta(args, recorded_name(args.model), spec.model_sha256, int(manifest.data["dim"]), spec.method)
    train = None
    if args.type in ("ivf", "ivfpq") and not args.add:  # a sample from the first shards
        parts, need = [], args.ivf_lists * IVF_TRAIN_PER_LIST
        for _, table in iter_shard_tables(vectors_dir, shards):
            parts.append(table_vectors(table)[:need])
            need -= len(parts[-1])
            if need <= 0:
                break
        train = np.concatenate(parts)

    written = 0

    def batches():
        nonlocal written
        for _, table in iter_shard_tables(vectors_dir, shards):
            written += len(table)
            yield DocumentBatch(table.column("doc_id").to_pylist(), table.column("lang").to_pylist(),
                                table.column("text").to_pylist(), table_vectors(table))

    index = DocumentIndex.write_batches(args.output, meta, batches(), add=args.add, train_vectors=train)
    print(f"{'added' if args.add else 'indexed'} {written} documents; {args.output} holds {index.meta.count}")
    return 0


def print_hits(query: str, hits, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        for h in hits:
            out.write(json.dumps({"query": query, "rank": h.rank, "score": round(h.score, 5), "doc_id": h.doc_id,
                                  "lang": h.lang, "best_sentence": h.best_sentence,
                                  "sentence_score": round(h.sentence_score, 5),
                                  "evidence": [{"sentence": t, "score": round(v, 5)} for t, v in h.evidence]},
                                 ensure_ascii=False) + "\n")
        return
    out.write(f"query: {query}\n")
    if not hits:
        out.write("  (no hits)\n")
    for h in hits:
        out.write(f"  {h.rank:>2}. {h.score:.3f}  {h.doc_id}  [{h.lang}]  {h.snippet()}\n")


def search_index(index_dir: str, queries: list[str], top_k: int, lang: str | None, model_name: str | None,
                 device: str = "auto", ef_search: int | None = None, nprobe: int | None = None,
                 hybrid: bool = False, hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60,
                 backend: str | None = None, multi_vector: bool | None = None, top_sentences: int = 1,
                 doc_weight: float = 0.0):
    from ..evaluation.provenance import model_hash
    from ..index.store import DocumentIndex, check_compatible
    from ..methods import DocumentVectorizer
    from ..multivector import check_scoring
    from ..registry import recorded_model, resolve_model_path

    if not queries or any(not q.strip() for q in queries):
        raise HmdeError("the query is empty")
    if top_k < 1:
        raise HmdeError("--top-k must be >= 1")
    check_scoring(top_sentences, doc_weight)
    index = DocumentIndex.open(index_dir)
    if hybrid:
        index.require_bm25()  # before the model loads
        multi_vector = False if multi_vector is None else multi_vector
    if multi_vector and not index.meta.multi_vector:
        raise HmdeError(f"index {index_dir} stores one vector per document: build it with --multi-vector")
    name = model_name or recorded_model(index.meta.model)
    kind, model = load_model(name, pick_device(device), args=argparse.Namespace(backend=backend or index.meta.backend))
    lower = model.lower if kind == "hmde" else model
    check_compatible(index.meta, model_hash(resolve_model_path(name)), lower.dim, index.path)
    warn_uncovered(name, model, languages_of([None] * len(queries), queries), "queries")  # --lang filters hits
    vectors = lower.encode(queries, prompt_name="query")

    def sentences_of(texts, langs):  # hits whose sentences were not stored (built with --engine ray) only
        return DocumentVectorizer(model, "mean").sentences(texts, langs)

    return index.search(vectors, top_k, lang, sentences_of=sentences_of, ef_search=ef_search, nprobe=nprobe,
                        hybrid_texts=list(queries) if hybrid else None, hybrid_weights=hybrid_weights, rrf_k=rrf_k,
                        multi_vector=multi_vector, top_sentences=top_sentences, doc_weight=doc_weight)


def run_search(args: argparse.Namespace) -> int:
    """Queries from arguments (each its own) or a file; hits printed, or written as a TREC run and scored."""
    from ..evaluation import clir
    from .preflight import check_output_file

    if args.queries and args.query:
        raise HmdeError("give queries as arguments or with --queries, not both")
    if args.queries:
        topics = clir.read_topics(args.queries)
        ids, texts = topics.ids, topics.texts
    else:
        if not args.query:
            raise HmdeError("the query is empty: give one or more queries, or --queries FILE")
        ids, texts = [str(i) for i in range(1, len(args.query) + 1)], list(args.query)
    qrels = clir.read_qrels(args.qrels) if args.qrels else None  # checked before any model is loaded
    measures = clir.parse_measures(args.measures) if qrels is not None else []
    if qrels is not None and not set(qrels) & set(ids):
        raise InputError("no query has relevance judgements: check that the qrels and the query ids match",
                         path=str(args.qrels))
    if args.run:
        check_output_file(args.run, (args.queries, args.qrels))
    try:
        weights = tuple(float(w) for w in args.hybrid_weights.split(","))
    except ValueError:
        weights = ()
    if len(weights) != 2 or not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) == 0:
        raise HmdeError(f"--hybrid-weights takes two finite numbers >= 0, not both 0, DENSE,BM25; "
                        f"got '{args.hybrid_weights}'")
    hits = search_index(args.index, texts, args.top_k, args.lang, args.model, args.device, args.ef_search,
                        args.nprobe, args.hybrid, weights, args.rrf_k, args.backend,
                        False if args.single_vector else None, args.top_sentences, args.doc_weight)
    run = {qid: {h.doc_id: h.score for h in qhits} for qid, qhits in zip(ids, hits)}
    if args.run:
        clir.write_run(args.run, run, tag=args.tag)
        print(f"wrote {sum(len(v) for v in run.values())} hits of {len(run)} queries to {args.run}")
    if not args.run or args.json:
        for qid, text, qhits in zip(ids, texts, hits):
            print_hits(text if not args.queries else f"{qid}: {text}", qhits, args.json)
    if qrels is not None:
        unasked = sorted(set(qrels) - set(ids))
        if unasked:
            warn(f"the qrels judge {len(unasked)} query id(s) not asked (e.g. '{unasked[0]}'); they score 0")
        scores = clir.score_run(qrels, run, measures)
        judged = sum(1 for q in ids if q in qrels)
        print(f"{judged} of {len(ids)} queries judged: " + "  ".join(f"{m} {v:.4f}" for m, v in scores.items()))
    return 0
