"""A trial of the sentence-level alignment stage (issue 64) on CPUs: hmde-e5's lower encoder trained with LaBSE's
objective on the shared parallel sentences (hmde.pretraining.sentence_stage), saved as a model folder, to be measured
with ``benchmarks/crosslingual_gap.py --model OUT/model`` against hmde-e5. Resumes from OUT's checkpoint.

    python benchmarks/sentence_stage_trial.py --data ../shared/data -o runs/sentences --steps 400
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    from hmde.encoders.model_loading import load_model
    from hmde.pretraining.sentence_stage import SentenceStageConfig, SentenceStageTrainer, sample_pairs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data")
    p.add_argument("-o", "--output", default="runs/sentences")
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--export-checkpoint", action="store_true", help="only save the model of OUT's last checkpoint "
                   "(as OUT/model-stepN), to measure a run before its end")
    for name, value in vars(SentenceStageConfig()).items():
        if not isinstance(value, list):
            p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = p.parse_args()
    if args.export_checkpoint:
        from hmde.pretraining.sentence_stage import apply_checkpoint

        model = load_model(args.model, "cpu")[1]
        step = apply_checkpoint(model, Path(args.output) / "checkpoint")
        model.save_pretrained(Path(args.output) / f"model-step{step}")
        print(f"saved {Path(args.output) / f'model-step{step}'}")
        return
    config = SentenceStageConfig(**{k: getattr(args, k) for k in vars(SentenceStageConfig()) if k != "sources"})
    pairs = sample_pairs(Path(args.data), config)
    print(f"{len(pairs)} pairs; {config}", flush=True)
    model = load_model(args.model, "cpu")[1]
    SentenceStageTrainer(model, pairs, config, args.output).train()
    model.save_pretrained(Path(args.output) / "model")
    print(f"saved {Path(args.output) / 'model'}", flush=True)


if __name__ == "__main__":
    main()
