"""What ``hmde eval`` runs once its flags are parsed (:mod:`hmde.cli.eval`): load the model and
method, call the protocol in :mod:`hmde.evaluation`, write the result JSON with its provenance.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..methods import default_method
from ..errors import HmdeError
from .common import autocast_dtype, lawdr_fit_options, load_model, pick_device, warn


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
    from ..methods.lawdr_statistics import LawdrStats
    from ..methods.vectorizer import MethodOptions
    from ..encoders.registry import resolve_model_path
    from ..encoders.sentence_cache import attach_vector_cache
    from .eval_languages import routed_model

    args.model = routed_model(args)  # the result records the model that ran
    kind, model = load_model(args.model, pick_device(args.device), args=args)
    tuned = getattr(args, "protocol", None) in ("finetune", "both")  # fine-tuned weights: vectors never reused
    args.vector_cache = attach_vector_cache(model, None if tuned else getattr(args, "sentence_cache", None))
    try:
        model_path = str(resolve_model_path(args.model))
    except HmdeError:
        model_path = None
    method = getattr(args, "method", None) or default_method(kind == "hmde")
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
    if getattr(args, "vector_cache", None) is not None:
        args.vector_cache.flush()


def _seed(args) -> None:
    import torch

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)


# -- protocols -------------------------------------------------------------------------------
def run_align(args) -> int:
    from ..evaluation.alignment_protocol import align_domains, align_language_pairs

    _seed(args)
    enc, model_path, method = _setup(args)
    settings = {"scoring": args.scoring, "k": args.k, "matching": args.matching}
    if args.lett:
        if not args.gold:
            raise HmdeError("--lett needs --gold")
        src_lang, _, tgt_lang = args.lett_langs.partition("-")
        metrics, files, settings["dataset"] = align_domains(enc, args.lett, args.gold, src_lang, tgt_lang,
                                                            args.scoring, args.k, args.matching)
    else:
        if not args.data:
            raise HmdeError("give --data (a folder of <lang>.jsonl.gz) or --lett/--gold")
        folder = Path(args.data)
        langs = args.langs or ",".join(sorted(p.name.split(".")[0] for p in folder.glob("*.jsonl*")))
        pairs = _pairs(args.pairs, langs, args.pivot)
        if not pairs:
            raise HmdeError("no language pairs to evaluate")
        metrics, files = align_language_pairs(enc, folder, pairs, args.scoring, args.k, args.matching)
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
    from ..evaluation.clir_protocol import SentenceScoring, file_task, run_clir_tasks, xquad_tasks
    from ..index.multivector import check_scoring

    check_scoring(args.top_sentences, args.doc_weight)
    if args.multi_vector and args.first_stage:
        raise HmdeError("--multi-vector ranks the whole collection; it does not re-rank a --first-stage run")
    measures = clir.parse_measures(args.measures)  # before the model loads
    _seed(args)
    enc, model_path, method = _setup(args)
    if args.xquad:
        langs = sorted(p.name.split(".")[1] for p in Path(args.xquad).glob("xquad.*.json"))
        pairs = _pairs(args.pairs, ",".join(langs), args.pivot)
        if not args.pairs:
            pairs += [(args.pivot, lang) for lang in langs if lang != args.pivot]
        tasks, dataset = xquad_tasks(args.xquad, pairs, args.unit), f"xquad-{args.unit}"
    else:
        if not (args.topics and args.qrels and args.documents):
            raise HmdeError("give --xquad, or --topics, --qrels and --documents")
        tasks = [file_task(args.topics, args.qrels, args.documents, args.query_lang, args.doc_lang, args.clef,
                           args.encoding)]
        dataset = Path(args.documents[0]).name
    scoring = (SentenceScoring(args.multi_vector, args.top_sentences, args.doc_weight) if args.multi_vector
               else None)
    first_stage = clir.read_run(args.first_stage) if args.first_stage else None
    metrics, full_run, files = run_clir_tasks(enc, tasks, measures, first_stage, _length_bounds(args.length_buckets),
                                              scoring, warn=warn)
    if args.run_output:
        clir.write_run(args.run_output, full_run)
    print(f"average {metrics['main_measure']}: {metrics['average']:.4f}")
    settings = {"dataset": dataset, "rerank": bool(first_stage), "queries": "lower encoder"}
    if args.multi_vector:
        settings.update({"multi_vector": args.multi_vector, "top_sentences": args.top_sentences,
                         "doc_weight": args.doc_weight})
        method = f"{method}:sentences-{args.multi_vector}"
    if enc.vectorizer.document_method.fitted and enc.vectorizer.lawdr_stats is not None:
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
    from ..evaluation import xldc_protocol as xldc

    if args.protocol != "frozen" and args.backend != "torch":  # before anything is loaded
        raise HmdeError(f"--backend {args.backend} is for inference: fine-tuning needs --backend torch "
                        "(evaluate the exported model with --protocol frozen)")
    _seed(args)
    enc, model_path, method = _setup(args)
    if args.mldoc:
        parts = _parse_mldoc(args.mldoc)
        train, dev, targets, dataset = parts["train"][0], (parts["dev"] or [None])[0], parts["test"], "mldoc"
    elif args.masakhanews:
        (train, dev, targets), dataset = xldc.masakhanews_data(args.masakhanews, args.targets.split(",")), "masakhanews"
    else:
        raise HmdeError("give --masakhanews DIR or --mldoc SPLIT:LANG=PATH ...")
    checked = xldc.checked_targets(train, targets, warn)
    files = train.files + [f for t in checked for f in t.files] + (dev.files if dev else [])
    protocols = xldc.protocols_for(args.protocol, enc.vectorizer.document_method, warn)
    if args.seeds < 1:
        raise HmdeError("--seeds must be >= 1")

    def encoder_for_seed(seed: int):
        if seed == args.seed:  # the first seed uses the model already loaded
            return enc
        args_seed = argparse.Namespace(**{**vars(args), "seed": seed})
        _seed(args_seed)
        return _setup(args_seed)[0]

    finetune = {"lr": args.lr, "warmup": args.warmup, "batch_size": args.batch_size, "accumulation": args.accumulation,
                "max_epochs": args.max_epochs, "patience": args.patience, "max_sentences": args.max_sentences}
    results = xldc.run_seeds(encoder_for_seed, train, dev, checked, protocols,
                             range(args.seed, args.seed + args.seeds), finetune, show_progress=not args.no_progress,
                             log=lambda h: print(json.dumps(h)))
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
    from ..ground.atomic import write_text_atomic
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
