"""``hmde encode``: document (or query) vectors for a file of texts."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from pathlib import Path


from ..io.vector_files import VectorWriter, ids_path_for, write_vectors
from ..encoders.config import DOCUMENT_METHODS
from ..methods import default_method, method_class
from ..text.coverage import languages_of, warn_uncovered
from ..errors import HmdeError
from ..encoders.routing import AUTO, route
from ..io.documents import ALL_FIELDS, is_empty_text
from .inputs import add_input_arguments, read_input, say_report
from .length_arguments import add_length_arguments
from .common import (
    add_device_argument,
    add_backend_argument,
    add_lawdr_fit_arguments,
    add_model_argument,
    BF16_HELP,
    autocast_dtype,
    lawdr_fit_options,
    load_model,
    pick_device,
    warn,
)
from .arg_types import language_code, positive_int
from .preflight import check_lawdr_inputs, check_output_file, check_records
from .ray_arguments import add_ray_arguments


def register(sub) -> None:
    p = sub.add_parser(
        "encode",
        help="embed the documents (or queries) of a file",
        description="Embed every document of INPUT and write OUT.npy (float32, one row per input "
        "document, in input order) and OUT.ids.txt. Documents with no text get an all-zero row "
        "(and a warning), so rows and ids always line up.",
    )
    add_model_argument(p)
    add_input_arguments(p, help_more="; with --engine ray a folder of shards")
    p.add_argument("--output", "-o", required=True, help="OUT.npy (ids in OUT.ids.txt beside it), or OUT.parquet: "
                   "vectors, sentences, spans and their vectors, which `hmde index build OUT.parquet` indexes as they "
                   "are (--engine ray: a folder of Parquet shards plus manifest.json)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT that hmde did not write")
    add_ray_arguments(p, "writing Parquet shards")
    p.add_argument("--with-sentences", action="store_true", help="--engine ray: shards hold sentences, spans, vectors")
    p.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                   help="document vectors: hmde (the paper's), first (first 128 tokens), seg (128-token windows "
                   "overlapping by 1/3, averaged), mean (of sentence vectors), lawdr (default: the model's recommended "
                   "method: mean for hmde-e5, hmde for other hmde models, mean for a sentence encoder)")
    p.add_argument("--lawdr-stats", help="LAWDR statistics folder: reused if it exists, else fitted on INPUT and saved "
                   "there (default: OUT.lawdr/)")
    add_lawdr_fit_arguments(p)
    p.add_argument("--lawdr-units", choices=["sentences", "packed"], default="sentences",
                   help="LAWDR input units: sentences, or as many sentences as fit the token limit")
    add_backend_argument(p)
    p.add_argument("--queries", action="store_true", help="encode each text with the sentence encoder alone (queries)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="documents per batch (default 32)")
    p.add_argument("--sentence-batch-size", type=positive_int, default=None,
                   help="sentences of maximal length per lower-encoder batch; shorter ones are packed more densely "
                   "(default: 8 on CPUs, 64 on GPUs)")
    p.add_argument("--text-field", default="text")
    p.add_argument("--id-field", default="doc_id")
    p.add_argument("--lang-field", default="lang", help="language field used for sentence splitting ('' for none)")
    p.add_argument("--lang", type=language_code, default=None, help="language of all documents (overrides --lang-field)")
    add_device_argument(p)
    p.add_argument("--normalize", action="store_true", help="L2-normalise the vectors")
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_length_arguments(p)
    p.set_defaults(func=run)


def lawdr_stats_dir(args) -> Path:
    return Path(args.lawdr_stats) if args.lawdr_stats else Path(str(args.output)[:-4] + ".lawdr")


def method_vectorizer(args, model, progress: bool):
    """The baselines' and LAWDR's vectorizer, with this run's options and, for LAWDR, the saved
    statistics when they exist (else none yet: they are fitted on the input)."""
    from ..methods.lawdr_statistics import LawdrStats
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions

    options = MethodOptions(batch_size=args.batch_size, sentence_batch_size=args.sentence_batch_size,
                            lawdr_units=args.lawdr_units, **lawdr_fit_options(args),
                            autocast_dtype=autocast_dtype(args.bf16), show_progress_bar=progress)
    stats, stats_dir = None, lawdr_stats_dir(args)
    if method_class(args.method).fitted and (stats_dir / "lawdr.json").exists():
        stats = LawdrStats.load(stats_dir)
        print(f"using LAWDR statistics from {stats_dir} (m={stats.m})")
    return DocumentVectorizer(model, args.method, options, stats)


def encode_with_method(args, model, texts, langs, progress):
    """The baselines, and LAWDR, whose statistics are fitted once (then saved) and reused."""
    vectorizer = method_vectorizer(args, model, progress)
    fitted_here = vectorizer.document_method.fitted and vectorizer.lawdr_stats is None
    vectors = vectorizer.encode(texts, langs, normalize_embeddings=args.normalize)
    if fitted_here:
        stats_dir = lawdr_stats_dir(args)
        vectorizer.lawdr_stats.save(stats_dir)
        print(f"fitted LAWDR statistics (m={vectorizer.lawdr_stats.m}) and saved them to {stats_dir}")
    return vectors


def run(args: argparse.Namespace) -> int:
    if args.engine == "ray" or args.with_sentences:
        from .encode_ray import run_ray

        return run_ray(args)
    parquet = str(args.output).endswith(".parquet")
    if not str(args.output).endswith(".npy") and not parquet:
        raise HmdeError(f"--output must end in .npy (vectors) or .parquet (vectors, sentences, spans), got "
                        f"'{args.output}'")
    if parquet and args.method and method_class(args.method).fitted:
        raise HmdeError(f"--method {args.method} with a .parquet output: fit its statistics with a .npy output first "
                        "(--lawdr-stats), then write the .parquet")
    if parquet and (args.queries or args.normalize):
        raise HmdeError("a .parquet output holds documents as an index stores them: leave out --queries and "
                        "--normalize (write .npy for those)")
    check_output_file(args.output, overwrite=args.overwrite)
    fits_lawdr = (args.method and method_class(args.method).fitted and not args.queries
                  and not (lawdr_stats_dir(args) / "lawdr.json").exists())
    if fits_lawdr:  # LAWDR fitted on all of INPUT: the whole input in memory
        from ..methods.lawdr_statistics import check_stats_output

        check_stats_output(lawdr_stats_dir(args))  # before the fit: never a file, never a folder of the user's
        return run_in_memory(args)
    choose_method(args)
    languages: Counter = Counter()
    count, empty = scan_input(args, languages)
    args.model = route(args.model, languages)
    device = pick_device(args.device)
    kind, model = load_model(args.model, device, args=args)
    warn_uncovered(args.model, model, languages, "texts" if args.queries else "documents")
    if not args.queries:  # an ONNX export's kind is known only now; it takes its model's method
        args.method = args.method or default_method(kind == "hmde", args.model, args.preset)
        if method_class(args.method).needs_hmde_model and kind != "hmde":
            raise HmdeError(SENTENCE_ENCODER_IS_NOT_HMDE.format(model=args.model))
    warn_empty(empty)
    if parquet:
        from .encode_parquet import write_parquet

        return write_parquet(args, kind, model, count, method_vectorizer(args, model, False),
                             input_chunks(args, args.batch_size))
    encode_chunk = chunk_encoder(args, kind, model)
    from tqdm.auto import tqdm

    with VectorWriter(args.output, count) as writer, \
            tqdm(total=count, desc="documents", unit="doc", disable=args.no_progress) as bar:
        # --queries: sentence-transformers sorts a call's texts by length, so its chunks stay as they were
        for chunk in input_chunks(args, None if args.queries else args.batch_size):
            writer.add([r.doc_id for r in chunk], encode_chunk([r.text for r in chunk],
                                                               [args.lang or r.lang for r in chunk]))
            bar.update(len(chunk))
    print(f"wrote {count} x {writer.dim} vectors to {args.output} and ids to {ids_path_for(args.output)}")
    say_report(args)
    return 0


def choose_method(args: argparse.Namespace) -> None:
    """Before anything is read: without --method, an hmde model encodes with ``hmde`` and a sentence
    encoder (``hmde encode multilingual-e5-small docs.jsonl``) with ``mean``, said once on stderr, as
    ``align`` and ``index build`` do; ``--method hmde`` on a sentence encoder stays an error."""
    from ..export.folder import is_onnx_export
    from ..encoders.model_folder import is_hmde_folder
    from ..encoders.registry import resolve_model_path

    if args.queries or (args.method and not method_class(args.method).needs_hmde_model):
        return
    if args.model == AUTO:  # both of its models are hmde models; which one (and its method) is known after the scan
        return
    path = resolve_model_path(args.model)
    if is_onnx_export(path):
        return  # an export's kind is known once it is loaded: checked after loading
    if is_hmde_folder(path):
        args.method = args.method or default_method(True, args.model, args.preset)
        return
    if args.method:  # one that needs an hmde model
        raise HmdeError(SENTENCE_ENCODER_IS_NOT_HMDE.format(model=args.model))
    args.method = default_method(False)
    warn(f"{args.model} is a sentence encoder: each document is the mean of its sentence vectors (--method mean; "
         "--method first, seg or lawdr for the others)")


SENTENCE_ENCODER_IS_NOT_HMDE = (
    "'{model}' is a sentence encoder, not an hmde model. Use --queries to embed texts with it, or create an hmde "
    "model on top of it first (HierarchicalEncoder.from_sentence_encoder in Python, then `hmde train`).")
STREAM_CHUNK = 2048  # documents read, encoded and written at a time: memory holds one chunk, not the input


def warn_empty(empty: list[str]) -> None:
    if empty:
        shown = ", ".join(empty[:5]) + (" ..." if len(empty) > 5 else "")
        warn(f"{len(empty)} document(s) with no text get an all-zero vector: {shown}")


def scan_input(args, languages: Counter | None = None) -> tuple[int, list[str]]:
    """A first pass over INPUT that keeps no text: the checks of :mod:`hmde.cli.preflight` (unique, one-line ids),
    the document count and the ids of empty documents; ``languages`` counts the documents' languages
    (:mod:`hmde.text.coverage`). Memory: one id and line number per document (the duplicate check needs them)."""
    from ..text.coverage import tally

    empty: list[str] = []

    def noting_empty(records):
        for r in records:
            if is_empty_text(r.text):
                empty.append(r.doc_id)
            yield r

    records = read_input(args, progress=True)
    ids = check_records(noting_empty(tally(records, Counter() if languages is None else languages, args.lang)), args)
    return len(ids), empty


def input_chunks(args, size: int | None = None, characters: int = 0):
    """The input's records, ``size`` at a time. Document methods read one batch (``--batch-size``) at a time, so the
    progress bar moves per batch; their vectors do not depend on it (each batch is encoded on its own).
    ``characters``: an index's chunks, of at least ``size`` documents and this much text
    (:func:`hmde.index.builder.embedding_chunks`, as ``hmde.Index`` embeds)."""
    from ..index.builder import embedding_chunks

    lang = getattr(args, "lang", None)
    records = (dataclasses.replace(r, lang=lang) if lang else r for r in read_input(args, ALL_FIELDS))
    return embedding_chunks(records, min(size or STREAM_CHUNK, STREAM_CHUNK), characters, STREAM_CHUNK)


def chunk_encoder(args, kind, model):
    """``(texts, langs) -> vectors`` for this run's method; LAWDR only with saved statistics."""
    amp, progress = autocast_dtype(args.bf16), False
    if args.queries:
        from ..methods.vectorizer import encode_query_texts

        return lambda texts, langs: encode_query_texts(model, texts, batch_size=args.sentence_batch_size,
                                                       show_progress_bar=progress,
                                                       normalize_embeddings=args.normalize, autocast_dtype=amp)
    vectorizer = method_vectorizer(args, model, progress)  # a fitted method's statistics exist here
    return lambda texts, langs: vectorizer.encode(texts, langs, normalize_embeddings=args.normalize)


def run_in_memory(args: argparse.Namespace) -> int:
    """The whole input at once: LAWDR fitted on all of INPUT."""
    records = list(read_input(args, progress=True))
    check_records(records, args)
    if method_class(args.method).fitted and not args.queries:
        check_lawdr_inputs(records, [args.lang or r.lang for r in records], args,
                           (lawdr_stats_dir(args) / "lawdr.json").exists())
    texts = [r.text for r in records]
    langs = [args.lang or r.lang for r in records]
    languages = languages_of(langs, texts)
    args.model = route(args.model, languages)
    device = pick_device(args.device)
    _, model = load_model(args.model, device, args=args)
    warn_uncovered(args.model, model, languages)
    warn_empty([r.doc_id for r in records if is_empty_text(r.text)])
    vectors = encode_with_method(args, model, texts, langs, not args.no_progress)
    write_vectors(args.output, [r.doc_id for r in records], vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors to {args.output} and ids to {ids_path_for(args.output)}")
    say_report(args)
    return 0
