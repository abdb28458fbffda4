"""``hmde sentence-stage``: a model's lower encoder trained on sentence pairs across languages, the last stage of
the bundled hmde-e5 (issue 64; :mod:`hmde.pretraining.sentence_stage`, docs/hmde-e5.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import HmdeError
from .common import add_device_argument

# the stage's settings a user may change; the rest of SentenceStageConfig (the translation files) keep theirs
SETTINGS = ("steps", "batch_size", "lr", "warmup", "margin", "scale", "max_tokens", "lower_trainable", "seed",
            "checkpoint_every", "ranking_chunk", "pairs", "alpha", "ranking_weight", "distill_weight", "roles",
            "hard_negatives", "negative_ceiling", "english_side")


HELP = {
    "roles": "how the two sides of a pair are embedded: query-document (x as a query: search), document (both as "
             "document sentences, as hmde mine and align-sentences embed them: a translation encoder) or by-kind (x "
             "as a query in titles, headings and neighbours, as a document sentence in translations, udhr, bible)",
    "hard_negatives": "per pair, this many hard negatives: the nearest other sentences of its y side's language by "
                      "the starting model, mined once and kept in OUTPUT (pairs of translations, udhr, bible)",
    "english_side": "who embeds the English side of a pair: student (the model trained, one encoder for every "
                    "language) or teacher (MODEL itself, frozen: the trained model is a routed encoder for "
                    "--languages alone, its vectors in MODEL's space; pairs of translations, udhr, bible with English)",
    "negative_ceiling": "a hard negative's cosine to x stays under this share of the pair's own (a closer one is "
                        "likely a translation too)",
}


def register(sub) -> None:
    from ..pretraining.sentence_stage_config import ENGLISH_SIDES, PAIR_KINDS, ROLES, SHIPPED_KINDS, SentenceStageConfig

    p = sub.add_parser(
        "sentence-stage", help="train a model's lower encoder on query-like sentence pairs across languages "
        "(hmde-e5's last stage)",
        description="Trains the lower encoder of MODEL with the in-batch ranking loss on pairs "
        "from the shared data: help-page titles and headings as queries, the page's text or the paragraph under "
        "the heading in another language (or, in --mono-share of them, the same language) as passages. The "
        "defaults are the stage that made the bundled hmde-e5 from its joint stage's model, with a third as many "
        "translation pairs of parallel/ (docs/hmde-e5.md); "
        "a rerun with the same OUTPUT resumes from its last checkpoint. The trained model is OUTPUT/model.")
    p.add_argument("model", metavar="MODEL", help="a model name or folder: hmde recipe e5's stage-2 model "
                   "(RUN/hmde-joint) to reproduce the bundled hmde-e5, which has had this stage already")
    p.add_argument("--data", required=True, help="the shared data folder (docs/ for titles and headings, "
                   "parallel/ for neighbours and translations)")
    p.add_argument("--output", "-o", required=True, help="the run's folder: checkpoint/, log.jsonl, config.json, "
                   "and the trained model in OUTPUT/model")
    p.add_argument("--pairs-from", default=",".join(SHIPPED_KINDS), help="comma-separated kinds of pairs, trained "
                   f"on together: {', '.join(PAIR_KINDS)} (default {','.join(SHIPPED_KINDS)}; --pairs translation "
                   "pairs)")
    p.add_argument("--mono-share", type=float, default=0.3, help="the share of titles, headings and neighbours "
                   "paired within one language (default 0.3)")
    defaults = SentenceStageConfig()
    for name in SETTINGS:
        value = getattr(defaults, name)
        choices = {"roles": ROLES, "english_side": ENGLISH_SIDES}.get(name)
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value, choices=choices,
                       help=f"{HELP[name]} (default {value})" if name in HELP else f"default {value}")
    p.add_argument("--languages", default="", help="with --english-side teacher: the languages the routed "
                   "encoder serves (its pairs' other side), comma-separated codes as the data names them (jav_Java, "
                   "quc), or weak-unseen: those MODEL's language table puts in the weak tier and outside its "
                   "pretraining (docs/languages.md); written to OUTPUT/model/route.json")
    p.add_argument("--select-route", action="store_true", help="with --english-side teacher: keep the validation "
                   "slice (a quarter of the UDHR articles, Bible chapters and translations outside the development "
                   "slice) out of the pairs and, after training, route only the languages it shows the routed "
                   "encoder gaining in (hmde.pretraining.route_validation; the table goes into route.json)")
    add_device_argument(p)
    p.set_defaults(func=run)


def route_languages(spec: str, model: str) -> list[str]:
    """``--languages``: codes, or ``weak-unseen`` (:func:`hmde.text.language_tiers.weak_unseen` of MODEL's name)."""
    from ..text.language_tiers import weak_unseen

    names = [c.strip() for c in spec.split(",") if c.strip()]
    if names == ["weak-unseen"]:
        found = weak_unseen(Path(model).name)
        if not found:
            raise HmdeError(f"--languages weak-unseen: {model} has no measured language table "
                            "(hmde/text/language_quality.json); name the languages")
        return found
    if not names:
        raise HmdeError("--english-side teacher needs --languages: the languages the routed encoder serves")
    return names


def run(args: argparse.Namespace) -> int:
    from ..encoders.devices import pick_device
    from ..pretraining.sentence_stage import record_run_pairs, sample_stage_pairs
    from ..pretraining.sentence_stage_config import PAIR_KINDS, SPAN_KINDS, SPAN_SHARE, TAGGED_KINDS, SentenceStageConfig

    data = Path(args.data)
    if not data.is_dir():
        raise HmdeError(f"{data}: no such folder (--data: the shared data folder, with docs/ and parallel/)")
    kinds = [k.strip() for k in args.pairs_from.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in PAIR_KINDS]
    if unknown or not kinds:
        raise HmdeError(f"--pairs-from: {', '.join(unknown) or 'nothing named'}; the kinds are "
                        f"{', '.join(PAIR_KINDS)}")
    if not 0 <= args.mono_share <= 1:
        raise HmdeError(f"--mono-share must be in [0, 1], got {args.mono_share}")
    config = SentenceStageConfig(**{name: getattr(args, name) for name in SETTINGS})
    config.check()
    shares = {kind: SPAN_SHARE if kind in SPAN_KINDS else args.mono_share for kind in kinds}
    if config.hard_negatives and set(kinds) - set(TAGGED_KINDS):  # mined within the y side's language
        raise HmdeError(f"--hard-negatives needs pairs that know their languages: --pairs-from some of "
                        f"{', '.join(TAGGED_KINDS)}")
    route = None
    if config.english_side == "teacher":  # a routed encoder: (other, English) pairs of its languages alone
        from ..pretraining.tail_pairs import sample_routed_pairs

        route = route_languages(args.languages, args.model)
        tagged = sample_routed_pairs(data, kinds, route, config.sources, seed=config.seed,
                                     part="training" if args.select_route else "all")
    elif args.languages or args.select_route:
        raise HmdeError(f"{'--languages' if args.languages else '--select-route'} is for --english-side teacher "
                        "(a routed encoder)")
    else:  # errors and count before the model loads
        tagged = sample_stage_pairs(data, config, shares, with_languages=True)
    pairs = [(x, y) for x, y, _ in tagged]
    languages = [lang for _, _, lang in tagged] if config.needs_languages else None
    config.check_pairs(len(pairs), str(data))
    record_run_pairs(Path(args.output), {"kinds": shares, "pairs": len(pairs)}
                     | ({"languages": route} if route is not None else {})
                     | ({"validation_slice": "held out"} if args.select_route else {}))
    print(f"{len(pairs)} pairs ({', '.join(kinds)}); {config.steps} steps of {config.batch_size}", flush=True)

    from ..encoders.model_loading import load_model
    from ..pretraining.sentence_stage import SentenceStageTrainer

    model = load_model(args.model, pick_device(args.device))[1]
    SentenceStageTrainer(model, pairs, config, args.output, languages).train()
    out = Path(args.output) / "model"
    model.save_pretrained(out)
    if route is not None:
        from ..ground.atomic import write_text_atomic
        from ..pretraining.tail_pairs import ROUTE_FILE

        served = sorted({lang for _, _, lang in tagged})
        record = {"starting_model": args.model, "languages": served}
        if args.select_route:  # each language routed only where the validation slice says it gains
            from ..pretraining.route_validation import selected_route

            record = selected_route(args.model, out, data, served, kinds, config, pick_device(args.device))
        write_text_atomic(out / ROUTE_FILE, json.dumps(record, indent=1))
    print(f"saved {out}")
    return 0

