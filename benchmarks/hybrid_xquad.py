"""Dense, BM25 and hybrid (reciprocal rank fusion) retrieval side by side on XQuAD.

For each query-document language pair, the XQuAD articles (or paragraphs) of the
document language are indexed with ``hmde index build --bm25``; the questions of the
query language are searched three ways through ``hmde search --queries --run --qrels``:
dense (the model alone), BM25 alone (``--hybrid --hybrid-weights 0,1``) and the default
fusion (``--hybrid``). Prints MAP and MRR per pair and way.

    python benchmarks/hybrid_xquad.py --model hmde-use --pairs en-en,de-en --unit article
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
from contextlib import redirect_stdout
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="hmde-use")
    parser.add_argument("--xquad", default=str(Path(__file__).resolve().parents[2] / "shared/data/eval/xquad"))
    parser.add_argument("--pairs", default="en-en,de-en")
    parser.add_argument("--unit", choices=["article", "paragraph"], default="article")
    args = parser.parse_args()

    from hmde.cli.main import main as hmde
    from hmde.evaluation import clir

    ways = {"dense": [], "BM25": ["--hybrid", "--hybrid-fusion", "rrf", "--hybrid-weights", "0,1"], "hybrid (RRF, 1:1)": ["--hybrid", "--hybrid-fusion", "rrf"],
            "hybrid (BM25 in the query's language)": ["--hybrid"]}
    print(f"{'pair':8s} {'way':20s} {'MAP':>7s} {'MRR':>7s}")
    for pair in args.pairs.split(","):
        q_lang, d_lang = pair.split("-")
        topics, coll, qrels = clir.load_xquad(args.xquad, q_lang, d_lang, args.unit)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            docs = tmp / "docs.jsonl"
            docs.write_text("".join(json.dumps({"doc_id": i, "text": t, "lang": coll.lang}, ensure_ascii=False) + "\n"
                                    for i, t in zip(coll.doc_ids, coll.texts)), encoding="utf-8")
            queries = tmp / "q.tsv"
            queries.write_text("".join(f"{q}\t{t}\n" for q, t in zip(topics.ids, topics.texts)), encoding="utf-8")
            qrels_file = tmp / "qrels"
            qrels_file.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs_ in qrels.items() for d, r in docs_.items()))
            with redirect_stdout(io.StringIO()):
                assert hmde(["index", "build", args.model, str(docs), "-o", str(tmp / "idx"), "--bm25",
                             "--no-progress"]) == 0
            for way, flags in ways.items():
                out = io.StringIO()
                with redirect_stdout(out):
                    assert hmde(["search", str(tmp / "idx"), "--queries", str(queries), "--run", str(tmp / "run"),
                                 "--qrels", str(qrels_file), "--measures", "AP,RR", "--top-k", "100", *flags]) == 0
                line = [x for x in out.getvalue().splitlines() if "queries judged" in x][-1]
                scores = dict(zip(line.split(":")[1].split()[::2], line.split(":")[1].split()[1::2]))
                print(f"{pair:8s} {way:20s} {float(scores['AP']):7.4f} {float(scores['RR']):7.4f}")


if __name__ == "__main__":
    main()
