"""``hmde align-sentences [MODEL] SRC TGT -o OUT``: which sentences translate which, inside aligned
documents (:mod:`hmde.align.sentence_alignment`), written as JSONL, Vecalign lines, a bitext (TSV, Moses' two files)
or a TMX translation memory (:mod:`hmde.io.alignments`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import HmdeError, InputError
from .inputs import add_reading_arguments
from .arg_types import bounded_int, language_code
from .common import add_device_argument, add_model_argument, finite_float


def register(sub) -> None:
    p = sub.add_parser("align-sentences", help="align the sentences of aligned documents (1-1, 1-2, 2-1, skips...)",
                       description="SRC and TGT are two plain-text files, one sentence per line (one document each, "
                       "as Vecalign and Bertalign take them: nothing is re-split), two raw texts with --split (hmde "
                       "splits them; the output gives each sentence's character span), or two document collections "
                       "(.jsonl, .tsv, .parquet) with --pairs PAIRS.tsv, as `hmde align` writes it.")
    add_model_argument(p)
    p.add_argument("src", metavar="SRC", help="documents in one language: a folder or file (as `hmde index build` "
                   "reads them: docs/inputs.md)")
    p.add_argument("tgt", metavar="TGT", help="documents in the other: a folder or file")
    add_reading_arguments(p)
    p.add_argument("--pairs", help="PAIRS.tsv (src_id, tgt_id[, score]): the document pairs of two collections")
    p.add_argument("--split", action="store_true", help="SRC and TGT are raw texts (one document each): split them "
                   "into sentences as hmde splits documents, instead of reading one sentence per line")
    p.add_argument("--src-lang", type=language_code, help="--split: the source text's language (default: detected)")
    p.add_argument("--tgt-lang", type=language_code, help="--split: the target text's language (default: detected)")
    p.add_argument("--output", "-o", required=True, help="OUT.jsonl (or .txt, .tsv, .tmx with --format; moses: "
                   "OUT.SRC and OUT.TGT)")
    add_alignment_arguments(p)
    p.add_argument("--omissions", action="store_true", help="two texts whose sentences may be missing on either side "
                   "(not a complete translation): the setting of sentences inside documents paired by `hmde align`, "
                   "and of --pairs (without it, two texts are aligned as complete translations: "
                   "--complete-translation; docs/sentence-alignment.md)")
    add_device_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the document pairs")
    p.set_defaults(func=run)


def add_alignment_arguments(p) -> None:
    from ..align.sentence_alignment import MAX_MERGE
    from ..io.alignments import FORMAT_HELP, FORMATS

    g = p.add_argument_group("sentence alignment")
    g.add_argument("--format", choices=FORMATS, default="jsonl", help=FORMAT_HELP)
    g.add_argument("--min-score", type=finite_float, help="the bitext formats (tsv, scored, moses, tmx): keep beads "
                   "whose cosine is at least this")
    g.add_argument("--max-merge", type=bounded_int(2, MAX_MERGE), default=5, help="sentences of both sides together in one bead "
                   "(default 5: 1-1 ... 1-4, 2-2, 2-3, 3-2; 4 is Vecalign's default; 2 to 10: each step up embeds one "
                   "more span per sentence and side, so memory for span vectors grows as (MAX_MERGE - 1) x sentences)")
    g.add_argument("--complete-translation", action="store_true", help="the texts translate each other whole "
                   "(a book, the Bible, subtitles): skipped sentences join a neighbour's bead more readily and the "
                   "length penalty weighs more (--join-tolerance 0.04 --length-weight 0.5, unless given); fewer "
                   "false skips, but a sentence that is really left out is merged more often; the default of "
                   "`hmde align-sentences` of two texts (docs/sentence-alignment.md)")
    g.add_argument("--length-weight", type=finite_float, help="weight of the length penalty (how far a bead's "
                   "character ratio strays from the document's; default 0.25, --complete-translation 0.5, issue 45's "
                   "1.0, 0: none)")
    g.add_argument("--bead-scoring", dest="bead_scoring", choices=("ratio", "neighbours"), default="ratio", help="the bead cost: ratio "
                   "(default: the cosine distance over the spans' neighbourhoods, x a x b, skips priced from unrelated "
                   "pairs) or neighbours (Bertalign's kind: the cosine less the mean cosine with the sentences around "
                   "the other span, x a length factor; fewer false skips with a weak encoder, more deletions merged "
                   "into a neighbour's bead: docs/sentence-alignment.md)")
    g.add_argument("--skip-score", type=finite_float, default=0.5, help="--bead-scoring neighbours: a skip costs this "
                   "x the median score of the sentences' nearest pairs (default 0.5)")
    g.add_argument("--join-tolerance", type=finite_float, help="after the search, a sentence left out joins the "
                   "aligned bead next to it where the cosine of the joined texts falls by at most this (default 0: "
                   "where it does not fall, as a deleted sentence's join lowers it; --complete-translation 0.04)")
    g.add_argument("--join-length-weight", type=finite_float, help="the joins add this x how much "
                   "nearer the document's character ratio a join brings the bead to the cosine's change (default "
                   "0.03; 0: the cosine alone, as at issue 65's first joins)")
    g.add_argument("--no-joins", dest="joins", action="store_false", help="leave skipped sentences out as the "
                   "search found them (the aligner before issue 65)")
    g.add_argument("--boundary-gain", type=finite_float, help="after the joins, the boundary between two aligned "
                   "beads moves by a sentence where the sum of their cosines rises by more than this (default 0)")
    g.add_argument("--no-boundary-moves", dest="boundary_moves", action="store_false", help="keep the boundaries "
                   "between beads as the search found them (the aligner before stop 72)")
    g.add_argument("--no-anchors", dest="anchors", action="store_false", help="one programme over every span "
                   "(issue 45's aligner), instead of confident 1-1 anchors first and merges only between them")


COLLECTIONS = (".jsonl", ".json", ".tsv", ".parquet")  # document collections: they need --pairs


def is_collection(path: str) -> bool:
    name = str(path).lower()
    return any(name.endswith(ext) or name.endswith(ext + ".gz") for ext in COLLECTIONS)


def read_raw_text(path: str, lang: str | None) -> tuple[str, list[str]]:
    """``--split``: the whole file as one document, split into sentences as hmde splits documents (its language
    given, else detected); (text, sentences)."""
    from ..io.documents import open_text
    from ..text.language_id import detect_languages
    from ..text.segmentation import split_sentences

    with open_text(path) as f:
        text = f.read()
    if not text.strip():
        raise InputError("holds no text to align", path)
    sentences = split_sentences(text, lang or detect_languages([text[:2000]], 0.0)[0])
    if not sentences:
        raise InputError("holds no sentence to align", path)
    return text, sentences


def as_sentences(record, path: str) -> list[str]:
    from ..text.segmentation import split_sentences

    sentences = list(record.text) if isinstance(record.text, list) else split_sentences(record.text, record.lang)
    sentences = [s.strip() for s in sentences if s and s.strip()]
    if not sentences:
        raise InputError(f"document '{record.doc_id}' has no sentence to align", path, record.line, "text")
    return sentences


def documents(args: argparse.Namespace) -> list[tuple[str, str, list[str], list[str]]]:
    """(src_doc, tgt_doc, src sentences, tgt sentences) per pair, every input checked before any model loads."""
    from ..io.alignments import read_pairs_file, read_sentence_file
    from .inputs import read_input

    if not args.pairs:
        for path in (args.src, args.tgt):
            if is_collection(path):
                raise InputError("is a document collection: name its document pairs with --pairs PAIRS.tsv (`hmde "
                                 "align` writes them), or give two text files (one sentence per line, or raw texts "
                                 "with --split)", path)
        if args.split:
            (src_text, src), (tgt_text, tgt) = read_raw_text(args.src, args.src_lang), read_raw_text(args.tgt,
                                                                                                        args.tgt_lang)
            return [(Path(args.src).name, Path(args.tgt).name, src, tgt, src_text, tgt_text)]
        return [(Path(args.src).name, Path(args.tgt).name, read_sentence_file(args.src), read_sentence_file(args.tgt))]
    if args.split:
        raise HmdeError("--split reads two raw texts; documents named by --pairs are split already (their 'text' "
                        "field is split unless it is a list of sentences)")
    src = {r.doc_id: r for r in read_input(args, inputs=args.src)}
    tgt = {r.doc_id: r for r in read_input(args, inputs=args.tgt)}
    pairs = read_pairs_file(args.pairs, set(src), set(tgt))
    langs = ({src[a].lang for a, _ in pairs} - {None}, {tgt[b].lang for _, b in pairs} - {None})
    for side, found in zip(("source", "target"), langs):
        if len(found) > 1:
            raise HmdeError(f"the {side} documents of --pairs are in several languages ({', '.join(sorted(found))}): "
                            "a pairs file aligns one language with another")
    args.src_lang = args.src_lang or next(iter(langs[0]), None)  # the bitext's languages (Moses, TMX)
    args.tgt_lang = args.tgt_lang or next(iter(langs[1]), None)
    return [(a, b, as_sentences(src[a], args.src), as_sentences(tgt[b], args.tgt), raw_text(src[a]), raw_text(tgt[b]))
            for a, b in pairs]


def raw_text(record) -> str | None:
    """A document's text where hmde split it (its sentences get character spans), else None (a list of sentences)."""
    return record.text if isinstance(record.text, str) else None


def alignment_options(args: argparse.Namespace, complete: bool = False):
    """The aligner's settings from the flags (``complete``: the texts are complete translations unless the flags say
    otherwise: two texts of `hmde align-sentences`); an impossible one is refused in one line (called before any
    model loads)."""
    from ..align.sentence_alignment import AlignmentOptions

    given = {name: getattr(args, name) for name in ("length_weight", "join_tolerance", "join_length_weight",
                                                    "boundary_gain") if getattr(args, name) is not None}
    # the rest from AlignmentOptions' defaults or the preset
    if not args.joins:
        given["join_tolerance"] = None
    if not args.boundary_moves:
        given["boundary_gain"] = None
    given.update(max_merge=args.max_merge, anchors=args.anchors, scoring=args.bead_scoring,
                 skip_score=args.skip_score)
    if args.complete_translation or complete:
        return AlignmentOptions.complete_translation(**given).check()
    return AlignmentOptions(**given).check()


def bitext_languages(args: argparse.Namespace, pairs) -> tuple[str | None, str | None]:
    """The bitext's two languages (Moses' file names, TMX): given, the documents', else the first pair's sentences'
    as hmde's identifier reads them (None where it is not sure)."""
    from ..text.language_id import detect_languages

    found = [getattr(args, "src_lang", None), getattr(args, "tgt_lang", None)]
    for side in (0, 1):
        if not found[side] and pairs:
            found[side] = detect_languages([" ".join(pairs[0][2 + side])[:2000]])[0]
    return found[0], found[1]


def write_alignments(args: argparse.Namespace, pairs, embed, options, singles=None,
                     langs: tuple[str | None, str | None] = (None, None)) -> int:
    """Align every pair with ``options`` (:func:`alignment_options`) and write them in ``args.format``, the bitext in
    ``langs`` (Moses' names, TMX); ``singles(doc_id, side)``: 1-sentence vectors already computed.
    A pair is ``(src_doc, tgt_doc, src sentences, tgt sentences)``, plus the two raw texts where hmde split them
    (the beads then give each sentence's character span in its text). Merged spans are embedded in batches across
    the pairs (:func:`~hmde.align.sentence_alignment.align_many`)."""
    from tqdm.auto import tqdm

    from ..io.alignments import alignment_lines, write_alignment_files
    from ..align.sentence_pairs import align_many
    from ..io.representation_parquet import spans

    with tqdm(total=len(pairs), desc="document pairs", unit="pair",
              disable=getattr(args, "no_progress", False) or len(pairs) < 2) as bar:
        found = align_many([(src, tgt, singles(src_doc, "src") if singles else None,
                             singles(tgt_doc, "tgt") if singles else None) for src_doc, tgt_doc, src, tgt, *_ in pairs],
                           embed, options, progress=bar.update)
    lines, beads_total = [], 0
    for (src_doc, tgt_doc, src, tgt, *texts), beads in zip(pairs, found):
        beads_total += len(beads)
        located = [list(zip(*spans(text, side))) if text is not None else None
                   for text, side in zip(texts or (None, None), (src, tgt))]
        lines += alignment_lines(src_doc, tgt_doc, src, tgt, beads, args.format, args.min_score, *located)
    written = write_alignment_files(args.output, args.format, lines, *langs)
    print(f"aligned {len(pairs)} document pair(s): {beads_total} beads, {len(lines)} "
          f"{'lines' if args.format in ('jsonl', 'vecalign') else 'sentence pairs'} ({args.format}) in "
          f"{' and '.join(map(str, written))}")
    return 0


def check_outputs(args: argparse.Namespace, langs, inputs) -> None:
    """Every file the format writes (Moses: two) passes the outputs-are-not-inputs rule, before any model loads."""
    from ..io.alignments import BITEXT_FORMATS, output_paths
    from .preflight import check_output_file

    if args.min_score is not None and args.format not in BITEXT_FORMATS:
        raise HmdeError(f"--min-score filters the bitext formats ({', '.join(BITEXT_FORMATS)}): add --format tsv")
    for path in output_paths(args.output, args.format, *langs):
        check_output_file(str(path), inputs)


def run(args: argparse.Namespace) -> int:
    from ..encoders.backends import FP32
    from .common import load_model, pick_device

    if args.omissions and args.complete_translation:
        raise HmdeError("--omissions and --complete-translation say opposite things: give one")
    check_outputs(args, (args.src_lang, args.tgt_lang), (args.src, args.tgt, args.pairs))
    options = alignment_options(args, complete=not args.pairs and not args.omissions)
    pairs = documents(args)
    langs = bitext_languages(args, pairs)
    check_outputs(args, langs, (args.src, args.tgt, args.pairs))  # the languages now known name Moses' files
    kind, model = load_model(args.model, pick_device(args.device), backend=FP32)  # fp32: the alignment tables were measured with it
    lower = model.lower if kind == "hmde" else model
    return write_alignments(args, pairs, lambda texts: lower.encode(list(texts)), options, langs=langs)
