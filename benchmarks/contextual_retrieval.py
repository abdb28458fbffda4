"""Single-vector against multi-vector retrieval on the same lower encoder, side by side.

Rows: XQuAD article-level and paragraph-level CLIR (14 pairs in USE-m's languages), and
sentence-query retrieval over long documents (``hmde sentence-queries``: each sentence of
an English chapter or news document a query, the other language's documents the collection).
Columns: hmde's document vector, mean, first, seg, lawdr, plain sentence vectors scored by
their best sentence (``--multi-vector lower``), and HMDE's contextualised sentence vectors
(``--multi-vector context``), the latter also mixed with the document vector.

Every number comes from ``hmde eval clir`` (result JSONs kept in --work), so a row can be
rerun alone. Usage:

    python benchmarks/contextual_retrieval.py --data ../shared/data --model hmde-use --work runs/ctx
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

XQUAD_PAIRS = ",".join([f"{c}-en" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")]
                       + [f"en-{c}" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")])
COLUMNS = {  # name -> extra eval arguments
    "hmde-doc": [],
    "mean": ["--method", "mean"],
    "first": ["--method", "first"],
    "seg": ["--method", "seg"],
    "lawdr": ["--method", "lawdr"],
    "sentences": ["--multi-vector", "lower"],
    "contextual": ["--multi-vector", "context"],
    "contextual+doc": ["--multi-vector", "context", "--doc-weight", "0.5"],
}


def run(cmd: list[str]) -> None:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def tasks(data: Path, work: Path) -> dict[str, list[str]]:
    """Row name -> the eval clir arguments naming its data (sentence-query sets built once)."""
    out = {
        "XQuAD article": ["--xquad", str(data / "eval" / "xquad"), "--pairs", XQUAD_PAIRS, "--unit", "article"],
        "XQuAD paragraph": ["--xquad", str(data / "eval" / "xquad"), "--pairs", XQUAD_PAIRS, "--unit", "paragraph"],
    }
    for src, tgt in (("eng", "spa"), ("eng", "zho")):
        folder = work / f"sq-bible-{src}-{tgt}"
        if not (folder / "topics.tsv").exists():
            run(["hmde", "sentence-queries", str(data / "bible" / f"{src}.jsonl.gz"),
                 str(data / "bible" / f"{tgt}.jsonl.gz"), "--query-lang", src, "--doc-lang", tgt, "-o", str(folder),
                 "--max-queries", "1000"])  # as hmde recipe use evaluates hmde-use
        out[f"Bible {src}->{tgt} sentence queries"] = [
            "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
            "--documents", str(folder / "documents.jsonl"), "--query-lang", src, "--doc-lang", tgt]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the shared data folder (eval/xquad, bible/)")
    p.add_argument("--model", default="hmde-use")
    p.add_argument("--work", default="runs/contextual", help="result JSONs and sentence-query sets")
    p.add_argument("--columns", default=",".join(COLUMNS))
    p.add_argument("--rows", help="comma-separated row names (default: all)")
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = tasks(Path(args.data), work)
    wanted_rows = [r for r in rows if not args.rows or r in args.rows.split(",")]
    columns = [c for c in args.columns.split(",") if c]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for row in wanted_rows:
        for column in columns:
            out = work / f"{row.replace(' ', '_').replace('>', '')}.{column}.json"
            if not out.exists():
                run(["hmde", "eval", "clir", args.model, *rows[row], *COLUMNS[column], "--no-progress",
                     "--measures", "AP,RR", "-o", str(out)])
            averages = json.loads(out.read_text())["metrics"]["averages"]
            table.setdefault(row, {})[column] = (averages["AP"], averages["RR"])
    print(f"model {args.model}; MAP / MRR (queries through the lower encoder alone)\n")
    print("| task | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for row, values in table.items():
        best = max(v[0] for v in values.values())
        cells = [(f"**{v[0]:.3f}**" if v[0] == best else f"{v[0]:.3f}") + f" / {v[1]:.3f}"
                 for v in (values[c] for c in columns)]
        print(f"| {row} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
