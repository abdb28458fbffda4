"""Split documents into the units the lower encoder embeds.

Sentence splitting uses `sentencex`, a maintained rule-based splitter with
per-language abbreviation lists and CJK, Arabic and Latin punctuation; Thai, Lao and
Khmer, whose sentences it cannot see, go to :mod:`hmde.text.script_sentences`. Token
budgets (long sentences, 128-token chunks, sliding windows) are handled here too, on
the lower encoder's own tokenizer, so that every unit fits the sentence encoder.
"""

from __future__ import annotations

import re
from typing import Sequence


# sentencex knows languages by ISO 639-1 code (with fallbacks); our data uses 639-3.
ISO3_TO_ISO1 = {
    "afr": "af", "amh": "am", "ara": "ar", "arb": "ar", "aze": "az", "bel": "be", "ben": "bn",
    "bos": "bs", "bre": "br", "bul": "bg", "cat": "ca", "ces": "cs", "cym": "cy", "dan": "da",
    "deu": "de", "ell": "el", "eng": "en", "epo": "eo", "est": "et", "eus": "eu", "fas": "fa",
    "pes": "fa", "fin": "fi", "fra": "fr", "gla": "gd", "gle": "ga", "glg": "gl", "glv": "gv",
    "guj": "gu", "hau": "ha", "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy",
    "ibo": "ig", "ind": "id", "isl": "is", "ita": "it", "jpn": "ja", "kab": "kab", "kat": "ka",
    "kaz": "kk", "khm": "km", "kor": "ko", "lat": "la", "lav": "lv", "lit": "lt", "mal": "ml",
    "mar": "mr", "mkd": "mk", "mon": "mn", "msa": "ms", "zsm": "ms", "mya": "my", "nld": "nl",
    "nob": "nb", "nor": "no", "orm": "om", "pol": "pl", "por": "pt", "pus": "ps", "ron": "ro",
    "rus": "ru", "sin": "si", "slk": "sk", "slv": "sl", "sna": "sn", "som": "so", "spa": "es",
    "sqi": "sq", "srp": "sr", "swa": "sw", "swh": "sw", "swe": "sv", "tam": "ta", "tel": "te",
    "tha": "th", "tir": "ti", "tur": "tr", "ukr": "uk", "urd": "ur", "uzb": "uz", "vie": "vi",
    "wol": "wo", "xho": "xh", "yor": "yo", "yue": "zh", "zho": "zh", "cmn": "zh", "zul": "zu",
    "ewe": "ee", "lin": "ln", "lug": "lg", "que": "qu", "tat": "tt", "uig": "ug", "kur": "ku",
    "lao": "lo",
}


def splitter_language(lang: str | None, default: str = "en") -> str:
    """Map a language code (639-1, 639-3, or a BCP-47 tag) to sentencex's code."""
    if not lang:
        return default
    code = lang.strip().lower().replace("_", "-").split("-")[0]
    return ISO3_TO_ISO1.get(code, code)


def has_content(unit: str) -> bool:
    """Whether a unit holds a letter, digit or symbol of a script: a lone "." or "—" does not (it was
    stored, and shown as a hit's best sentence)."""
    import unicodedata

    return any(unicodedata.category(c)[0] in "LNS" for c in unit)


from .quotes import directed_quotes, paired_quotes, split_long_quoted  # noqa: E402  (directed_quotes: its name here)


def split_sentences(text: str, lang: str | None = None, default_language: str = "en") -> list[str]:
    """Split ``text`` into sentences; pieces of only whitespace and punctuation are dropped."""
    if not text or not text.strip():
        return []
    from .script_sentences import SPLITTERS

    code = splitter_language(lang, default_language)
    if code in SPLITTERS:
        split = SPLITTERS[code]
    else:  # imported here: a training run whose units are cached (a GPU pack) segments nothing and lacks it
        from sentencex import segment

        def split(block: str) -> list[str]:
            return segment(code, block)
    split = paired_quotes(split)  # hmde.text.quotes: quotation marks that merged sentences (issues 77, 95)
    if code in QUOTE_DIRECTED:
        split = directed_quotes(split)
    pieces = [p for block in heading_blocks(text) for p in split_long_quoted(split(block), split)]
    return join_fragments([p.strip() for p in pieces if p and p.strip() and has_content(p)], text)


QUOTE_DIRECTED = ("zh", "ja")  # languages whose splitter keeps a quotation whole until its closing mark


# what a line may end with and still go on, or end its sentence as the splitter decides: sentence-final marks of many
# scripts, and marks after which a sentence continues on the next line
_LINE_GOES_ON = set(".!?…‼⁇⁈⁉。！？｡．؟۔।॥၊။።፧፨჻។៕᙮᠃᠉߹꓿꘎꘏꛳꛷:;,、，；：-‐–—/&+=([]")
_CLOSERS = "\"'”’»›)}」』〕〉》】"  # not "]": a line that ends in a note ("[citation needed]") goes on
_OPENERS = "\"'“‘„«‹(「『〔〈《【¿¡"


def heading_blocks(text: str) -> list[str]:
    """``text`` cut at each line break after a line that ends without any punctuation (a title, a heading, a list
    item) when the next line starts a sentence (with a capital, or a letter of a script without case, after any
    opening quote or bracket; not a lowercase letter, a digit or a mark: "compressed O" + "2." stays): such a line is a
    sentence of its own, where a splitter glued it to the next line's first sentence ("Hong Kong protests grow" +
    "Thousands marched on Sunday."; issue 64). A line that ends in punctuation, or that the next line continues in
    lowercase (text wrapped at a width), is left to the splitter."""
    if "\n" not in text:
        return [text]
    lines = text.split("\n")
    blocks, start = [], 0
    for i, line in enumerate(lines[:-1]):
        end = line.rstrip().rstrip(_CLOSERS)
        follow = lines[i + 1].lstrip().lstrip(_OPENERS)
        if end and end[-1] not in _LINE_GOES_ON and follow[:1].isalpha() and not follow[0].islower() and has_word(end):
            blocks.append("\n".join(lines[start:i + 1]))
            start = i + 1
    blocks.append("\n".join(lines[start:]))
    return blocks


# a piece ending in an initial: one letter of any script ("J.", "Α.", "א."), or a capital and a small letter of
# Greek or Cyrillic, which write one Latin initial with two ("Τζ." for J, "Дж." for J, "Ντ." for D)
_INITIAL = re.compile(r"(?:^|[\s\-‐(])(?:[^\W\d_]|[Α-ΩΆ-Ώ][α-ωά-ώ]|[А-ЯЁ][а-яё])\.$")
# what Wikipedia leaves at the start of the next piece: page numbers of a citation (":212–219") and bracketed
# notes ("[citation needed]", "[1]"); they belong to the sentence before
_LEADING_NOTE = re.compile(r"^(?::\s?\d[\d\s,–\-]*|\[[^\[\]]{1,40}\])+\s*")
# scripts written without spaces, where one character is a word
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u0f00-\u0fff\u3040-\u30ff\u3400-\u9fff"
                       "\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]{2,}")


def has_word(unit: str) -> bool:
    """Whether a unit holds a word: two letters in a row, or a character of a script written without spaces.
    "Α.", ":212–219" and "1." hold none: alone, such a unit is no sentence (issue 57: "Α." was the best
    sentence of 124 of 2,000 hits for Greek queries)."""
    return bool(_WORD.search(unit) or _UNSPACED.search(unit))


def join_fragments(pieces: list[str], text: str | None = None) -> list[str]:
    """The splitter's pieces with its false cuts mended, in every script: a piece ending in an initial is
    joined to the next ("Ο θεωρητικός Τζ." + "Α." + "Χόμπσον έγραψε."); a citation's page numbers or a
    bracketed note opening a piece go to the end of the piece before; a piece without a word joins its
    neighbour (the next where it looks like a marker, "1." or "Α.", else the one before). Joined pieces are
    the ``text`` between them as written ("J.-A."; a space where the pieces cannot be found in it)."""
    spans, pos = [], 0
    for piece in pieces:
        start = text.find(piece, pos) if text is not None else -1
        if start < 0:
            spans = None
            break
        spans.append((start, start + len(piece)))
        pos = start + len(piece)

    def joined(a: tuple, b: tuple) -> tuple:  # pieces as (text, first index, last index)
        if spans is not None:
            return text[spans[a[1]][0]:spans[b[2]][1]].strip(), a[1], b[2]
        return f"{a[0]} {b[0]}", a[1], b[2]

    out: list[tuple] = []
    carry = None  # a piece waiting to open the next one
    for i, piece in enumerate(pieces):
        item = (piece, i, i)
        if carry is not None:
            item, carry = joined(carry, item), None
        note = _LEADING_NOTE.match(item[0])
        if note and out and note.end() < len(item[0]):
            head, rest = item[0][:note.end()].rstrip(), item[0][note.end():]
            if spans is not None:  # the note stays with the sentence it closes, as written
                out[-1] = (text[spans[out[-1][1]][0]:spans[item[1]][0] + len(head)].strip(), out[-1][1], out[-1][2])
            else:
                out[-1] = (out[-1][0] + head, out[-1][1], out[-1][2])
            item = (rest, item[1], item[2])
            if spans is not None:
                spans[item[1]] = (spans[item[1]][0] + note.end(), spans[item[1]][1]) if item[1] == item[2] \
                    else spans[item[1]]
        if _INITIAL.search(item[0]) or (not has_word(item[0]) and (not out or item[0][-1:] in ".)")):
            carry = item
            continue
        if not has_word(item[0]) and out:
            out[-1] = joined(out[-1], item)
            continue
        out.append(item)
    if carry is not None:
        if out and not has_word(carry[0]):
            out[-1] = joined(out[-1], carry)
        else:
            out.append(carry)
    return [x[0] for x in out]


CLAUSE_ENDS = ",;:、，；：)]}»”\"'"  # a cut after one of these keeps a clause whole


def word_pieces(sentence: str, tokenizer, budget: int) -> list[str]:
    """An over-long sentence in consecutive pieces of at most ``budget`` content tokens, cut between words:
    after the last clause mark (comma, semicolon, colon...) in the second half of a window, else at the
    last space, and inside a word only where a window holds no space at all (a script written without
    spaces, a URL). Every piece is a substring of the sentence; nothing is lost."""
    enc = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    offsets = [o for o in enc["offset_mapping"] if o[1] > o[0]]
    n = len(offsets)
    if n <= budget:
        return [sentence.strip()] if sentence.strip() else []
    pieces, start = [], 0
    while start < n:
        end = min(start + budget, n)
        if end < n:
            # token k starts a word where a space precedes it (SentencePiece offsets may include the space)
            gaps = [k for k in range(start + 1, end + 1)
                    if sentence[offsets[k][0]].isspace() or sentence[offsets[k][0] - 1].isspace()]
            clauses = [k for k in gaps if k > start + budget // 2
                       and sentence[:offsets[k][0]].rstrip()[-1:] in CLAUSE_ENDS]
            if clauses:
                end = clauses[-1]
            elif gaps:
                end = gaps[-1]
        piece = sentence[offsets[start][0]:offsets[end - 1][1]].strip()
        if piece:
            pieces.append(piece)
        start = end
    return pieces


def token_windows(
    text: str,
    tokenizer,
    window_tokens: int,
    stride_tokens: int | None = None,
    max_windows: int | None = None,
) -> list[str]:
    """Cut ``text`` into pieces of at most ``window_tokens`` content tokens.

    The cut is made on the tokenizer's character offsets, so every piece is a
    substring of the original text. ``stride_tokens`` < ``window_tokens`` makes the
    windows overlap (the "Seg" baseline: stride 2/3 of the window). Pieces are
    returned as text so they go through the same tokenization as every sentence.
    """
    stride = stride_tokens or window_tokens
    if stride <= 0 or window_tokens <= 0:
        raise ValueError("window and stride must be positive")
    # verbose=False: transformers would warn that a sequence over model_max_length "will result in indexing
    # errors"; here the whole text is tokenized on purpose, to be cut into windows that fit
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    offsets = [o for o in enc["offset_mapping"] if o[1] > o[0]]
    n = len(offsets)
    if n == 0:
        return [text.strip()] if text.strip() else []
    pieces: list[str] = []
    start = 0
    while start < n:
        end = min(start + window_tokens, n)
        piece = text[offsets[start][0] : offsets[end - 1][1]].strip()
        if piece:
            pieces.append(piece)
        if end == n or (max_windows is not None and len(pieces) >= max_windows):
            break
        start += stride
    return pieces


# A "sentence" longer than this (a text with no sentence punctuation, a 50 MB one-line file) is cut at
# whitespace into blocks of at most this many characters before it is tokenised: tokenising it whole
# with offsets took about 200 bytes per character (11.9 GB for 50 MB). Far above any real sentence
# (128 tokens are some 600 characters), so sentences as they occur are never cut here.
BLOCK_CHARS = 100_000


def character_blocks(text: str, limit: int = BLOCK_CHARS) -> list[str]:
    """``text`` in consecutive pieces of at most ``limit`` characters, cut at the last whitespace
    before the limit where there is one (the pieces keep every character except that whitespace)."""
    if len(text) <= limit:
        return [text]
    blocks, start = [], 0
    while len(text) - start > limit:
        cut = start + limit
        space = max(text.rfind(" ", start, cut), text.rfind("\n", start, cut))
        if space > start:
            cut = space
        blocks.append(text[start:cut])
        start = cut + 1 if cut < len(text) and text[cut] in " \n" else cut
    blocks.append(text[start:])
    return [b for b in blocks if b.strip()]


def groups_of_chars(texts: Sequence[str], limit: int):
    """Consecutive groups of ``texts`` of at most ``limit`` characters together (one text may exceed it):
    what one tokenizer call takes, so that its encodings never hold a huge input at once."""
    group, size = [], 0
    for text in texts:
        if group and size + len(text) > limit:
            yield group
            group, size = [], 0
        group.append(text)
        size += len(text)
    if group:
        yield group


def fit_to_budget(
    sentences: Sequence[str], tokenizer, max_tokens: int, mode: str = "split", ids_out: list | None = None
) -> list[str]:
    """Make every sentence fit ``max_tokens`` (special tokens included).

    ``split`` cuts over-long sentences into consecutive pieces (nothing is lost);
    ``truncate`` leaves them as they are, for the encoder's own truncation.
    ``ids_out``, when given, receives each returned unit's token ids (special tokens
    included), or None where the unit still needs tokenizing (split pieces, truncate mode):
    the budget check already tokenized the sentence, so the encoder need not do it again.
    """
    if mode == "truncate" or not sentences:
        if ids_out is not None:
            ids_out.extend([None] * len(sentences))
        return list(sentences)
    budget = max_tokens - tokenizer.num_special_tokens_to_add(pair=False)
    sentences = [block for s in sentences for block in character_blocks(s)]
    encoded = []
    for group in groups_of_chars(sentences, BLOCK_CHARS):  # the tokenizer's memory is bounded by a group
        encoded.extend(tokenizer(group, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])  # sized, then split
    out: list[str] = []
    for sentence, ids in zip(sentences, encoded):
        if len(ids) <= max_tokens:
            out.append(sentence)
            if ids_out is not None:
                ids_out.append(list(ids))
        else:
            pieces = word_pieces(sentence, tokenizer, budget)
            out.extend(pieces)
            if ids_out is not None:
                ids_out.extend([None] * len(pieces))
    return out


def chunk_document(text: str, tokenizer, max_tokens: int) -> list[str]:
    """The paper's ablation: consecutive chunks of ``max_tokens`` tokens (special incl.)."""
    budget = max_tokens - tokenizer.num_special_tokens_to_add(pair=False)
    return token_windows(text, tokenizer, budget)


def segment_document(document, lang, config, tokenizer, ids_out: list | None = None) -> list[str]:
    """The lower-encoder inputs of one document under ``config`` (an HierarchicalConfig).

    A string is split into sentences (or 128-token chunks); a list of strings is taken
    as already split. Over-long sentences are split or truncated according to
    ``config.long_sentences``. Empty pieces are dropped. Torch-free, so exported (ONNX)
    models segment exactly like the PyTorch model.
    """
    from ..errors import HmdeError

    if isinstance(document, str):
        if config.segmentation == "chunks":
            chunks = chunk_document(document, tokenizer, config.max_sentence_tokens)
            if ids_out is not None:
                ids_out.extend([None] * len(chunks))
            return chunks
        units = split_sentences(document, lang, config.default_language)
    else:
        units = [s.strip() for s in document if isinstance(s, str) and s.strip() and has_content(s)]
        if len(units) != len([s for s in document if s is not None]) and any(not isinstance(s, str) for s in document):
            raise HmdeError("a pre-split document must be a list of strings")
    return fit_to_budget(units, tokenizer, config.max_sentence_tokens, config.long_sentences, ids_out)


def window_ranges(n_units: int, max_sentences: int, long_documents: str = "windows") -> list[tuple[int, int]]:
    """Sentence ranges the upper encoder sees for a document of ``n_units`` units."""
    if n_units == 0:
        return []
    if n_units <= max_sentences or long_documents == "truncate":
        return [(0, min(n_units, max_sentences))]
    return [(s, min(s + max_sentences, n_units)) for s in range(0, n_units, max_sentences)]
