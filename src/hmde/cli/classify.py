"""``hmde classify train|predict``: a classifier of one's own labels on frozen document vectors
(:mod:`hmde.classify.classifier`), saved as a folder without pickles, and its predictions as JSONL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..encoders.config import DOCUMENT_METHODS
from .inputs import add_input_arguments
from ..errors import HmdeError, InputError
from .arg_types import language_code, positive_float, positive_int
from .common import add_device_argument, add_model_argument


def register(sub) -> None:
    p = sub.add_parser("classify", help="train a classifier of your own labels on document vectors; predict with it")
    csub = p.add_subparsers(dest="classify_command", metavar="ACTION")
    csub.required = True
    t = csub.add_parser("train", help="fit a logistic-regression head on the frozen document vectors of LABELLED",
                        description="Zero-shot across languages: train on one language, predict in any other the "
                        "model covers (the frozen protocol of `hmde eval xldc`).")
    add_model_argument(t)
    t.add_argument("input", metavar="LABELLED", help=".jsonl/.jsonl.gz or .parquet documents with a label field")
    t.add_argument("--output", "-o", required=True, metavar="CLF_DIR")
    t.add_argument("--overwrite", action="store_true", help="replace a classifier at CLF_DIR")
    t.add_argument("--label-field", default="label", help="the field holding each document's label (default label)")
    t.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                   help="document vectors (default: the model's recommended method)")
    t.add_argument("--c", type=positive_float, default=10.0, help="inverse regularisation strength (default 10, as the "
                   "frozen XLDC protocol)")
    t.add_argument("--text-field", default="text", help="the field holding a document's text (default text)")
    t.add_argument("--id-field", default="doc_id", help="the field holding a document's id (default doc_id)")
    t.add_argument("--lang-field", default="lang", help="the field holding a document's language (default lang)")
    add_common_arguments(t)
    t.set_defaults(func=run_train)
    r = csub.add_parser("predict", help="label documents with a trained classifier")
    r.add_argument("classifier", metavar="CLF_DIR")
    add_input_arguments(r)
    r.add_argument("--output", "-o", help="JSONL of predictions (default: print them)")
    r.add_argument("--top-k", type=int, default=1, help="labels per document, most probable first (default 1)")
    r.add_argument("--text-field", default="text", help="the field holding a document's text (default text)")
    r.add_argument("--id-field", default="doc_id", help="the field holding a document's id (default doc_id)")
    r.add_argument("--lang-field", default="lang", help="the field holding a document's language (default lang)")
    r.add_argument("--labels", help="comma-separated labels the documents may take (default: every label the "
                   "classifier knows); probabilities are renormalised over them")
    add_common_arguments(r)
    r.set_defaults(func=run_predict)


def add_common_arguments(p) -> None:
    """What `hmde encode` also takes: the documents' language, batching, the device and progress."""
    p.add_argument("--lang", type=language_code, default=None, help="language of all documents (overrides --lang-field)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="documents per batch (default 32)")
    add_device_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def read_labelled(args: argparse.Namespace):
    """Every record with its label, checked before any model loads: the field present and a string."""
    from .inputs import read_input
    from .preflight import check_records

    records = list(read_input(args, (args.label_field,)))
    check_records(records, args)
    for r in records:
        label = r.extra.get(args.label_field)
        if label is None:
            raise InputError("missing field (use --label-field to name another)", str(args.input), r.line,
                             args.label_field)
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise InputError(f"a label must be a string or a whole number, got {type(label).__name__}",
                             str(args.input), r.line, args.label_field)
    labels = [str(r.extra[args.label_field]) for r in records]
    if len(set(labels)) < 2:
        raise InputError(f"a classifier needs at least two labels; every document is labelled {labels[0]!r}",
                         str(args.input), field=args.label_field)
    return records, labels


def encoder(model_name: str, method: str | None, device: str, batch_size: int = 32):
    from ..methods import default_method
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions
    from .common import load_model, pick_device

    kind, model = load_model(model_name, pick_device(device))
    method = method or default_method(kind == "hmde", model_name)
    return DocumentVectorizer(model, method, MethodOptions(batch_size=batch_size)), method


def vectors_of(vectorizer, records, args: argparse.Namespace):
    from ..classify.classifier import document_vectors

    return document_vectors(vectorizer, [r.text for r in records], [args.lang or r.lang for r in records],
                            progress=not args.no_progress)


def run_train(args: argparse.Namespace) -> int:
    from ..classify.classifier import Classifier, is_classifier
    from ..evaluation.provenance import model_hash
    from ..ground.output_dirs import check_replaceable, check_writable_parent
    from ..encoders.registry import recorded_name, resolve_model_path
    from ..encoders.routing import refuse_for_one_space

    check_writable_parent(args.output)
    check_replaceable(args.output, "hmde classifier", is_classifier, args.overwrite)
    refuse_for_one_space(args.model, "a classifier", "name its model")
    records, labels = read_labelled(args)
    vectorizer, method = encoder(args.model, args.method, args.device, args.batch_size)
    vectors = vectors_of(vectorizer, records, args)
    name = recorded_name(args.model)
    clf = Classifier.fit(vectors, labels, c=args.c, info={"model": name, "model_sha256": model_hash(
        resolve_model_path(name)), "method": method, "dim": int(vectors.shape[1])})
    clf.save(args.output, overwrite=args.overwrite)
    accuracy = clf.info["cv_accuracy"]
    print(f"trained a classifier of {len(clf.labels)} labels on {len(records)} documents ({name}, {method}); "
          + (f"{clf.info['cv_folds']}-fold cross-validated accuracy {accuracy:.3f}; " if accuracy is not None else "")
          + f"saved to {args.output}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from ..ground.atomic import write_text_atomic
    from ..classify.classifier import Classifier
    from ..encoders.registry import recorded_model, recorded_model_available
    from .inputs import read_input
    from .preflight import check_records

    if args.top_k < 1:
        raise HmdeError("--top-k must be >= 1")
    import numpy as np

    clf = Classifier.load(args.classifier)
    allowed = [x.strip() for x in args.labels.split(",") if x.strip()] if args.labels is not None else None
    if allowed is not None:
        if not allowed:
            raise HmdeError("--labels names no label")
        clf.restricted(np.zeros((0, len(clf.labels))), allowed)  # an unknown label, before the model loads
    records = list(read_input(args))
    check_records(records, args)
    model = recorded_model(str(clf.info.get("model", "")))
    if not recorded_model_available(model):
        raise HmdeError(f"classifier {args.classifier} was trained on {model}, which is neither a folder here nor a "
                        "bundled model")
    vectorizer, _ = encoder(model, clf.info.get("method"), args.device, args.batch_size)
    probabilities = clf.restricted(clf.probabilities(vectors_of(vectorizer, records, args)), allowed)
    lines = []
    for r, p in zip(records, probabilities):
        order = [j for j in p.argsort()[::-1] if allowed is None or clf.labels[j] in allowed][:args.top_k]
        lines.append(json.dumps({"doc_id": r.doc_id, "label": clf.labels[order[0]], "score": round(float(p[order[0]]), 6),
                                 "top": [{"label": clf.labels[j], "score": round(float(p[j]), 6)} for j in order]},
                                ensure_ascii=False) + "\n")
    if args.output:
        write_text_atomic(Path(args.output), "".join(lines))
        print(f"wrote {len(lines)} predictions to {args.output}")
    else:
        sys.stdout.write("".join(lines))
    return 0
