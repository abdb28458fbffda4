"""What the command-line tests share: a JSONL file of documents written, and the last line a failed command wrote."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> Path:
    """``rows`` (dicts) into ``path``, one JSON object a line (UTF-8, not escaped); returns ``path``."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def last_error(capsys) -> str:
    """The last line written on stderr, which must hold no traceback (one-line errors)."""
    text = capsys.readouterr().err
    assert "Traceback" not in text, text
    return text.strip().splitlines()[-1]
