"""Hard negatives for the sentence stage's translation ranking (issue 79), mined once with the starting model.

In-batch negatives of a shuffled batch are mostly unrelated sentences; what a translation miner gets wrong is the
sentence of the same topic and shape ("Let's try now." for "Lass uns etwas versuchen!"). For each pair (x, y) the
``k`` nearest y sides of other pairs in y's language, by the cosine of x to them with the starting model, become
more columns of x's softmax (Xiong et al., 2021, ANCE, mines with the model being trained; here once, at the start,
so that a resumed run trains on the same negatives). A candidate whose cosine to x is above ``ceiling`` times the
pair's own cosine is skipped (positive-aware mining, Moreira et al., 2024, NV-Retriever): a sentence that close is
likely a translation too, and so is one equal to y after case and punctuation are folded.

The mined indices are kept in the run's folder (``hard_negatives.json``, with a digest of the pairs and the
settings), so a rerun resumes on the same negatives and a run on other pairs is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from ..errors import HmdeError

FILE = "hard_negatives.json"
_FOLD = re.compile(r"[\W_]+", re.UNICODE)


def folded(text: str) -> str:
    """``text`` lower-cased with punctuation and spaces removed: two sentences equal so are one sentence."""
    return _FOLD.sub("", text.casefold())


def mine(x: np.ndarray, y: np.ndarray, languages, y_texts, k: int = 1, ceiling: float = 0.95,
         chunk: int = 1024) -> list[list[int]]:
    """Per pair i, the indices j != i of ``k`` pairs whose ``y[j]`` is nearest to ``x[i]`` among the pairs of the same
    y language, skipping any above ``ceiling`` x cos(x_i, y_i) and any whose folded text equals y_i's. Vectors are
    unit rows. Where a language has too few candidates, the nearest allowed ones of the whole pile fill the row
    (their language then differs); a row still short (every candidate over the ceiling) gets drawn ones (seeded),
    from its language first; a pile of one pair has none."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    n = len(x)
    if len(y) != n or len(languages) != n or len(y_texts) != n:
        raise HmdeError("hard negatives need as many x vectors, y vectors, languages and y texts as pairs")
    keys = [folded(t) for t in y_texts]
    own = np.einsum("ij,ij->i", x, y)
    groups: dict[str, list[int]] = {}
    for i, lang in enumerate(languages):
        groups.setdefault(lang, []).append(i)
    out: list[list[int]] = [[] for _ in range(n)]
    for members in groups.values():
        pool = np.asarray(members)
        _fill(out, x, y, keys, own, pool, pool, k, ceiling, chunk)
    short = np.asarray([i for i in range(n) if len(out[i]) < k])
    if len(short) and n > 1:  # a language with fewer than k + 1 pairs: the whole pile
        _fill(out, x, y, keys, own, short, np.arange(n), k, ceiling, chunk)
    rng = np.random.default_rng(0)
    for i in (i for i in range(n) if len(out[i]) < k):  # every candidate over the ceiling: drawn ones, language first
        for pool in (groups[languages[i]], range(n)):
            allowed = [j for j in pool if j != i and j not in out[i] and keys[j] != keys[i]]
            if allowed:
                out[i] += [int(j) for j in rng.permutation(allowed)[:k - len(out[i])]]
    return out


def _fill(out, x, y, keys, own, rows, pool, k, ceiling, chunk) -> None:
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        sims = x[part] @ y[pool].T
        sims[sims > ceiling * own[part, None]] = -np.inf
        top = min(sims.shape[1], k + 16)  # enough for nearly every row; a row that is not gets the full order
        head = np.argpartition(-sims, top - 1, axis=1)[:, :top] if top < sims.shape[1] else \
            np.tile(np.arange(sims.shape[1]), (len(part), 1))
        for r, i in enumerate(part):
            near = np.sort(head[r])  # ties go to the lower index, as in the full order
            orders = (near[np.argsort(-sims[r, near], kind="stable")],
                      lambda r=r: np.argsort(-sims[r], kind="stable"))  # the full order only where needed
            for order in orders:
                for c in (order() if callable(order) else order):
                    if len(out[i]) >= k or not np.isfinite(sims[r, c]):
                        break
                    j = int(pool[c])
                    if j != i and j not in out[i] and keys[j] != keys[i]:
                        out[i].append(j)
                if len(out[i]) >= k or top == sims.shape[1]:
                    break


def _digest(pairs, languages, config) -> str:
    h = hashlib.sha256()
    for (x, y), lang in zip(pairs, languages):
        h.update(f"{x}\t{y}\t{lang}\n".encode("utf-8"))
    h.update(f"{config.hard_negatives} {config.negative_ceiling} {config.roles} {config.max_tokens}".encode())
    return h.hexdigest()


def hard_negatives_for_run(lower, pairs, languages, config, output: Path, log=print) -> list[list[int]]:
    """The run's hard negatives: read from ``output/hard_negatives.json`` when it holds those of these pairs and
    settings, else mined with ``lower`` (x in its role, y as document sentences) and written there (atomically)."""
    from ..ground.atomic import write_text_atomic

    path = Path(output) / FILE
    digest = _digest(pairs, languages, config)
    if path.exists():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise HmdeError(f"{path}: unreadable ({e}); remove it to mine the negatives again") from None
        if stored.get("digest") != digest:
            raise HmdeError(f"{path}: mined for other pairs or settings; give the same, or another --output")
        return stored["negatives"]
    log(f"mining {config.hard_negatives} hard negative(s) for each of {len(pairs)} pairs with the starting model")
    x_prompt = "query" if config.roles == "query-document" else None
    x = lower.encode([p[0] for p in pairs], prompt_name=x_prompt, normalize_embeddings=True, batch_size=128)
    y = lower.encode([p[1] for p in pairs], normalize_embeddings=True, batch_size=128)
    negatives = mine(x, y, languages, [p[1] for p in pairs], config.hard_negatives, config.negative_ceiling)
    missing = sum(len(row) < config.hard_negatives for row in negatives)
    if missing:
        raise HmdeError(f"{missing} pairs found fewer than {config.hard_negatives} hard negatives: too few pairs")
    write_text_atomic(path, json.dumps({"digest": digest, "negatives": negatives}))
    return negatives
