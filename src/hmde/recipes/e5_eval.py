"""The evidence of ``hmde recipe e5``: every row on the same lower encoder, on the shared dev sets.

Rows (columns of the tables): hmde after stage 1 (frozen e5), hmde after stage 2 (joint, e5
updated: the shipped hmde-e5), the Table 3 control (stage 1 continued with e5 frozen for
stage 2's pairs and steps), the baselines ``mean``, ``first``, ``seg``, ``lawdr`` on
multilingual-e5-small itself, and ``hmde-e5-mean``: ``mean`` over hmde-e5's lower encoder. Tasks, cheapest first, each one resumable step whose result is
``results/<task>.<row>.json``:

- PUD alignment (every PUD language -> eng) and XQuAD article retrieval (11 pairs each way);
- the held-out languages (swh, guj, est: in no training pair): Bible chapter alignment among
  them and with eng, and eng sentence queries against their chapters;
- sentence queries from the Bible (eng -> spa, zho; chapters seen in training) and held-out
  WMT stretches (eng -> deu, rus), split by document length;
- MasakhaNEWS, trained on eng, tested on fra and the 15 other languages, frozen; fine-tuned
  for hmde-e5 and ``mean``;
- Tatoeba over every language of the dev set, for e5 as published and for hmde-e5's lower
  encoder (the joint stage must keep sentence quality within 0.02);
- hmde-use and USE-m's ``mean`` on this recipe's WMT stretches (``REFERENCE_ROWS``): the default
  decision compares hmde-e5 with hmde-use, and ``hmde recipe use`` cut its stretches around other
  training news, so its own WMT figures are not on the same documents.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..methods import method_class
from ..e5 import NAME as E5_NAME
from ..text.coverage import RECIPE_HELD_OUT
from ..usem.name import NAME as USE_M_NAME
from .steps import build_sentence_tasks, run_step

LOWER = E5_NAME
HELD_OUT = RECIPE_HELD_OUT  # left out of document-level training (hmde.recipes.e5): hmde.text.coverage says why

XQUAD = ("ar", "de", "el", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")
BASELINES = ("mean", "first", "seg", "lawdr")
HMDE_ROWS = ("hmde-frozen", "hmde-control", "hmde-e5")
# ``mean`` over hmde-e5's lower encoder (e5 as the joint stage left it): what the joint stage did to e5's
# sentences, apart from the upper encoder (Tatoeba says it improved them)
UPDATED_LOWER_ROWS = ("hmde-e5-mean",)
ROWS = (*HMDE_ROWS, *UPDATED_LOWER_ROWS, *BASELINES)
# the rows that answer the questions (frozen vs updated, and against mean) run every task first;
# the other baselines follow (first and seg embed windows of their own; lawdr's KDE search is slow)
TIERS = ((*HMDE_ROWS, "mean"), ("first", "seg", "lawdr", *UPDATED_LOWER_ROWS))
# USE-m's rows, on the tasks whose documents differ from ``hmde recipe use``'s (results/TASK.ROW.json)
REFERENCE_ROWS = {"hmde-use": ("hmde-use", "hmde"), "use-m-mean": (USE_M_NAME, "mean")}
REFERENCE_TASKS = ("sq-wmt-eng-deu", "sq-wmt-eng-rus")
SEEN_TASKS = ("bible-eng-spa", "bible-eng-zho", "wmt-eng-deu", "wmt-eng-rus")
HELD_OUT_TASKS = tuple(f"bible-eng-{lang}" for lang in HELD_OUT)
LENGTH_BUCKETS = "16,24,32,48"


def tatoeba_languages(data: Path) -> list[str]:
    """The Tatoeba languages of the dev set in e5's (XLM-R's) languages: the issue asks the joint stage to
    keep sentence quality on every language the encoder covers, not on a sample."""
    from ..text.coverage import XLM_R, document_language
    from ..evaluation.tatoeba import tatoeba_languages as all_languages

    return [lang for lang in all_languages(data / "eval" / "tatoeba") if document_language(lang, None) in XLM_R]


def row_model(out: Path, row: str) -> tuple[str, str]:
    """(model, method) of a row."""
    if row in REFERENCE_ROWS:
        return REFERENCE_ROWS[row]
    folders = {"hmde-frozen": out / "hmde-frozen", "hmde-control": out / "hmde-frozen-control", "hmde-e5": out / "hmde-e5"}
    if row in UPDATED_LOWER_ROWS:
        return str(out / "hmde-e5"), "mean"
    return (str(folders[row]), "hmde") if row in folders else (LOWER, row)


def masakhanews_targets(data: Path) -> list[str]:
    return sorted(p.name for p in (data / "eval" / "masakhanews").iterdir() if p.is_dir() and p.name != "eng")


def row_ready(out: Path, row: str) -> bool:
    """Whether a row's model exists (the baselines' always does; a stage's once it has finished)."""
    model, _ = row_model(out, row)
    return model == LOWER or (Path(model) / "config.json").exists()


def evaluate(out: Path, data: Path, dev: list[str], only: tuple[str, ...] = ROWS) -> None:
    """Every task for every row whose model exists, task by task (the cheapest first, so that a
    session cut short has whole tasks); rows whose stage has not finished are said and skipped, so
    this can run beside the training. Rows on frozen e5 (``mean``, ``lawdr``, ``hmde-frozen``,
    ``hmde-control``) share one sentence cache (``--sentence-cache``): e5 embeds each sentence once."""
    ev, results = data / "eval", out / "results"
    build_sentence_tasks(data, out, out / "wmt-documents.jsonl.gz", (*SEEN_TASKS, *HELD_OUT_TASKS),
                         ("deu-eng", "eng-rus"))
    pud = ",".join(sorted(p.name.split(".")[0] for p in (ev / "pud").glob("*.jsonl.gz") if not p.name.startswith("eng")))
    xquad = ",".join([f"{c}-en" for c in XQUAD] + [f"en-{c}" for c in XQUAD])
    held_pairs = ",".join(f"{a}-{b}" for i, a in enumerate(("eng", *HELD_OUT)) for b in (*HELD_OUT,)[i:] if a != b)
    rows = [row for row in ROWS if row in only and row_ready(out, row)]
    for row in only:
        if row not in rows:
            print(f"[recipe] eval {row}: its model is not trained yet, skipped")
    # cheapest and most asked first: PUD, XQuAD and the sentence queries (a few thousand sentences each),
    # then the Tatoeba check, then the held-out Bibles (eng's 1,189 chapters) and MasakhaNEWS (16 languages)
    early = [("pud", ["align", "--data", str(ev / "pud"), "--langs", pud]),
             ("xquad", ["clir", "--xquad", str(ev / "xquad"), "--pairs", xquad, "--length-buckets", LENGTH_BUCKETS])]
    for task in (*SEEN_TASKS, *HELD_OUT_TASKS):
        folder, lang = out / f"sq-{task}", task.split("-")[-1]
        early.append((f"sq-{task}", ["clir", "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
                                     "--documents", str(folder / "documents.jsonl"), "--query-lang", "eng",
                                     "--doc-lang", lang, "--length-buckets", LENGTH_BUCKETS]))
    late = [("bible-heldout", ["align", "--data", str(data / "bible"), "--pairs", held_pairs]),
            ("masakhanews-frozen", ["xldc", "--masakhanews", str(ev / "masakhanews"), "--targets",
                                    ",".join(masakhanews_targets(data)), "--protocol", "frozen"])]
    cache = ["--sentence-cache", str(out / "sentence-cache")]

    def row_task(task: str, argv: list[str], row: str) -> None:
        """``hmde eval PROTOCOL MODEL ... -o results/TASK.ROW.json``, skipped when that file exists."""
        model, method = row_model(out, row)
        target, extra = results / f"{task}.{row}.json", []
        if task.startswith("sq-") and method_class(method).fitted and (results / "pud.lawdr.json").exists():
            # one-language collections: PUD's m
            extra = ["--lawdr-m", str(json.loads((results / "pud.lawdr.json").read_text())["settings"]["lawdr_m"])]
        run_step(f"eval {task} {row}", target.exists(), ["eval", *argv[:1], model, *argv[1:], *extra, "-o",
                                                         str(target), "--method", method, "--no-progress", *cache, *dev])

    first_tier, *other_tiers = TIERS
    for task, argv in early:
        for row in (r for r in first_tier if r in rows):
            row_task(task, argv, row)
    if "mean" in rows:  # USE-m is cheap beside e5: the reference rows come with the first tier's baseline
        for task, argv in early:
            for row in REFERENCE_ROWS if task in REFERENCE_TASKS else ():
                row_task(task, argv, row)
    for name, model in (("e5", LOWER), ("hmde-e5", str(out / "hmde-e5"))):
        target = results / f"xsr.{name}.json"
        if (name == "e5" and "mean" in rows) or (name == "hmde-e5" and "hmde-e5" in rows):
            run_step(f"eval xsr {name}", target.exists(), ["eval", "xsr", model, "--data", str(ev / "tatoeba"),
                                                           "--langs", ",".join(tatoeba_languages(data)), "-o", str(target), "--no-progress",
                                                           *cache, *dev])
    for task, argv in late:
        for row in (r for r in first_tier if r in rows):
            row_task(task, argv, row)
    for row in ("hmde-e5", "mean"):
        model, method = row_model(out, row)
        target = results / f"masakhanews-finetune.{row}.json"
        if row in rows:
            run_step(f"eval xldc finetune {row}", target.exists(), [
                "eval", "xldc", model, "--masakhanews", str(ev / "masakhanews"), "--targets", "fra", "--method",
                method, "--protocol", "finetune", "--max-epochs", "2", "--patience", "1", "--warmup", "20", "--lr",
                "5e-5", "--max-sentences", "8", "-o", str(target), "--no-progress", *dev])
    for tier in other_tiers:
        for task, argv in early + late:
            for row in (r for r in tier if r in rows):
                row_task(task, argv, row)
