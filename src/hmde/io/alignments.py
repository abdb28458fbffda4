"""Sentence alignments as files, in the formats corpus builders read:

- ``jsonl`` (hmde's): one bead per line, with its texts, its score and, where hmde split the documents, each
  sentence's character span;
- ``vecalign``: Vecalign's ``[i, ...]:[j, ...]:score`` lines;
- ``tsv``: the bitext, exactly two columns (source, target) and no header, as MT tools read it;
- ``scored``: the bitext with its evidence, under a header line: ``src_text, tgt_text, score, src_doc, tgt_doc``;
- ``moses``: two plain-text files, line i of one translating line i of the other (``OUT.en`` and ``OUT.fr``);
- ``tmx``: a TMX 1.4b translation memory, one ``<tu>`` a bead with its score as a property.

The bitext formats (``tsv``, ``scored``, ``moses``, ``tmx``) hold the beads with both sides, scoring at least
``min_score``; a bead's sentences are joined by a space and its line breaks and tabs made spaces.
"""

from __future__ import annotations

import json
import re
from contextlib import nullcontext
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import InputError

FORMATS = ("jsonl", "vecalign", "tsv", "scored", "moses", "tmx")
BITEXT_FORMATS = ("tsv", "scored", "moses", "tmx")
FORMAT_HELP = ("jsonl (default: one bead per line, with its texts and score), vecalign ([i, ...]:[j, ...]:score), "
               "tsv (the bitext: two columns, source and target, no header), scored (the bitext with score, src_doc "
               "and tgt_doc under a header), moses (two plain-text files OUT.SRC and OUT.TGT, named by the two "
               "languages), tmx (a TMX 1.4b translation memory)")
SCORED_HEADER = "src_text\ttgt_text\tscore\tsrc_doc\ttgt_doc\n"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # characters XML 1.0 cannot hold


def alignment_lines(src_doc: str, tgt_doc: str, src: Sequence[str], tgt: Sequence[str], beads: Iterable, fmt: str,
                    min_score: float | None = None, src_spans: Sequence[tuple[int, int]] | None = None,
                    tgt_spans: Sequence[tuple[int, int]] | None = None) -> list:
    """The records of one document pair's beads (:class:`hmde.align.sentence_alignment.Bead`) in ``fmt``: lines of
    text for ``jsonl``, ``vecalign``, ``tsv`` and ``scored``; (source, target, score) for ``moses`` and ``tmx``
    (:func:`write_alignment_files` writes them). The bitext formats hold only beads with both sides, scoring at least
    ``min_score``. ``src_spans``/``tgt_spans``: each sentence's ``[start, end)`` in the text hmde split (-1, -1: not
    found), written with the JSONL beads."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown alignment format {fmt!r} ({', '.join(FORMATS)})")
    out = []
    for bead in beads:
        src_text = " ".join(src[i] for i in bead.src)
        tgt_text = " ".join(tgt[j] for j in bead.tgt)
        if fmt == "jsonl":
            line = {"src_doc": src_doc, "tgt_doc": tgt_doc, "src": bead.src, "tgt": bead.tgt,
                    "score": round(bead.score, 6), "src_text": src_text, "tgt_text": tgt_text}
            if src_spans is not None:
                line["src_spans"] = [list(src_spans[i]) for i in bead.src]
            if tgt_spans is not None:
                line["tgt_spans"] = [list(tgt_spans[j]) for j in bead.tgt]
            out.append(json.dumps(line, ensure_ascii=False) + "\n")
        elif fmt == "vecalign":
            out.append(f"{bead.src}:{bead.tgt}:{bead.score:.6f}\n")
        elif bead.src and bead.tgt and (min_score is None or bead.score >= min_score):
            pair = (_one_line(src_text), _one_line(tgt_text))
            if fmt == "tsv":
                out.append(f"{pair[0]}\t{pair[1]}\n")
            elif fmt == "scored":
                out.append(f"{pair[0]}\t{pair[1]}\t{bead.score:.6f}\t{_one_line(src_doc)}\t{_one_line(tgt_doc)}\n")
            else:
                out.append((*pair, bead.score))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def read_sentence_file(path: str) -> list[str]:
    """One sentence per line, kept as written (empty lines dropped, their numbers kept in errors)."""
    from .documents import open_text

    with open_text(path) as f:
        sentences = [line.rstrip("\n").rstrip("\r").strip() for line in f]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise InputError("holds no sentence (one sentence per line)", path)
    return sentences


def read_pairs_file(path: str, src_ids: set[str], tgt_ids: set[str]) -> list[tuple[str, str]]:
    """``hmde align``'s PAIRS.tsv; an id neither collection holds is named with its line."""
    from .documents import open_text

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


def language_tag(code: str | None) -> str | None:
    """A language as BCP 47 writes it (``deu`` -> ``de``, ``zho_Hant`` -> ``zh-Hant``), what Moses' file names and
    TMX's ``xml:lang`` use; None where it is not known."""
    if not code:
        return None
    import langcodes

    try:
        return langcodes.standardize_tag(code.replace("_", "-"))
    except (ValueError, LookupError):
        return None


def output_paths(path: str | Path, fmt: str, src_lang: str | None, tgt_lang: str | None) -> list[Path]:
    """The files ``fmt`` writes for ``-o path``: one, or Moses' two (``path.en``, ``path.fr``; ``path.src`` and
    ``path.tgt`` where a side's language is not known or both are one)."""
    path = Path(path)
    if fmt != "moses":
        return [path]
    src, tgt = language_tag(src_lang), language_tag(tgt_lang)
    if not src or not tgt or src == tgt:
        src, tgt = "src", "tgt"
    return [path.with_name(f"{path.name}.{src}"), path.with_name(f"{path.name}.{tgt}")]


def tmx_text(pairs: Sequence[tuple[str, str, float]], src_lang: str | None, tgt_lang: str | None) -> str:
    """A TMX 1.4b document of the pairs (``und`` where a language is not known)."""
    import xml.etree.ElementTree as ET

    from ..version import __version__

    src, tgt = language_tag(src_lang) or "und", language_tag(tgt_lang) or "und"
    root = ET.Element("tmx", version="1.4")
    ET.SubElement(root, "header", {"creationtool": "hmde", "creationtoolversion": __version__,
                                   "datatype": "plaintext", "segtype": "sentence", "adminlang": "en",
                                   "srclang": src, "o-tmf": "hmde"})
    body = ET.SubElement(root, "body")
    for source, target, score in pairs:
        unit = ET.SubElement(body, "tu")
        ET.SubElement(unit, "prop", type="x-hmde-score").text = f"{score:.6f}"
        for lang, text in ((src, source), (tgt, target)):
            ET.SubElement(ET.SubElement(unit, "tuv", {"xml:lang": lang}), "seg").text = _NOT_XML.sub(" ", text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_alignment_files(path: str | Path, fmt: str, records: list, src_lang: str | None = None,
                     tgt_lang: str | None = None) -> list[Path]:
    """Write :func:`alignment_lines`' records of every pair in ``fmt`` to ``path`` (Moses: its two files, each
    written whole before either is renamed into place); returns the files written."""
    from ..ground.atomic import atomic_path

    paths = output_paths(path, fmt, src_lang, tgt_lang)
    if fmt == "moses":
        texts = ["".join(r[0] + "\n" for r in records), "".join(r[1] + "\n" for r in records)]
    elif fmt == "tmx":
        texts = [tmx_text(records, src_lang, tgt_lang)]
    else:
        texts = [(SCORED_HEADER if fmt == "scored" else "") + "".join(records)]
    with atomic_path(paths[0]) as first, (atomic_path(paths[1]) if len(paths) > 1 else nullcontext()) as second:
        for tmp, text in zip((first, second), texts):
            tmp.write_text(text, encoding="utf-8")
    return paths

