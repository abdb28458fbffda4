"""The calibration ranges of hmde's smoothed int8 graph (:mod:`hmde.export.smoothing`), for a bundled model.

Runs the model's float32 lower graph (made in hmde's cache, as ``--backend auto`` makes it) over sentences of the
shared data's WMT training pairs (12 sentences of each side of each pair file, the held-out languages of training
left out: hmde.text.coverage), once with each of the model's prompts, and writes each weighted product's
per-channel largest activation to ``src/hmde/export/activation_ranges/HASH16.npz`` (the model's content hash),
which the package ships: hmde's users quantise with these numbers, not with texts.

    python benchmarks/int8_calibration.py --data ../shared/data            # hmde-e5, about a minute
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path


def calibration_sentences(data: Path, per_file: int = 12, seed: int = 0) -> list[str]:
    from hmde.text.coverage import DATA_HELD_OUT, RECIPE_HELD_OUT

    held_out = set(DATA_HELD_OUT) | set(RECIPE_HELD_OUT)
    rng = random.Random(seed)
    out: list[str] = []
    for path in sorted((data / "parallel" / "wmt").glob("*.tsv.gz")):
        if set(path.name.split(".")[0].split("-")) & held_out:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            head = [line for _, line in zip(range(200), f)]
        for line in rng.sample(head, min(per_file, len(head))):
            out += [cell[:300] for cell in line.rstrip("\n").split("\t")[:2] if cell.strip()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--model", default="hmde-e5")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from hmde.encoders.registry import resolve_model_path
    from hmde.evaluation.provenance import model_hash
    from hmde.export.cached import ensure_export
    from hmde.export.smoothing import activation_ranges, ranges_file, save_ranges
    import json

    folder, _ = ensure_export(args.model)
    meta = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    prompts = sorted(set((meta.get("prompts") or {}).values()) | {meta.get("document_prompt", "")}) or [""]
    sentences = calibration_sentences(Path(args.data))
    texts = [p + s for p in prompts for s in sentences]
    tokenizer = AutoTokenizer.from_pretrained(str(folder / "tokenizer"))
    ranges = activation_ranges(folder / "lower.onnx", tokenizer, texts)
    target = ranges_file(model_hash(resolve_model_path(args.model)))
    save_ranges(target, ranges)
    print(f"{len(sentences)} sentences x {len(prompts)} prompts {prompts}: {len(ranges)} activation ranges -> {target}")


if __name__ == "__main__":
    main()
