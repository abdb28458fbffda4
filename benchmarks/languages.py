"""Every language the shared data has, measured one by one (issue 80): the per-language dev table.

Five tasks, each scored per language with the default model (hmde-e5, its default backend and document method):

- **tatoeba**: LASER's Tatoeba sets (up to ``--pairs`` pairs a language): P@1 of nearest-neighbour search, the
  mean of both directions (xxx -> eng, eng -> xxx), sentences embedded as queries.
- **udhr**: the Universal Declaration's 30 articles in every language of ``docs/udhr``: an article in the language
  finds the same article among the 30 English ones and back (P@1, both directions' mean), documents embedded whole.
  ``--udhr-articles dev``: the 8 articles of the development slice alone (among 8), those the sentence stage's
  ``udhr`` pairs never use (hmde.pretraining.tail_pairs).
- **masakhanews**: MasakhaNEWS (16 African languages) dev sets, up to ``--news`` articles: the headline (as a query)
  finds its own article among that language's articles (MRR, monolingual).
- **bible**: every Bible of ``bible/`` (48): English verses (the first 3 of each chapter, as queries) find their
  chapter among up to ``--chapters`` chapters of the language (MRR), chapters of the development slice, which the
  sentence stage's ``bible`` pairs never use (hmde-e5's document stage trained on Bible chapters of its languages).
- **help**: the help pages of ``docs/`` (GNOME, LibreOffice, tldr; 44 languages): an English page title (a query)
  finds the page's body in the language among up to ``--pages`` pages of that source (MRR, each source's mean),
  pages of the development slice, which the stage's titles and headings never use.

Beside the scores, each language's **tokenizer coverage** (:mod:`hmde.text.tokenizer_coverage`, no model run): the
share of ``<unk>`` tokens and the tokens a word costs, on its UDHR articles (else its Tatoeba sentences, else its
news). ``--coverage-into FILE`` adds those two to every language of a written table (the shipped
``hmde/text/language_quality.json``) without scoring again.

A language's **score** is the mean of its Tatoeba, UDHR and MasakhaNEWS tasks (bible and help are columns beside it,
on their own scale); the **tail** is the bottom fifth of the languages by score. The
languages held out of training (ukr, lav/lvs, eus: the held-out Bible's; docs/ leaves them out) are marked. Each
language is also marked where it is outside the sentence encoder's pretraining (XLM-R's 100 languages for
hmde-e5: ``hmde.text.coverage``).

    python benchmarks/languages.py --data ../shared/data -o languages.json     # about 40 minutes on 2 cores (bible, help: 16)
    python benchmarks/languages.py --model RUN/model --backend torch --udhr-articles dev -o trained.json
    python benchmarks/languages.py --compare base.json trained.json   # the tail's rise, the languages that fell
    python benchmarks/languages.py --model hmde-e5 --tail-model RUN/model --backend torch --udhr-articles dev \
        --routed-only base.json -o routed.json   # a routed encoder: its languages scored, the rest from base.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from hmde.evaluation.ranks import mean_reciprocal_rank

HELD_OUT = {"ukr", "lav", "lvs", "eus"}
TASKS = ("tatoeba", "udhr", "masakhanews", "bible", "help")
# the tasks a language's score (its tier, the tail) is the mean of: bible and help are columns beside it, on their own
# scale (a verse against whole chapters: Spanish 0.72; an English title against help pages: Hindi 0.53), which
# averaged in would rank languages by which tasks they happen to have (Spanish 0.99 -> 0.85, Chinese weak)
SCORED = ("tatoeba", "udhr", "masakhanews")


def score_row(row: dict) -> dict:
    """``row`` with its ``score`` (the mean of its :data:`SCORED` tasks) and ``tier``, or neither where it has none
    of them (a language of the Bible or the help pages alone)."""
    from hmde.text.language_tiers import tier_of

    row = {k: v for k, v in row.items() if k not in ("score", "tier")}
    found = [row[t] for t in SCORED if t in row]
    if not found:
        return row
    score = float(np.mean(found))
    return {**row, "score": score, "tier": tier_of(score)}


def p_at_1(a: np.ndarray, b: np.ndarray) -> float:
    """Both directions' mean of P@1, row i of ``a`` translating row i of ``b``."""
    sims = a @ b.T
    gold = np.arange(len(a))
    return float(((sims.argmax(1) == gold).mean() + (sims.argmax(0) == gold).mean()) / 2)


def mrr(queries: np.ndarray, docs: np.ndarray) -> float:
    """MRR, query i's document row i of ``docs`` (a document scoring as high counts as below it)."""
    return mean_reciprocal_rank(queries, docs, ties_against=False)


def mrr_of(queries: np.ndarray, docs: np.ndarray, right: list[int]) -> float:
    """MRR, query i's document row ``right[i]`` of ``docs`` (a document scoring as high counts as below it)."""
    return mean_reciprocal_rank(queries, docs, right, ties_against=False)


def tatoeba(data: Path, limit: int) -> dict[str, tuple[list[str], list[str]]]:
    out = {}
    for path in sorted((data / "eval" / "tatoeba").glob("tatoeba.*-eng.eng")):
        lang = path.name.split(".")[1].split("-")[0]
        other = path.with_name(f"tatoeba.{lang}-eng.{lang}")
        eng = path.read_text(encoding="utf-8").splitlines()[:limit]
        xxx = other.read_text(encoding="utf-8").splitlines()[:limit]
        if len(eng) == len(xxx) and eng:
            out[lang] = (xxx, eng)
    return out


def udhr(data: Path) -> dict[str, dict[str, str]]:
    out = {}
    for path in sorted((data / "docs" / "udhr").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        out[path.name.split(".")[0]] = {r["concept"]: r["text"] for r in rows}
    return out


def masakhanews(data: Path, limit: int) -> dict[str, tuple[list[str], list[str]]]:
    from hmde.evaluation.classification import read_masakhanews_headlines

    out = {}
    for folder in sorted((data / "eval" / "masakhanews").iterdir()):
        if folder.is_dir() and (rows := read_masakhanews_headlines(folder.parent, folder.name, "dev", limit)):
            out[folder.name] = ([h for h, _ in rows], [t for _, t in rows])
    return out


def bible(data: Path, chapters: int, verses: int = 3, min_chars: int = 20) -> tuple[list[str], list[str], dict]:
    """The ``bible`` task's data: up to ``chapters`` chapters of the development slice (those the sentence stage's
    ``bible`` pairs never use: hmde.pretraining.tail_pairs) in English and every other Bible, the first ``verses``
    English verses of each (at least ``min_chars`` long) the queries: ``(queries, their chapter, {lang: {chapter:
    text}})``, each language's chapters the English ones it has."""
    from hmde.pretraining.dev_slice import dev_concept

    def chapters_of(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return {r["concept"]: r.get("verses") or [] for r in map(json.loads, f)
                    if dev_concept("bible", r["concept"]) and r.get("verses")}

    folder = data / "bible"
    if not (folder / "eng.jsonl.gz").is_file():
        return [], [], {}
    english = chapters_of(folder / "eng.jsonl.gz")
    named = sorted(english, key=lambda c: (c.split(".")[0], int(c.split(".")[1]) if c.split(".")[1].isdigit() else 0))
    named = named[::max(1, len(named) // chapters)][:chapters]  # spread over the books
    queries, owners = [], []
    for concept in named:
        for verse in [v for v in english[concept] if len(v) >= min_chars][:verses]:
            queries.append(verse)
            owners.append(concept)
    out = {}
    for path in sorted(folder.glob("*.jsonl.gz")):
        lang = path.name.split(".")[0]
        if lang != "eng":
            theirs = chapters_of(path)
            out[lang] = {c: "\n".join(theirs[c]) for c in named if c in theirs}
    return queries, owners, out


def help_pages(data: Path, pages: int) -> dict[str, list[tuple[str, str, str]]]:
    """The ``help`` task's data: per language, ``(source, English title, the page's body in the language)`` for up to
    ``pages`` pages of each help source (docs/ gnome, libreoffice, tldr) in the development slice (those the sentence
    stage's titles and headings never use), titles unique in English, the body without its title paragraph (as
    contextual_retrieval.py's keyword rows take them)."""
    from contextual_retrieval import page_body, unique_titles

    from hmde.pretraining.dev_slice import dev_concept

    out: dict[str, list] = defaultdict(list)
    for source in ("gnome", "libreoffice", "tldr"):
        folder = data / "docs" / source
        if not (folder / "eng.jsonl.gz").is_file():
            continue

        def read(path):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return [json.loads(line) for line in f]

        titles = {c: t for c, t in unique_titles(read(folder / "eng.jsonl.gz")).items() if dev_concept(source, c)}
        for path in sorted(folder.glob("*.jsonl.gz")):
            lang = path.name.split(".")[0]
            if lang == "eng":
                continue
            found = []
            for page in sorted(read(path), key=lambda p: p["concept"]):
                body = page_body(page)
                if page["concept"] in titles and body:
                    found.append((source, titles[page["concept"]], "\n".join(body)))
            out[lang] += found[:pages]
    return dict(out)


def coverage(tokenizer, data: Path, pairs: int = 300, news: int = 150) -> dict[str, dict[str, float]]:
    """Per language of the data, its tokenizer coverage (module docstring): ``unknown_tokens``, ``tokens_per_word``."""
    from hmde.text.tokenizer_coverage import tokenizer_coverage

    texts: dict[str, list[str]] = {}
    for lang, (headlines, articles) in masakhanews(data, news).items():
        texts[lang] = articles
    for lang, (xxx, _) in tatoeba(data, pairs).items():
        texts[lang] = xxx
    for lang, articles in udhr(data).items():
        texts[lang] = list(articles.values())
    out = {}
    for lang, some in texts.items():
        c = tokenizer_coverage(tokenizer, some)
        out[lang] = {"unknown_tokens": round(c.unknown_share, 4), "tokens_per_word": round(c.tokens_per_word, 2)}
    return out


def coverage_into(path: Path, tokenizer, data: Path) -> None:
    """Add each language's tokenizer coverage to every model's rows of the table at ``path`` (written atomically)."""
    from hmde.ground.atomic import write_text_atomic

    table = json.loads(path.read_text(encoding="utf-8"))
    found = coverage(tokenizer, data)
    for model, rows in table.items():
        if isinstance(rows, dict) and not model.startswith("_"):
            for lang, row in rows.items():
                row.update(found.get(lang, {}))
    write_text_atomic(path, json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{path}: tokenizer coverage of {len(found)} languages added")


def scores_of(rows: dict[str, dict]) -> dict[str, float]:
    """Each language's score, for the languages that have one (:func:`score_row`)."""
    return {lang: row["score"] for lang, row in rows.items() if "score" in row}


def tail_of(scores: dict[str, float]) -> set[str]:
    """The bottom fifth of the languages by score (the tail of the module docstring)."""
    ordered = sorted(scores, key=lambda lang: -scores[lang])
    return set(ordered[len(ordered) - len(ordered) // 5:])


def compare(before: dict, after: dict, tolerance: float = 0.005) -> dict:
    """Issue 80's done-when on two tables' ``languages`` (those both have): the tail of ``before`` (its bottom fifth)
    and the rest, each mean before and after; ``fallen``: the languages of the rest whose score fell by more than
    ``tolerance``, worst first, as ``(language, before, after)``; ``tasks``: each task's mean over the languages that
    have it in both."""
    common = [lang for lang in before if lang in after and "score" in before[lang] and "score" in after[lang]]
    tail = tail_of({lang: before[lang]["score"] for lang in common})
    rest = [lang for lang in common if lang not in tail]

    def mean(langs, table, key="score"):
        return float(np.mean([table[lang][key] for lang in langs])) if langs else float("nan")

    fallen = sorted(((lang, before[lang]["score"], after[lang]["score"]) for lang in rest
                     if after[lang]["score"] < before[lang]["score"] - tolerance), key=lambda f: f[2] - f[1])
    tasks = {}
    for task in TASKS:
        both = [lang for lang in before if lang in after and task in before[lang] and task in after[lang]]
        if both:
            tasks[task] = (len(both), mean(both, before, task), mean(both, after, task))
    return {"tail": (len(tail), mean(sorted(tail), before), mean(sorted(tail), after)),
            "rest": (len(rest), mean(rest, before), mean(rest, after)), "fallen": fallen, "tasks": tasks}


def merge(first: dict, second: dict) -> dict:
    """Two written tables of one model (-o) as one: each language's tasks of both (``second``'s where both have one),
    its score their mean, its tier from that score; the tail recomputed; ``first``'s settings with the tasks of
    both."""
    rows = {lang: dict(row) for lang, row in first["languages"].items()}
    for lang, row in second["languages"].items():
        rows[lang] = score_row({**rows.get(lang, {}), **{k: v for k, v in row.items() if k not in ("score", "tier")}})
    tasks = [t for t in TASKS if t in first["settings"]["tasks"].split(",") + second["settings"]["tasks"].split(",")]
    return {"model": first["model"], "settings": {**first["settings"], **{k: v for k, v in second["settings"].items()
                                                                          if k in ("chapters", "pages")},
                                                  "tasks": ",".join(tasks)},
            "languages": rows, "tail": sorted(tail_of(scores_of(rows)))}


def print_comparison(found: dict, tolerance: float = 0.005, show: int = 25) -> None:
    n, b, a = found["tail"]
    print(f"the tail (bottom fifth of the first table, {n}): {b:.4f} -> {a:.4f} ({a - b:+.4f}; the issue asks +0.05)")
    n, b, a = found["rest"]
    print(f"the rest ({n}): {b:.4f} -> {a:.4f} ({a - b:+.4f}); fallen by more than {tolerance}: "
          f"{len(found['fallen'])} (the issue allows none)")
    for lang, b, a in found["fallen"][:show]:
        print(f"  {lang} {b:.3f} -> {a:.3f} ({a - b:+.3f})")
    for task, (n, b, a) in found["tasks"].items():
        print(f"{task} ({n} languages): {b:.4f} -> {a:.4f} ({a - b:+.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--model", default="hmde-e5")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--pairs", type=int, default=300, help="Tatoeba pairs a language (default 300)")
    parser.add_argument("--news", type=int, default=150, help="MasakhaNEWS articles a language (default 150)")
    parser.add_argument("--chapters", type=int, default=20, help="Bible chapters a language (default 20)")
    parser.add_argument("--pages", type=int, default=40, help="help pages a language and source (default 40)")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--udhr-articles", choices=("all", "dev"), default="all",
                        help="UDHR's 30 articles (default), or the 8 of the development slice that the sentence "
                        "stage's udhr pairs leave out (to measure a model trained on them)")
    parser.add_argument("--tail-model", default=None, metavar="DIR",
                        help="a routed encoder (hmde sentence-stage --english-side teacher): the languages of its "
                        "DIR/route.json are embedded by it, every other language (English too) by --model")
    parser.add_argument("--blend", type=float, default=None, metavar="W",
                        help="with --tail-model: a routed text's vector is W x the tail model's + (1 - W) x --model's "
                        "(hmde.methods.routed; default: the route's own, 1 unless its route.json names one)")
    parser.add_argument("--routed-only", type=Path, default=None, metavar="BASE",
                        help="with --tail-model: score the routed languages alone and take every other language's "
                        "row from BASE, a table of --model written with the same settings (the languages not routed "
                        "embed exactly as --model does, so this gives the whole table in a fraction of the time)")
    parser.add_argument("--merge", type=Path, nargs=2, metavar=("FIRST", "SECOND"), default=None,
                        help="write (-o) two tables of one model as one (the tasks of both), scoring nothing")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), default=None,
                        help="compare two written tables (-o) by the issue's done-when, scoring nothing")
    parser.add_argument("--coverage-into", type=Path, default=None, metavar="FILE",
                        help="add tokenizer coverage to the table FILE, scoring nothing")
    args = parser.parse_args()

    if (args.routed_only or args.blend is not None) and not args.tail_model:
        parser.error("--routed-only and --blend are for --tail-model")
    if args.merge:
        if not args.output:
            parser.error("--merge writes the merged table to -o")
        first, second = (json.loads(p.read_text(encoding="utf-8")) for p in args.merge)
        if "_about" in first:  # the shipped table (hmde/text/language_quality.json): its --model's rows
            from hmde.ground.atomic import write_text_atomic

            merged = merge({"model": args.model, "settings": {"tasks": "tatoeba,udhr,masakhanews"},
                            "languages": first[args.model]}, second)
            rows = {lang: {k: round(v, 3) if isinstance(v, float) and k not in ("unknown_tokens", "tokens_per_word")
                           else v for k, v in row.items() if k != "held_out"}
                    for lang, row in merged["languages"].items() if "score" in row}  # the shipped rows have tiers
            write_text_atomic(Path(args.output), json.dumps({**first, args.model: rows}, indent=0, sort_keys=True) + "\n")
        else:
            Path(args.output).write_text(json.dumps(merge(first, second), indent=1, sort_keys=True, default=str) + "\n")
        return
    if args.compare:
        before, after = (json.loads(p.read_text(encoding="utf-8"))["languages"] for p in args.compare)
        print_comparison(compare(before, after))
        return

    from hmde.encoders.model_loading import load_model
    from hmde.methods.routed import LanguageRoute, RoutedVectorizer
    from hmde.methods.vectorizer import DocumentVectorizer
    from hmde.text.coverage import model_languages
    from hmde.text.language_codes import language_code

    data = Path(args.data)
    _, model = load_model(args.model, "cpu", backend=args.backend)
    if args.coverage_into:
        coverage_into(args.coverage_into, model.lower.tokenizer, data)
        return
    vectorizer = DocumentVectorizer(model, "mean")
    known = model_languages(model)
    tasks = args.tasks.split(",")
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    started = time.time()
    route, routed = LanguageRoute([]), None
    if args.tail_model:  # the routed languages' texts go to the tail model, queries and documents alike
        route = LanguageRoute.read(args.tail_model, args.blend)
        tail_model = load_model(args.tail_model, "cpu", backend=args.backend)[1]
        routed = RoutedVectorizer(vectorizer, DocumentVectorizer(tail_model, "mean"), route)
        print(f"{len(route)} languages routed to {args.tail_model}", file=sys.stderr)

    def scored(lang):  # whether this run scores the language (--routed-only: the routed ones alone)
        return not args.routed_only or lang in route

    def queries(texts, key="eng"):
        if routed is not None:
            return routed.queries(texts, [key] * len(texts))
        return np.asarray(model.lower.encode(texts, prompt_name="query"), np.float32)

    def documents(texts, key):
        if routed is not None:  # the route tells scripts apart (jav_Java is routed, jav is not): its key whole
            v = routed.encode(texts, [key if key in route else key.split("_")[0]] * len(texts))
        else:
            v = np.asarray(vectorizer.encode(texts, [key.split("_")[0]] * len(texts)), np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    if "tatoeba" in tasks:
        sets = tatoeba(data, args.pairs)
        for i, (lang, (xxx, eng)) in enumerate((lang, pair) for lang, pair in sets.items() if scored(lang)):
            scores[lang]["tatoeba"] = p_at_1(queries(xxx, lang), queries(eng))
            print(f"\rtatoeba {i + 1}/{len(sets)} ({time.time() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    if "udhr" in tasks:
        articles = udhr(data)
        concepts = sorted(articles["eng"])
        if args.udhr_articles == "dev":  # hmde.pretraining.tail_pairs trains on the other 22
            from hmde.pretraining.sentence_stage import dev_concept

            concepts = [c for c in concepts if dev_concept("udhr", c)]
        english = documents([articles["eng"][c] for c in concepts], "eng")
        for i, (lang, texts) in enumerate(articles.items()):
            if lang != "eng" and set(concepts) <= set(texts) and scored(lang):
                scores[lang]["udhr"] = p_at_1(documents([texts[c] for c in concepts], lang), english)
            print(f"\rudhr {i + 1}/{len(articles)} ({time.time() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    if "masakhanews" in tasks:
        for lang, (headlines, texts) in masakhanews(data, args.news).items():
            if not scored(lang):
                continue
            scores[lang]["masakhanews"] = mrr(queries(headlines, lang), documents(texts, lang))
        print(f"masakhanews done ({time.time() - started:.0f} s)", file=sys.stderr)
    if "bible" in tasks:
        verses, owners, chapters = bible(data, args.chapters)
        english = queries(verses) if verses else None
        for i, (lang, theirs) in enumerate(chapters.items()):
            named = [c for c in sorted(set(owners)) if c in theirs]
            rows = [k for k, c in enumerate(owners) if c in theirs]
            if len(named) > 1 and scored(lang):  # its chapters among its own
                found = documents([theirs[c] for c in named], lang)
                scores[lang]["bible"] = mrr_of(english[rows], found, [named.index(owners[k]) for k in rows])
            print(f"\rbible {i + 1}/{len(chapters)} ({time.time() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    if "help" in tasks:
        for i, (lang, rows) in enumerate(help_pages(data, args.pages).items()):
            if not scored(lang):
                continue
            by_source = defaultdict(list)
            for source, title, body in rows:
                by_source[source].append((title, body))
            found = [mrr(queries([t for t, _ in pages]), documents([b for _, b in pages], lang))
                     for pages in by_source.values() if len(pages) > 1]
            if found:
                scores[lang]["help"] = float(np.mean(found))
            print(f"\rhelp {i + 1} ({time.time() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)

    table = {}
    tokens = coverage(model.lower.tokenizer, data, args.pairs, args.news)
    for lang, by_task in scores.items():
        code = language_code(lang.split("_")[0]) or lang
        table[lang] = score_row({**by_task, **tokens.get(lang, {}), "pretrained": None if known is None
                                 else code in known[1], "held_out": lang in HELD_OUT})
    if args.routed_only:  # every language not routed: as --model scored it, with the same settings
        base = json.loads(args.routed_only.read_text(encoding="utf-8"))
        keys = ["pairs", "news", "tasks", "udhr_articles", "backend"] + ["chapters"] * ("bible" in tasks) \
            + ["pages"] * ("help" in tasks)
        settings = {k: base["settings"].get(k) for k in keys}
        if settings != {k: getattr(args, k) for k in settings} or base["settings"].get("model") != args.model:
            sys.exit(f"{args.routed_only}: written with other settings ({settings}, model "
                     f"{base['settings'].get('model')}); --routed-only needs a table of --model with these")
        for lang, row in base["languages"].items():
            if lang not in route:
                table[lang] = score_row(row)
    ordered = sorted(table, key=lambda lang: -table[lang].get("score", -1))
    tail = tail_of(scores_of(table))
    print(f"\n| language | score | {' | '.join(tasks)} | tier | <unk> | tokens/word | in pretraining | |\n|---|---|"
          + "---|" * len(tasks) + "---|---|---|---|---|")
    for lang in ordered:
        row = table[lang]
        cells = " | ".join(f"{row[t]:.3f}" if t in row else "" for t in tasks)
        marks = ", ".join(m for m, on in (("tail", lang in tail), ("held out", row["held_out"])) if on)
        print(f"| {lang} | {row['score']:.3f} | " if "score" in row else f"| {lang} | | ", end="")
        print(f"{cells} | {row.get('tier', '')} | {row.get('unknown_tokens', '')} | "
              f"{row.get('tokens_per_word', '')} | "
              f"{'' if row['pretrained'] is None else ('yes' if row['pretrained'] else 'no')} | {marks} |")
    head = [table[lang]["score"] for lang in ordered if lang not in tail and "score" in table[lang]]
    print(f"\n{len(scores_of(table))} languages scored ({len(table)} in all); the tail (bottom fifth, {len(tail)}): mean {np.mean([table[x]['score'] for x in tail]):.3f};"
          f" the rest: mean {np.mean(head):.3f}; {time.time() - started:.0f} s")
    if args.output:
        Path(args.output).write_text(json.dumps({"model": args.model, "settings": vars(args), "languages": table,
                                                 "tail": sorted(tail)}, indent=1, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
