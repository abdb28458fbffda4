"""A trial of the sentence-level alignment stage (issue 64) on CPUs: hmde-e5's lower encoder trained with LaBSE's
objective on the shared parallel sentences (hmde.pretraining.sentence_stage), saved as a model folder, to be measured
with ``benchmarks/crosslingual_gap.py --model OUT/model`` against hmde-e5. Resumes from OUT's checkpoint.

    python benchmarks/sentence_stage_trial.py --data ../shared/data -o runs/sentences --steps 400

On a lent GPU (hmde.recipes.sentence_gpu): ``--pack DIR`` writes the pairs and the model as a pack instead of
training; there, ``--gpu-train DIR --minutes M -o OUT`` trains on it; here, ``--unpack OUT -o MODEL`` saves the
model.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def save(kind: str, model, folder: Path) -> None:
    """A trained model saved as a model folder: an HMDE model's, or a sentence encoder's (a run that started from
    hmde-e5-bitext: its changes against hmde-e5, as the bundle stores them)."""
    model.save_pretrained(folder) if kind == "hmde" else model.save(folder)


def main() -> None:
    from hmde.encoders.model_loading import load_model
    from hmde.pretraining.sentence_stage import SentenceStageConfig, SentenceStageTrainer, sample_stage_pairs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data")
    p.add_argument("-o", "--output", default="runs/sentences")
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--export-checkpoint", action="store_true", help="only save the model of OUT's last checkpoint "
                   "(as OUT/model-stepN), to measure a run before its end")
    for name, value in vars(SentenceStageConfig()).items():
        if not isinstance(value, list):
            p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--pack", help="write a GPU pack of the sampled pairs and --model into this folder")
    p.add_argument("--gpu-train", help="train on this pack (on the GPU machine), writing the parts into -o")
    p.add_argument("--minutes", type=float, help="--gpu-train: the time budget")
    p.add_argument("--device", default="cuda")
    p.add_argument("--unpack", help="the folder of a --gpu-train run's parts: save its model at -o")
    p.add_argument("--budget-mib", type=float, default=60.0)
    p.add_argument("--negatives-there", action="store_true", help="--pack: leave the hard negatives to the GPU run "
                   "(it mines them in about a minute; here they take 38 for 205,604 pairs)")
    p.add_argument("--title-pairs", type=float, metavar="MONO_SHARE", help="train on docs/ title -> page pairs "
                   "across languages (this share within one language) instead of the translation pairs")
    p.add_argument("--heading-pairs", type=float, metavar="MONO_SHARE", help="train on docs/ help pages' headings "
                   "as queries and the paragraph under them in another language (this share in the heading's own)")
    p.add_argument("--neighbour-pairs", type=float, metavar="MONO_SHARE", help="train on WMT sentences as queries "
                   "and the sentence next to them on the other side (this share on their own side) instead of the "
                   "translation pairs (--pairs of these); the --*-pairs named are trained on together, shuffled")
    p.add_argument("--span-pairs", type=float, metavar="SHARE", help="beside the translation pairs, this share of "
                   "--pairs drawn as WMT span pairs (two sentences joined, and their parts: an alignment encoder)")
    p.add_argument("--merge-pairs", type=float, metavar="SHARE", help="as --span-pairs, the translation written as "
                   "one sentence (a 2-1 bead)")
    p.add_argument("--bible-pairs", type=float, metavar="SHARE", help="beside the translation pairs, this share of "
                   "--pairs drawn as Bible verses with their English verse, as many from each language (sentence "
                   "alignment's verse chapters left out: verses as translators bead them)")
    args = p.parse_args()
    if args.gpu_train or args.unpack:
        from hmde.recipes import sentence_gpu

        if args.unpack:
            print(f"saved {sentence_gpu.unpack(args.unpack, args.output)}")
            return
        given = {k: getattr(args, k) for k in vars(SentenceStageConfig()) if k != "sources"
                 and f"--{k.replace('_', '-')}" in " ".join(__import__("sys").argv)}
        print(sentence_gpu.train(args.gpu_train, args.output, args.minutes, args.device, given), flush=True)
        return
    if args.export_checkpoint:
        from hmde.pretraining.sentence_stage import apply_checkpoint

        kind, model = load_model(args.model, "cpu")
        step = apply_checkpoint(model, Path(args.output) / "checkpoint")
        save(kind, model, Path(args.output) / f"model-step{step}")
        print(f"saved {Path(args.output) / f'model-step{step}'}")
        return
    config = SentenceStageConfig(**{k: getattr(args, k) for k in vars(SentenceStageConfig()) if k != "sources"})
    kinds = {kind: share for kind, share in (("titles", args.title_pairs), ("headings", args.heading_pairs),
                                             ("neighbours", args.neighbour_pairs)) if share is not None}
    beside = {kind: share for kind, share in (("spans", args.span_pairs), ("merges", args.merge_pairs),
                                              ("bible", args.bible_pairs)) if share is not None}
    if beside:  # kinds drawn beside the translation pairs (or beside the kinds named above)
        kinds |= beside | ({} if kinds else {"translations": 0.0})
    tagged = sample_stage_pairs(Path(args.data), config, kinds or {"translations": 0.0}, with_languages=True)
    pairs = [(x, y) for x, y, _ in tagged]
    languages = [lang for _, _, lang in tagged] if config.needs_languages else None
    print(f"{len(pairs)} pairs; {config}", flush=True)
    if args.pack:
        from hmde.recipes import sentence_gpu

        print(sentence_gpu.pack(args.model, pairs, config, args.pack, args.budget_mib, languages,
                                mine_negatives=not args.negatives_there), flush=True)
        return
    kind, model = load_model(args.model, "cpu")
    SentenceStageTrainer(model, pairs, config, args.output, languages).train()
    save(kind, model, Path(args.output) / "model")
    print(f"saved {Path(args.output) / 'model'}", flush=True)


if __name__ == "__main__":
    main()
