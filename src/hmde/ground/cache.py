"""hmde's cache folder: things hmde derives from installed packages once and reuses.

``$HMDE_CACHE`` when set, else ``$XDG_CACHE_HOME/hmde``, else ``~/.cache/hmde``. Everything in it
can be rebuilt; each entry is named by a content hash of what it was built from, so a reinstalled
dependency gets a new entry instead of a stale one.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    if os.environ.get("HMDE_CACHE"):
        return Path(os.environ["HMDE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "hmde"
