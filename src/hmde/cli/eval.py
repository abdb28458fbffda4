"""``hmde eval {align,xsr,clir,xldc,report}``: the paper's protocols on any model and method.

Each protocol writes a result JSON (metrics plus provenance: model hash, data hashes,
seed, version) and prints a one-line summary per language or pair.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .arg_types import positive_float, positive_int
from ..errors import HmdeError
from ..length_settings import add_length_arguments
from .common import (
    add_backend_argument,
    add_sentence_scoring_arguments,
    add_lawdr_fit_arguments,
    add_model_argument,
    BF16_HELP,
    autocast_dtype,
    lawdr_fit_options,
    load_model,
    pick_device,
    warn,
)


def _pairs(text: str | None, langs: str | None, pivot: str) -> list[tuple[str, str]]:
    if text:
        out = []
        for p in text.split(","):
            a, sep, b = p.strip().partition("-")
            if not sep or not a or not b:
                raise HmdeError(f"--pairs takes xx-yy items separated by commas, got '{p}'")
            out.append((a, b))
        return out
    if langs:
        return [(lang, pivot) for lang in langs.split(",") if lang and lang != pivot]
    return []


def _common(p, methods=True) -> None:
    add_model_argument(p)
    if methods:
        from ..config import DOCUMENT_METHODS

        p.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                       help="document vectors (default: hmde for an hmde model, mean for a sentence encoder)")
        p.add_argument("--lawdr-stats", help="saved LAWDR statistics to reuse (default: fit on the evaluated documents)")
        add_lawdr_fit_arguments(p)
    p.add_argument("--output", "-o", required=True, help="result JSON")
    add_length_arguments(p)
    p.add_argument("--device", default="auto")
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_backend_argument(p)
    p.add_argument("--sentence-batch-size", type=int, default=None, help="default: 8 on CPUs, 64 on GPUs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a model: align, xsr, clir, xldc; report tables",
                       description="Evaluation protocols; each writes a result JSON with provenance.")
    ev = p.add_subparsers(dest="protocol", metavar="PROTOCOL")
    ev.required = True

    a = ev.add_parser("align", help="parallel document alignment P@1 and recall (PUD, WMT16 .lett)")
    _common(a)
    a.add_argument("--data", help="folder of <lang>.jsonl(.gz) documents sharing 'concept' ids (e.g. eval/pud)")
    a.add_argument("--pairs", help="language pairs, e.g. deu-eng,fra-eng")
    a.add_argument("--langs", help="languages aligned against --pivot (default: every file in --data)")
    a.add_argument("--pivot", default="eng")
    a.add_argument("--lett", nargs="+", help="WMT16 .lett files, one per web domain (with --gold); documents are "
                   "matched within their domain and recall summed over all domains, as in the shared task")
    a.add_argument("--gold", help="WMT16 gold pairs: source URL<TAB>target URL (all domains in one file)")
    a.add_argument("--matching", choices=["greedy", "hungarian", "top1"], default="greedy",
                   help="one-to-one matching for recall: greedy over the full score matrix (LAWDR, default), "
                   "hungarian (best total score), top1 (LASER's max mode over each side's best candidate)")
    a.add_argument("--lett-langs", default="en-fr")
    a.add_argument("--scoring", choices=["cosine", "margin"], default="cosine")
    a.add_argument("--k", type=int, default=4, help="neighbours per side for the margin (default 4)")
    a.set_defaults(func=run_align)

    x = ev.add_parser("xsr", help="Tatoeba-format sentence retrieval P@1 (lower encoder)")
    _common(x, methods=False)
    x.add_argument("--data", required=True, help="folder of tatoeba.xxx-eng.{xxx,eng} files")
    x.add_argument("--langs", help="comma-separated languages (default: all in the folder)")
    x.set_defaults(func=run_xsr)

    pr = ev.add_parser("pool-xsr", help="sentence retrieval among a large pool (lightweight-encoder paper: 2,000 "
                       "queries, 200,000 candidates), P@1 (lower encoder)")
    _common(pr, methods=False)
    pr.add_argument("--parallel", required=True, help="folder of <xxx>-<yyy>.tsv(.gz) sentence pairs (searched "
                    "recursively, e.g. ../shared/data/parallel)")
    pr.add_argument("--langs", required=True, help="query languages, comma-separated (e.g. deu,fra,rus)")
    pr.add_argument("--pool-lang", default="eng")
    pr.add_argument("--queries", type=int, default=2000)
    pr.add_argument("--pool", type=int, default=200_000, help="candidate sentences, the translations included")
    pr.set_defaults(func=run_pool_xsr)

    c = ev.add_parser("clir", help="cross-lingual retrieval over the whole collection (MAP, MRR, nDCG@10, R@100)")
    _common(c)
    c.add_argument("--xquad", help="XQuAD folder (xquad.<lang>.json)")
    c.add_argument("--pairs", help="query-document language pairs, e.g. de-en,en-de (default: every xx with --pivot)")
    c.add_argument("--pivot", default="en")
    c.add_argument("--unit", choices=["article", "paragraph"], default="article")
    c.add_argument("--topics", help="TSV/JSONL topics (generic mode)")
    c.add_argument("--qrels", help="TREC qrels")
    c.add_argument("--documents", nargs="+", help="JSONL documents, or CLEF SGML files with --clef")
    c.add_argument("--clef", action="store_true", help="--topics and --documents are CLEF-2003 SGML")
    c.add_argument("--encoding", help="--clef: the files' encoding (default: UTF-8 where valid, else ISO-8859-1, "
                   "the encoding of the European CLEF 2003 collections); bytes that do not decode are an error")
    c.add_argument("--query-lang")
    c.add_argument("--doc-lang")
    c.add_argument("--first-stage", help="TREC run to re-rank instead of ranking the whole collection")
    c.add_argument("--run-output", help="write the ranking as a TREC run")
    c.add_argument("--measures", default="AP,RR,nDCG@10,R@100")
    c.add_argument("--multi-vector", choices=["context", "lower"],
                   help="score each document by its sentence vectors instead of one vector (hmde.multivector): "
                   "context, HMDE's contextualised sentence vectors (method hmde); lower, the sentence encoder's, "
                   "each sentence out of context")
    add_sentence_scoring_arguments(c, "--multi-vector")
    c.add_argument("--length-buckets", metavar="N,N,...",
                   help="also report the main measure by the sentence count of each query's relevant document, "
                        "in buckets with these upper bounds (e.g. 8,16,32 -> 1-8, 9-16, 17-32, 33+)")
    c.set_defaults(func=run_clir)

    d = ev.add_parser("xldc", help="zero-shot cross-lingual classification (MLDoc protocol; MasakhaNEWS)")
    _common(d)
    d.add_argument("--masakhanews", help="MasakhaNEWS folder (train = English dev+test)")
    d.add_argument("--targets", default="fra", help="target languages (default fra)")
    d.add_argument("--mldoc", nargs="*", help="MLDoc files as SPLIT:LANG=PATH (train:eng=..., dev:eng=..., test:fra=...)")
    d.add_argument("--protocol", choices=["finetune", "frozen", "both"], default="both")
    d.add_argument("--lr", type=positive_float, default=2e-5)
    d.add_argument("--warmup", type=int, default=200)
    d.add_argument("--batch-size", type=positive_int, default=4)
    d.add_argument("--accumulation", type=int, default=8)
    d.add_argument("--max-epochs", type=int, default=50)
    d.add_argument("--patience", type=int, default=7)
    d.add_argument("--max-sentences", type=int, help="cap sentences per document while fine-tuning (CPU runs)")
    d.add_argument("--seeds", type=int, default=1, help="repeat with seeds SEED, SEED+1, ... (each fine-tuning from the "
                   "saved model) and report the mean and standard deviation (the lightweight paper: 5)")
    d.set_defaults(func=run_xldc)

    r = ev.add_parser("report", help="result JSON files -> markdown table + PNG bar chart")
    r.add_argument("results", nargs="+")
    r.add_argument("--output", "-o", help="markdown file (default: print)")
    r.add_argument("--plot", help="PNG bar chart")
    r.set_defaults(func=run_report)


# -- helpers ---------------------------------------------------------------------------------
def _length_bounds(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        bounds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise HmdeError(f"--length-buckets takes increasing whole numbers separated by commas, got '{text}'") from None
    if not bounds or any(b < 1 for b in bounds) or bounds != sorted(set(bounds)):
        raise HmdeError(f"--length-buckets takes increasing whole numbers >= 1, got '{text}'")
    return bounds


def _setup(args, need_method=True):
    from ..evaluation.encoders import EvalEncoder
    from ..lawdr import LawdrStats
    from ..methods import MethodOptions
    from ..registry import resolve_model_path

    device = pick_device(args.device)
    kind, model = load_model(args.model, device, args=args)
    try:
        model_path = str(resolve_model_path(args.model))
    except HmdeError:
        model_path = None
    method = getattr(args, "method", None) or ("hmde" if kind == "hmde" else "mean")
    options = MethodOptions(sentence_batch_size=args.sentence_batch_size, autocast_dtype=autocast_dtype(args.bf16),
                            show_progress_bar=not args.no_progress, **lawdr_fit_options(args))
    stats = LawdrStats.load(args.lawdr_stats) if getattr(args, "lawdr_stats", None) else None
    encoder = EvalEncoder(model, method if need_method else "mean", options, stats)
    return encoder, model_path, method


def _write(args, protocol, model_path, method, files, metrics, settings) -> None:
    from ..evaluation.provenance import result_record, write_result

    write_result(args.output, result_record(protocol, args.model, model_path, method, files, metrics,
                                            args.seed, settings))
    print(f"wrote {args.output}")


def _seed(args) -> None:
    import torch

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)


# -- protocols -------------------------------------------------------------------------------
def run_align(args) -> int:
    from ..evaluation.alignment import alignment_metrics, combine_domains, load_concept_documents, load_lett

    _seed(args)
    enc, model_path, method = _setup(args)
    settings = {"scoring": args.scoring, "k": args.k, "matching": args.matching}
    if args.lett:
        if not args.gold:
            raise HmdeError("--lett needs --gold")
        src_lang, _, tgt_lang = args.lett_langs.partition("-")
        domains = {Path(p).name.removesuffix(".gz").removesuffix(".lett"): load_lett(p, args.gold, src_lang, tgt_lang) for p in args.lett}
        enc.prepare([(d.texts, d.lang) for pair in domains.values() for d in pair])
        per_domain = {}
        for name, (src, tgt) in domains.items():
            m = alignment_metrics(enc.documents(src.texts, src.lang), enc.documents(tgt.texts, tgt.lang),
                                  src.concepts, tgt.concepts, args.scoring, args.k, args.matching)
            per_domain[name] = m
            print(f"{name}: recall {m['recall']:.3f} ({m['found_pairs']}/{m['gold_pairs']})  P@1 {m['p@1']:.3f}")
        total = combine_domains(per_domain)
        metrics = {"domains": per_domain, "all_domains": total, "average": total["recall"], "headline": "recall"}
        files = sorted({f for pair in domains.values() for d in pair for f in d.files})
        settings["dataset"] = ",".join(sorted(domains))
        print(f"recall over {len(domains)} domain(s): {total['recall']:.4f} ({total['found_pairs']}/"
              f"{total['gold_pairs']})")
    else:
        if not args.data:
            raise HmdeError("give --data (a folder of <lang>.jsonl.gz) or --lett/--gold")
        folder = Path(args.data)
        langs = args.langs or ",".join(sorted(p.name.split(".")[0] for p in folder.glob("*.jsonl*")))
        pairs = _pairs(args.pairs, langs, args.pivot)
        if not pairs:
            raise HmdeError("no language pairs to evaluate")
        sets = {lang: load_concept_documents(folder, lang) for pair in pairs for lang in pair}
        enc.prepare([(s.texts, s.lang) for s in sets.values()])
        per_pair = {}
        for a, b in pairs:
            m = alignment_metrics(enc.documents(sets[a].texts, a), enc.documents(sets[b].texts, b),
                                  sets[a].concepts, sets[b].concepts, args.scoring, args.k, args.matching)
            per_pair[f"{a}-{b}"] = m
            print(f"{a}-{b}: P@1 {m['p@1_src->tgt']:.3f} / {m['p@1_tgt->src']:.3f}  recall {m['recall']:.3f}")
        metrics = {"pairs": per_pair, "average": float(np.mean([m["p@1"] for m in per_pair.values()]))}
        files = [f for s in sets.values() for f in s.files]
        settings["dataset"] = folder.name
    if enc.vectorizer.lawdr_stats is not None:
        settings["lawdr_m"] = enc.vectorizer.lawdr_stats.m
    if not args.lett:
        print(f"average P@1: {metrics['average']:.4f}")
    _write(args, "align", model_path, method, files, metrics, settings)
    return 0


def run_xsr(args) -> int:
    from ..evaluation.tatoeba import evaluate_tatoeba, tatoeba_languages

    _seed(args)
    enc, model_path, _ = _setup(args, need_method=False)
    langs = args.langs.split(",") if args.langs else tatoeba_languages(args.data)
    result = evaluate_tatoeba(lambda texts: enc.queries(texts), args.data, langs)
    for lang, r in result["languages"].items():
        print(f"{lang}: P@1 {r[f'{lang}->eng']:.3f} / {r[f'eng->{lang}']:.3f}")
    print(f"average P@1: {result['average']:.4f}")
    files = [Path(args.data) / f"tatoeba.{lang}-eng.{s}" for lang in langs for s in (lang, "eng")]
    _write(args, "xsr", model_path, "sentence", files, result, {"dataset": Path(args.data).name})
    return 0


def run_pool_xsr(args) -> int:
    from ..evaluation.pool_retrieval import build_pool_task, pool_p_at_1

    _seed(args)
    langs = [lang for lang in args.langs.split(",") if lang]
    tasks = {lang: build_pool_task(args.parallel, lang, args.pool_lang, args.queries, args.pool, args.seed)
             for lang in langs}  # every input is read and checked before the model is loaded
    enc, model_path, _ = _setup(args, need_method=False)
    per_lang = {}
    for lang, task in tasks.items():
        per_lang[lang] = pool_p_at_1(lambda texts: enc.queries(list(texts)), task)
        print(f"{lang}->{args.pool_lang}: P@1 {per_lang[lang]['p@1']:.4f} ({len(task.queries)} queries, "
              f"{len(task.pool)} candidates)")
    result = {"languages": per_lang, "average": float(np.mean([r["p@1"] for r in per_lang.values()]))}
    print(f"average P@1: {result['average']:.4f}")
    files = sorted({f for t in tasks.values() for f in t.files})
    _write(args, "pool-xsr", model_path, "sentence", files, result,
           {"dataset": Path(args.parallel).name, "queries": args.queries, "pool": args.pool})
    return 0


def run_clir(args) -> int:
    from ..evaluation import clir
    from ..multivector import check_scoring, score_documents

    check_scoring(args.top_sentences, args.doc_weight)
    if args.multi_vector and args.first_stage:
        raise HmdeError("--multi-vector ranks the whole collection; it does not re-rank a --first-stage run")
    measures = clir.parse_measures(args.measures)  # before the model loads
    _seed(args)
    enc, model_path, method = _setup(args)
    tasks = []  # (name, topics, collection, qrels)
    if args.xquad:
        langs = sorted(p.name.split(".")[1] for p in Path(args.xquad).glob("xquad.*.json"))
        pairs = _pairs(args.pairs, ",".join(langs), args.pivot)
        if not args.pairs:
            pairs += [(args.pivot, lang) for lang in langs if lang != args.pivot]
        for q, d in pairs:
            tasks.append((f"{q}-{d}", *clir.load_xquad(args.xquad, q, d, args.unit)))
        dataset = f"xquad-{args.unit}"
    else:
        if not (args.topics and args.qrels and args.documents):
            raise HmdeError("give --xquad, or --topics, --qrels and --documents")
        if args.clef:
            topics = clir.read_clef_topics(args.topics, args.query_lang, encoding=args.encoding)
            coll = clir.read_clef_documents(args.documents, args.doc_lang, encoding=args.encoding)
        else:
            topics = clir.read_topics(args.topics, args.query_lang)
            coll = clir.read_collection(args.documents[0], args.doc_lang)
        tasks.append((f"{args.query_lang or 'q'}-{args.doc_lang or coll.lang or 'd'}", topics, coll,
                      clir.read_qrels(args.qrels)))
        dataset = Path(args.documents[0]).name
    first_stage = clir.read_run(args.first_stage) if args.first_stage else None
    bounds = _length_bounds(args.length_buckets)
    by_length: dict[str, list[float]] = {}
    enc.prepare([(c.texts, c.lang) for _, _, c, _ in {t[2].files[0]: t for t in tasks}.values()])
    per_pair, files, full_run = {}, set(), {}
    for name, topics, coll, qrels in tasks:
        for w in clir.check_qrels(qrels, topics.ids, coll.doc_ids):
            warn(f"{name}: {w}")
        qv = enc.queries(topics.texts, topics.lang)
        if args.multi_vector:
            sentences = enc.sentence_matrix(coll.texts, coll.lang, args.multi_vector)  # context: documents too
            dv = enc.documents(coll.texts, coll.lang) if args.doc_weight else None
            scores = score_documents(qv, sentences, args.top_sentences, dv, args.doc_weight)
            run = clir.rank_scores(scores, topics.ids, coll.doc_ids)
        else:
            dv = enc.documents(coll.texts, coll.lang)
            run = (clir.rerank(qv, dv, topics.ids, coll.doc_ids, first_stage) if first_stage
                   else clir.rank(qv, dv, topics.ids, coll.doc_ids))
        scores = clir.score_run(qrels, run, measures)
        per_pair[name] = scores
        if bounds:
            from ..segmentation import split_sentences

            sentences = {d: len(t) if isinstance(t, list) else len(split_sentences(t, coll.lang))
                         for d, t in zip(coll.doc_ids, coll.texts)}
            per_query = clir.per_query_scores(qrels, run, measures[0])
            for label, values in clir.scores_by_length(qrels, per_query, sentences, bounds).items():
                by_length.setdefault(label, []).extend(values)
        full_run.update({f"{name}:{q}" if len(tasks) > 1 else q: docs for q, docs in run.items()})
        files.update(topics.files + coll.files)
        print(f"{name}: " + "  ".join(f"{k} {v:.4f}" for k, v in scores.items()))
    main = measures[0]
    metrics = {"pairs": per_pair, "main_measure": main,
               "average": float(np.mean([s[main] for s in per_pair.values()])),
               "averages": {m: float(np.mean([s[m] for s in per_pair.values()])) for m in measures}}
    if by_length:
        order = [clir.length_label(b, bounds) for b in bounds] + [clir.length_label(bounds[-1] + 1, bounds)]
        metrics["by_length"] = {label: {"queries": len(by_length[label]), main: float(np.mean(by_length[label]))}
                                for label in order if label in by_length}
        for label, row in metrics["by_length"].items():
            print(f"documents of {label} sentences: {main} {row[main]:.4f} ({row['queries']} queries)")
    if args.run_output:
        clir.write_run(args.run_output, full_run)
    print(f"average {main}: {metrics['average']:.4f}")
    settings = {"dataset": dataset, "rerank": bool(first_stage), "queries": "lower encoder"}
    if args.multi_vector:
        settings.update({"multi_vector": args.multi_vector, "top_sentences": args.top_sentences,
                         "doc_weight": args.doc_weight})
        method = f"{method}:sentences-{args.multi_vector}"
    if method == "lawdr" and enc.vectorizer.lawdr_stats is not None:
        settings["lawdr_m"] = enc.vectorizer.lawdr_stats.m
    _write(args, "clir", model_path, method, sorted(files), metrics, settings)
    return 0


def _parse_mldoc(items):
    from ..evaluation.classification import read_mldoc

    out = {"train": [], "dev": [], "test": []}
    for item in items:
        head, sep, path = item.partition("=")
        split, _, lang = head.partition(":")
        if not sep or split not in out or not lang:
            raise HmdeError(f"--mldoc takes SPLIT:LANG=PATH (split train, dev or test), got '{item}'")
        out[split].append(read_mldoc(path, lang))
    if not out["train"] or not out["test"]:
        raise HmdeError("--mldoc needs at least train:LANG=PATH and test:LANG=PATH")
    return out


def run_xldc(args) -> int:
    from ..evaluation import classification as cls

    if args.protocol != "frozen" and args.backend != "torch":  # before anything is loaded
        raise HmdeError(f"--backend {args.backend} is for inference: fine-tuning needs --backend torch "
                        "(evaluate the exported model with --protocol frozen)")
    _seed(args)
    enc, model_path, method = _setup(args)
    if args.mldoc:
        parts = _parse_mldoc(args.mldoc)
        train = parts["train"][0]
        dev = parts["dev"][0] if parts["dev"] else None
        targets = parts["test"]
        dataset = "mldoc"
    elif args.masakhanews:
        train = (cls.read_masakhanews_split(args.masakhanews, "eng", "dev")
                 + cls.read_masakhanews_split(args.masakhanews, "eng", "test"))
        dev = None
        targets = [cls.read_masakhanews_split(args.masakhanews, t, "test") for t in args.targets.split(",") if t]
        dataset = "masakhanews"
    else:
        raise HmdeError("give --masakhanews DIR or --mldoc SPLIT:LANG=PATH ...")
    checked = []
    for t in targets:
        t2, warnings = cls.align_labels(train.labels, t)
        for w in warnings:
            warn(w)
        checked.append(t2)
    files = train.files + [f for t in checked for f in t.files] + (dev.files if dev else [])
    protocols = ["frozen", "finetune"] if args.protocol == "both" else [args.protocol]
    if "finetune" in protocols and method == "lawdr":
        if protocols == ["finetune"]:
            raise HmdeError("LAWDR's statistics are fitted, not trained: --method lawdr needs --protocol frozen")
        warn("LAWDR's statistics are fitted, not trained: --method lawdr is evaluated with the frozen protocol only")
        protocols = ["frozen"]
    if args.seeds < 1:
        raise HmdeError("--seeds must be >= 1")
    runs: dict[str, list[dict]] = {p: [] for p in protocols}
    for n, seed in enumerate(range(args.seed, args.seed + args.seeds)):
        if n:  # every seed starts from the saved model: fine-tuning changed the loaded one
            args_seed = argparse.Namespace(**{**vars(args), "seed": seed})
            _seed(args_seed)
            enc, _, _ = _setup(args_seed)
        if "frozen" in protocols:
            enc.prepare([(train.texts, train.lang)] + [(t.texts, t.lang) for t in checked])
            runs["frozen"].append({"targets": cls.frozen_protocol(enc.documents, train, checked, seed)})
        if "finetune" in protocols:
            tr, dv = (train, dev) if dev else cls.split_dev(train, 0.1, seed)
            config = cls.FinetuneConfig(lr=args.lr, warmup=args.warmup, batch_size=args.batch_size,
                                        accumulation=args.accumulation, max_epochs=args.max_epochs,
                                        patience=args.patience, seed=seed, max_sentences=args.max_sentences)
            runs["finetune"].append(cls.finetune_protocol(enc.vectorizer, tr, dv, checked, config,
                                                          show_progress=not args.no_progress,
                                                          log=lambda h: print(json.dumps(h))))
    results = {p: cls.combine_seeds(r, list(range(args.seed, args.seed + args.seeds))) for p, r in runs.items()}
    base = Path(args.output)
    for protocol, res in results.items():
        targets_ = res["targets"]
        metrics = {"targets": targets_, "average": float(np.mean([v["accuracy"] for v in targets_.values()]))}
        metrics.update({k: res[k] for k in ("history", "best_epoch", "epochs_run", "seeds") if k in res})
        for lang, v in targets_.items():
            print(f"{protocol} {lang}: accuracy {v['accuracy']:.4f} ({v['documents']} documents)")
        out = base if len(results) == 1 else base.with_name(f"{base.stem}.{protocol}{base.suffix}")
        args_out = argparse.Namespace(**{**vars(args), "output": str(out)})
        _write(args_out, "xldc", model_path, method, files, metrics,
               {"dataset": dataset, "variant": protocol, "train_documents": len(train)})
    return 0


def run_report(args) -> int:
    from ..atomic import write_text_atomic
    from ..evaluation.report import bar_chart, load_results, markdown_tables

    records = load_results(args.results)
    text = markdown_tables(records)
    if args.output:
        write_text_atomic(args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    if args.plot:
        bar_chart(records, args.plot)
        print(f"wrote {args.plot}")
    return 0
