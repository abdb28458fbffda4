"""The languages an ``hmde eval`` command names in its flags (hmde-auto routes by them)."""

from __future__ import annotations


def eval_languages(args) -> list[str] | None:
    """The languages an ``hmde eval`` run names in its flags (--langs, --pairs, --pivot, --query-lang,
    --doc-lang, --targets, --src-lang/--tgt-lang), or None when it names none (all of a folder)."""
    found: list[str] = []
    for flag in ("langs", "targets"):
        found += [x for x in (getattr(args, flag, None) or "").split(",") if x]
    for pair in (getattr(args, "pairs", None) or "").split(","):
        found += [x for x in pair.split("-") if x]
    for flag in ("pivot", "query_lang", "doc_lang", "src_lang", "tgt_lang"):
        if isinstance(getattr(args, flag, None), str):
            found.append(getattr(args, flag))
    if getattr(args, "masakhanews", None):
        found.append("en")  # MasakhaNEWS trains on English
    return found if len(found) > (1 if getattr(args, "pivot", None) else 0) else None


def routed_model(args) -> str:
    """The model an ``hmde eval`` run uses: hmde-auto routed by the languages its flags name."""
    from ..encoders.routing import route

    return route(args.model, eval_languages(args))
