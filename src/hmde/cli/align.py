"""``hmde align``: pair the documents of two files (parallel document alignment / mining)."""

from __future__ import annotations

import argparse

from .inputs import add_reading_arguments
from .arg_types import finite_float, language_code
from ..ground.atomic import write_text_atomic
from ..encoders.config import DOCUMENT_METHODS
from ..errors import HmdeError
from .length_arguments import add_length_arguments
from .align_sentences import add_alignment_arguments
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
)


def register(sub) -> None:
    p = sub.add_parser("align", help="align the documents of SRC and TGT (cosine or margin, FAISS candidates)",
                       description="Embed SRC and TGT documents and write PAIRS.tsv: src_id, tgt_id, score. The "
                       "ratio margin compares each pair's cosine with both sides' k nearest neighbours.")
    add_model_argument(p)
    p.add_argument("src", metavar="SRC", help="documents in one language: a folder or file (as `hmde index build` "
                   "reads them: docs/inputs.md)")
    p.add_argument("tgt", metavar="TGT", help="documents in the other: a folder or file")
    add_reading_arguments(p)
    p.add_argument("--output", "-o", required=True, help="PAIRS.tsv")
    p.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                   help="document vectors (default: the model's recommended method: mean for hmde-e5)")
    p.add_argument("--scoring", choices=["cosine", "margin"], default="margin")
    p.add_argument("--k", type=int, default=4, help="neighbours per side for the margin (default 4)")
    p.add_argument("--direction", choices=["forward", "backward", "max", "intersection"], default="max",
                   help="forward: each source's best; backward: each target's best; intersection: both agree; "
                   "max: best pairs of both directions, each document used once (default)")
    p.add_argument("--candidates", type=int, default=16, help="FAISS candidates re-scored per document")
    p.add_argument("--threshold", type=finite_float, help="keep pairs scoring at least this")
    add_lawdr_fit_arguments(p)
    p.add_argument("--src-lang", type=language_code)
    p.add_argument("--tgt-lang", type=language_code)
    add_device_argument(p)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_backend_argument(p)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--sentences", metavar="OUT", help="then align the sentences of every aligned pair into OUT (as "
                   "`hmde align-sentences`, reusing this run's sentence vectors)")
    add_alignment_arguments(p)
    add_length_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .align_sentences import alignment_options, bitext_languages, check_outputs, raw_text, write_alignments

    from .inputs import read_input
    from ..methods import default_method
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions
    from ..align.similarity import align
    from .preflight import check_output_file

    check_output_file(args.output, (args.src, args.tgt))
    if args.sentences:
        check_outputs(argparse.Namespace(**{**vars(args), "output": args.sentences}), (args.src_lang, args.tgt_lang),
                      (args.src, args.tgt, args.output))
        options = alignment_options(args)  # documents paired here may leave sentences out: the omission-aware one
    src = list(read_input(args, inputs=args.src))
    tgt = list(read_input(args, inputs=args.tgt))
    for path, records in ((args.src, src), (args.tgt, tgt)):  # the output is TSV: checked before encoding
        for n, r in enumerate(records, 1):
            if any(c in r.doc_id for c in "\t\n\r"):
                raise HmdeError(f"{path}: document {n} has id {r.doc_id!r}, with a tab or line break, which the "
                                "TSV output cannot hold")
    from ..text.coverage import languages_of

    languages = languages_of([args.src_lang or r.lang for r in src] + [args.tgt_lang or r.lang for r in tgt],
                             [r.text for r in src] + [r.text for r in tgt])
    kind, model = load_model(args.model, pick_device(args.device), args=args, languages=languages)
    method = args.method or default_method(kind == "hmde", args.model, getattr(args, "preset", None))
    if args.k < 1 or args.candidates < 1:
        raise HmdeError("--k and --candidates must be >= 1")
    vec = DocumentVectorizer(model, method, MethodOptions(autocast_dtype=autocast_dtype(args.bf16),
                                                          show_progress_bar=not args.no_progress,
                                                          **lawdr_fit_options(args)))
    src_langs = [args.src_lang or r.lang for r in src]
    tgt_langs = [args.tgt_lang or r.lang for r in tgt]
    if vec.document_method.fitted:  # on both sides together, as LAWDR's paper aligns
        vec.fit_lawdr([r.text for r in src] + [r.text for r in tgt], src_langs + tgt_langs)
    if args.sentences:  # one pass gives the documents' sentences and their vectors too
        x, src_units, src_vectors = vec.encode_with_sentences([r.text for r in src], src_langs)
        y, tgt_units, tgt_vectors = vec.encode_with_sentences([r.text for r in tgt], tgt_langs)
    else:
        x = vec.encode([r.text for r in src], src_langs)
        y = vec.encode([r.text for r in tgt], tgt_langs)
    pairs = align(x, y, args.scoring, args.k, args.direction, args.candidates, args.threshold)
    lines = ["src_id\ttgt_id\tscore\n"] + [f"{src[i].doc_id}\t{tgt[j].doc_id}\t{s:.6f}\n" for i, j, s in pairs]
    write_text_atomic(args.output, "".join(lines))
    print(f"wrote {len(pairs)} pairs ({args.scoring}, {args.direction}) to {args.output}")
    if args.sentences:
        sentence_args = argparse.Namespace(**{**vars(args), "output": args.sentences})
        docs = [(src[i].doc_id, tgt[j].doc_id, list(src_units[i]), list(tgt_units[j]), raw_text(src[i]),
                 raw_text(tgt[j])) for i, j, _ in pairs if len(src_units[i]) and len(tgt_units[j])]
        vectors = {("src", src[i].doc_id): src_vectors[i] for i, _, _ in pairs}
        vectors.update({("tgt", tgt[j].doc_id): tgt_vectors[j] for _, j, _ in pairs})
        return write_alignments(sentence_args, docs, lambda texts: vec.lower.encode(list(texts)), options,
                                lambda doc, side: vectors[(side, doc)], langs=bitext_languages(sentence_args, docs))
    return 0
