"""``hmde align-sentences [MODEL] SRC TGT -o OUT``: which sentences translate which, inside aligned
documents (:mod:`hmde.align.sentence_alignment`), written as JSONL, Vecalign lines or a TSV bitext."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import HmdeError, InputError
from .arg_types import positive_int
from .common import add_model_argument, finite_float


def register(sub) -> None:
    p = sub.add_parser("align-sentences", help="align the sentences of aligned documents (1-1, 1-2, 2-1, skips...)",
                       description="SRC and TGT are two plain-text files, one sentence per line (one document each, "
                       "as Vecalign and Bertalign take them: nothing is re-split), or two document collections "
                       "(.jsonl, .tsv, .parquet) with --pairs PAIRS.tsv, as `hmde align` writes it.")
    add_model_argument(p)
    p.add_argument("src", metavar="SRC")
    p.add_argument("tgt", metavar="TGT")
    p.add_argument("--pairs", help="PAIRS.tsv (src_id, tgt_id[, score]): the document pairs of two collections")
    p.add_argument("--output", "-o", required=True, help="OUT.jsonl (or .txt / .tsv with --format)")
    add_alignment_arguments(p)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the document pairs")
    p.set_defaults(func=run)


def add_alignment_arguments(p) -> None:
    from ..io.alignments import FORMATS

    g = p.add_argument_group("sentence alignment")
    g.add_argument("--format", choices=FORMATS, default="jsonl", help="jsonl (default: one bead per line, with its "
                   "texts), vecalign ([i, ...]:[j, ...]:score) or tsv (a two-column bitext of the aligned beads)")
    g.add_argument("--min-score", type=finite_float, help="tsv: keep beads whose cosine is at least this")
    g.add_argument("--max-merge", type=positive_int, default=5, help="sentences of both sides together in one bead "
                   "(default 5: 1-1 ... 1-4, 2-2, 2-3, 3-2; 4 is Vecalign's default)")
    g.add_argument("--length-weight", type=finite_float, default=0.25, help="weight of the length penalty (how far "
                   "a bead's character ratio strays from the document's; default 0.25, issue 45's 1.0, 0: none)")
    g.add_argument("--no-anchors", dest="anchors", action="store_false", help="one programme over every span "
                   "(issue 45's aligner), instead of confident 1-1 anchors first and merges only between them")


def read_sentence_file(path: str) -> list[str]:
    """One sentence per line, kept as written (empty lines dropped, their numbers kept in errors)."""
    from ..io.documents import open_text

    with open_text(path) as f:
        sentences = [line.rstrip("\n").rstrip("\r").strip() for line in f]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise InputError("holds no sentence (one sentence per line)", path)
    return sentences


def read_pairs_file(path: str, src_ids: set[str], tgt_ids: set[str]) -> list[tuple[str, str]]:
    """``hmde align``'s PAIRS.tsv; an id neither collection holds is named with its line."""
    from ..io.documents import open_text

    pairs = []
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            cols = line.rstrip("\n").rstrip("\r").split("\t")
            if n == 1 and cols[:2] == ["src_id", "tgt_id"] or not line.strip():
                continue
            if len(cols) < 2:
                raise InputError("expected 'src_id<TAB>tgt_id[<TAB>score]'", path, n)
            if cols[0] not in src_ids:
                raise InputError(f"the source collection has no document '{cols[0]}'", path, n, "src_id")
            if cols[1] not in tgt_ids:
                raise InputError(f"the target collection has no document '{cols[1]}'", path, n, "tgt_id")
            pairs.append((cols[0], cols[1]))
    if not pairs:
        raise InputError("holds no document pair", path)
    return pairs


def as_sentences(record, path: str) -> list[str]:
    from ..text.segmentation import split_sentences

    sentences = list(record.text) if isinstance(record.text, list) else split_sentences(record.text, record.lang)
    sentences = [s.strip() for s in sentences if s and s.strip()]
    if not sentences:
        raise InputError(f"document '{record.doc_id}' has no sentence to align", path, record.line, "text")
    return sentences


def documents(args: argparse.Namespace) -> list[tuple[str, str, list[str], list[str]]]:
    """(src_doc, tgt_doc, src sentences, tgt sentences) per pair, every input checked before any model loads."""
    from ..io.documents import read_documents

    if not args.pairs:
        return [(Path(args.src).name, Path(args.tgt).name, read_sentence_file(args.src), read_sentence_file(args.tgt))]
    src = {r.doc_id: r for r in read_documents(args.src)}
    tgt = {r.doc_id: r for r in read_documents(args.tgt)}
    pairs = read_pairs_file(args.pairs, set(src), set(tgt))
    langs = ({src[a].lang for a, _ in pairs} - {None}, {tgt[b].lang for _, b in pairs} - {None})
    for side, found in zip(("source", "target"), langs):
        if len(found) > 1:
            raise HmdeError(f"the {side} documents of --pairs are in several languages ({', '.join(sorted(found))}): "
                            "a pairs file aligns one language with another")
    return [(a, b, as_sentences(src[a], args.src), as_sentences(tgt[b], args.tgt)) for a, b in pairs]


def alignment_options(args: argparse.Namespace):
    """The aligner's settings from the flags; an impossible one is refused in one line (called before any model
    loads)."""
    from ..align.sentence_alignment import AlignmentOptions

    return AlignmentOptions(max_merge=args.max_merge, anchors=args.anchors, length_weight=args.length_weight).check()


def write_alignments(args: argparse.Namespace, pairs, embed, singles=None) -> int:
    """Align every pair and write them; ``singles(doc_id, side)``: 1-sentence vectors already computed.
    Merged spans are embedded in batches across the pairs (:func:`~hmde.align.sentence_alignment.align_many`)."""
    from tqdm.auto import tqdm

    from ..ground.atomic import write_text_atomic
    from ..io.alignments import alignment_lines
    from ..align.sentence_pairs import align_many

    options = alignment_options(args)

    with tqdm(total=len(pairs), desc="document pairs", unit="pair",
              disable=getattr(args, "no_progress", False) or len(pairs) < 2) as bar:
        found = align_many([(src, tgt, singles(src_doc, "src") if singles else None,
                             singles(tgt_doc, "tgt") if singles else None) for src_doc, tgt_doc, src, tgt in pairs],
                           embed, options, progress=bar.update)
    lines, beads_total = [], 0
    for (src_doc, tgt_doc, src, tgt), beads in zip(pairs, found):
        beads_total += len(beads)
        lines += alignment_lines(src_doc, tgt_doc, src, tgt, beads, args.format, args.min_score)
    write_text_atomic(args.output, "".join(lines))
    print(f"aligned {len(pairs)} document pair(s): {beads_total} beads, {len(lines)} lines ({args.format}) in "
          f"{args.output}")
    return 0


def run(args: argparse.Namespace) -> int:
    from .common import load_model, pick_device
    from .preflight import check_output_file

    check_output_file(args.output, (args.src, args.tgt, args.pairs))
    if args.min_score is not None and args.format != "tsv":
        raise HmdeError("--min-score filters the tsv bitext: add --format tsv")
    alignment_options(args)
    pairs = documents(args)
    kind, model = load_model(args.model, pick_device(args.device))
    lower = model.lower if kind == "hmde" else model
    return write_alignments(args, pairs, lambda texts: lower.encode(list(texts)))
