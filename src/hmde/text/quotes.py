"""Quotation marks and the sentence splitter (issues 77 and 95). A splitter keeps a quotation whole until its closing
mark; where the marks are typed in a way it does not pair, or a quotation holds many sentences, it merged them:

- Chinese and Japanese typed with an ASCII ``"`` opening and ``“`` closing were one quotation to the splitter
  (:func:`directed_quotes`: the double quotes turned by their order);
- a German quotation opened with ``„`` and closed with a plain ``"`` left the ``"`` opening a quotation the splitter
  looked for the end of, over the next sentences, to the next ``"`` (one "sentence" of 1,726 characters spanned 11):
  :func:`paired_quotes` reads that ``"`` as the ``“`` that closes ``„``;
- a quotation of several sentences (French ``« ... »``) stayed one segment (688 characters): a piece longer than
  :data:`LONG_PIECE` characters that holds a quotation is split again with its quotation marks read as spaces
  (:func:`split_long_quoted`), each mark then given back to the sentence it opens or closes.

Every change is character for character, so the pieces are cut from the text as written."""

from __future__ import annotations

import re
from typing import Callable

# a piece longer than this that holds quotation marks is split inside them: 97.5% of the dev data's WMT sentences
# (12 languages, 140k sentences) are shorter (median 106, 99th percentile 399 characters); a character of a script
# written without spaces counts 3 (Japanese sentences' median is 50 characters, English ones' 106)
LONG_PIECE = 300
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
QUOTE_MARKS = "\"“”„‚«»‹›「」『』"
OPENERS, CLOSERS = "„‚«‹「『", "»›」』"  # the others (" “ ”) open or close by their order
_DOUBLE_QUOTES = "\"“”"


def pieces_of(split: Callable[[str], list[str]], turned: str, block: str) -> list[str] | None:
    """``split`` run on ``turned`` (``block`` with characters swapped one for one), its pieces cut from ``block``;
    None where the splitter changed a piece (its own text, not ours to map back)."""
    out, pos = [], 0
    for piece in split(turned):
        start = turned.find(piece, pos)
        if start < 0:
            return None
        out.append(block[start:start + len(piece)])
        pos = start + len(piece)
    return out


def directed_quotes(split):
    """``split`` run on the text with its double quotes turned by their order (the first opens, ``“``, the next
    closes, ``”``, and so on), the pieces then cut from the text as written (Chinese, Japanese: issue 77)."""
    def directed(block: str) -> list[str]:
        if not any(c in block for c in _DOUBLE_QUOTES):
            return split(block)
        chars, opened = list(block), False
        for i, c in enumerate(chars):
            if c in _DOUBLE_QUOTES:
                chars[i] = "”" if opened else "“"
                opened = not opened
        return pieces_of(split, "".join(chars), block) or split(block)

    return directed


def paired_quotes(split):
    """``split`` run on the text with a plain ``"`` that follows an open ``„`` read as the ``“`` that closes it."""
    def paired(block: str) -> list[str]:
        if "„" not in block or '"' not in block:
            return split(block)
        chars, low_open = list(block), False
        for i, c in enumerate(chars):
            if c == "„":
                low_open = True
            elif c in "“”" and low_open:
                low_open = False
            elif c == '"' and low_open:
                chars[i], low_open = "“", False
        return pieces_of(split, "".join(chars), block) or split(block)

    return paired


def _closes(piece: str) -> list[bool]:
    """For each character of ``piece``: whether it is a quotation mark that closes (the symmetric ones by their
    order in the piece)."""
    out, opened = [], False
    for c in piece:
        if c in CLOSERS:
            out.append(True)
            opened = False
        elif c in OPENERS:
            out.append(False)
            opened = True
        elif c in _DOUBLE_QUOTES:
            out.append(opened)
            opened = not opened
        else:
            out.append(False)
    return out


def width(piece: str) -> int:
    """A piece's length, a character of a script written without spaces counted 3 (about a word's worth)."""
    return len(piece) + 2 * len(_UNSPACED.findall(piece))


def split_long_quoted(pieces: list[str], split) -> list[str]:
    """Each piece longer than :data:`LONG_PIECE` that holds a quotation mark split again with the marks read as
    spaces; the marks and spaces between two new pieces go to the first up to its last closing mark, the rest to the
    second. A piece the splitter does not cut stays as it was."""
    out: list[str] = []
    for piece in pieces:
        if width(piece) <= LONG_PIECE or not any(c in QUOTE_MARKS for c in piece):
            out.append(piece)
            continue
        blank = "".join(" " if c in QUOTE_MARKS else c for c in piece)
        parts = [p.strip() for p in split(blank) if p.strip()]
        spans, pos = [], 0
        for part in parts:
            start = blank.find(part, pos)
            if start < 0:
                spans = []
                break
            spans.append([start, start + len(part)])
            pos = start + len(part)
        if len(spans) < 2:
            out.append(piece)
            continue
        closes = _closes(piece)
        spans[0][0], spans[-1][1] = 0, len(piece)
        for a, b in zip(spans, spans[1:]):
            last_closer = max((i for i in range(a[1], b[0]) if closes[i]), default=None)
            if last_closer is not None:
                a[1] = last_closer + 1
            b[0] = a[1]
        out.extend(s for s in (piece[x:y].strip() for x, y in spans) if s)
    return out
