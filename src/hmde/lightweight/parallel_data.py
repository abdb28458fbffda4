"""Parallel sentence pairs from TSV files (``xxx-yyy.tsv.gz``) or two line-aligned files.

Problems are reported with file and line; with ``skip_bad`` they are counted and
skipped instead, and the counts are returned so a run can report them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..errors import InputError
from ..io.documents import open_text

PAIR_NAME = re.compile(r"^([a-z]{2,8}(?:_[A-Za-z]+)?)-([a-z]{2,8}(?:_[A-Za-z]+)?)\.(?:tsv|txt)(?:\.gz)?$")


@dataclass
class ParallelCorpus:
    """Sentence pairs grouped by language pair, with their sources and skip counts."""

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    pair_of: list[int] = field(default_factory=list)  # index into ``pairs`` for every sentence pair
    pairs: list[tuple[str, str]] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.src)

    def add(self, lang_pair: tuple[str, str], src: str, tgt: str) -> None:
        if lang_pair not in self.pairs:
            self.pairs.append(lang_pair)
        self.src.append(src)
        self.tgt.append(tgt)
        self.pair_of.append(self.pairs.index(lang_pair))

    def counts(self) -> dict[str, int]:
        c = Counter(self.pair_of)
        return {f"{a}-{b}": c[i] for i, (a, b) in enumerate(self.pairs)}


def languages_from_name(path: str | Path) -> tuple[str, str]:
    match = PAIR_NAME.match(Path(path).name)
    if not match:
        raise InputError(
            "the file name names no language pair; expected 'xxx-yyy.tsv' or 'xxx-yyy.tsv.gz' "
            "(ISO 639 codes, e.g. deu-eng.tsv.gz)",
            path=str(path),
        )
    return match.group(1), match.group(2)


def _check_pair(src: str, tgt: str, path, line_no, corpus: ParallelCorpus, skip_bad: bool) -> bool:
    if src.strip() and tgt.strip():
        return True
    if skip_bad:
        corpus.skipped["empty side"] += 1
        return False
    side = "first (source)" if not src.strip() else "second (target)"
    raise InputError(f"the {side} side is empty", str(path), line_no)


def read_tsv_pairs(paths: Sequence[str | Path], skip_bad: bool = False, corpus: ParallelCorpus | None = None,
                   max_pairs_per_file: int | None = None) -> ParallelCorpus:
    """Read ``text_xxx<TAB>text_yyy`` files; languages come from each file's name."""
    corpus = ParallelCorpus() if corpus is None else corpus
    for path in paths:
        langs = languages_from_name(path)
        n = 0
        with open_text(path) as f:
            for line_no, line in enumerate(f, 1):
                line = line.rstrip("\n").rstrip("\r")
                if "\t" not in line:
                    if skip_bad:
                        corpus.skipped["no tab"] += 1
                        continue
                    raise InputError("expected 'source<TAB>target', found no tab", str(path), line_no)
                src, tgt = line.split("\t", 1)
                if "\t" in tgt:
                    if skip_bad:
                        corpus.skipped["extra tab"] += 1
                        continue
                    raise InputError("more than one tab; expected exactly two columns", str(path), line_no)
                if _check_pair(src, tgt, path, line_no, corpus, skip_bad):
                    corpus.add(langs, src.strip(), tgt.strip())
                    n += 1
                    if max_pairs_per_file and n >= max_pairs_per_file:
                        break
        if n == 0:
            raise InputError("the file holds no sentence pairs", str(path))
    return corpus


def read_aligned_files(src_path: str | Path, tgt_path: str | Path, langs: tuple[str, str], skip_bad: bool = False,
                       corpus: ParallelCorpus | None = None) -> ParallelCorpus:
    """Read two line-aligned files (line i of one translates line i of the other)."""
    corpus = ParallelCorpus() if corpus is None else corpus
    with open_text(src_path) as fs, open_text(tgt_path) as ft:
        src_lines, tgt_lines = fs.read().splitlines(), ft.read().splitlines()
    if len(src_lines) != len(tgt_lines):
        raise InputError(f"has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}", str(src_path))
    if not src_lines:
        raise InputError("the file is empty", str(src_path))
    for line_no, (s, t) in enumerate(zip(src_lines, tgt_lines), 1):
        if _check_pair(s, t, src_path, line_no, corpus, skip_bad):
            corpus.add(langs, s.strip(), t.strip())
    return corpus
