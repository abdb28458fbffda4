"""``hmde eval {align,xsr,clir,xldc,report}``: the paper's protocols on any model and method.

Each protocol writes a result JSON (metrics plus provenance: model hash, data hashes,
seed, version) and prints a one-line summary per language or pair.
"""

from __future__ import annotations



from .arg_types import positive_float, positive_int
from .length_arguments import add_length_arguments
from .common import (
    add_device_argument,
    add_backend_argument,
    add_sentence_scoring_arguments,
    add_lawdr_fit_arguments,
    add_model_argument,
    BF16_HELP,
)
from .eval_runs import run_align, run_clir, run_pool_xsr, run_report, run_xldc, run_xsr


def _common(p, methods=True) -> None:
    add_model_argument(p)
    if methods:
        from ..encoders.config import DOCUMENT_METHODS

        p.add_argument("--method", choices=DOCUMENT_METHODS, default=None,
                       help="document vectors (default: hmde for an hmde model, mean for a sentence encoder)")
        p.add_argument("--lawdr-stats", help="saved LAWDR statistics to reuse (default: fit on the evaluated documents)")
        add_lawdr_fit_arguments(p)
    p.add_argument("--output", "-o", required=True, help="result JSON")
    add_length_arguments(p)
    add_device_argument(p)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_backend_argument(p)
    p.add_argument("--sentence-batch-size", type=int, default=None, help="default: 8 on CPUs, 64 on GPUs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sentence-cache", metavar="DIR",
                   help="keep the lower encoder's sentence vectors in DIR and reuse them in later runs on the same "
                   "weights (exact keys: token ids, weights, device, precision); off by default and for fine-tuning")
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
                   help="score each document by its sentence vectors instead of one vector (hmde.index.multivector): "
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
