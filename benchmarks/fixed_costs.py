"""Fixed costs of a cold process (issue 96, item 6): a one-shot `hmde search`, and `hmde mine` on a few pairs,
each in a fresh process with the ONNX graphs and the bf16 record already made (first use is docs/speed.md's
"made once"), for each CPU path `auto` can take here: PyTorch with the bf16 copy (CPUs with AMX) and the ONNX
graphs (`HMDE_CPU_BF16=off`, every other CPU). Not a test: run

    python benchmarks/fixed_costs.py --data ../shared/data [--index DIR] [--rounds 3]

It builds an index of XQuAD's 240 English, German and Spanish paragraphs (720 documents) unless `--index` names one,
then reports per path the best of `--rounds` wall times of `hmde search INDEX QUERY`, of `hmde mine` on 20 and on
200 Tatoeba German-English pairs (the difference is the per-sentence work; the rest is fixed), and where a cold
search's time goes (a child process timing each phase: `import torch`, `hmde.Index.open` (the model's load), the first and a second search). docs/speed.md,
"Fixed costs", holds the measured rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATHS = {"bf16 (AMX)": {}, "onnx graphs": {"HMDE_CPU_BF16": "off"}}
QUERY = "Wer hat den Super Bowl 50 gewonnen?"
PHASES = r"""
import json, sys, time
t = [time.perf_counter()]
import torch; t.append(time.perf_counter())
import hmde; t.append(time.perf_counter())
index = hmde.Index.open(sys.argv[1]); t.append(time.perf_counter())
index.search(sys.argv[2], top_k=3); t.append(time.perf_counter())
index.search("Who won the game in 2016?", top_k=3); t.append(time.perf_counter())
print(json.dumps({"import torch": t[1] - t[0], "import hmde": t[2] - t[1], "Index.open (model load)": t[3] - t[2],
                  "first search": t[4] - t[3], "second search": t[5] - t[4],
                  "sentence_transformers loaded": "sentence_transformers" in sys.modules}))
"""


def wall(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def build_index(data: Path, out: Path) -> Path:
    docs = out / "xquad.jsonl"
    with docs.open("w", encoding="utf-8") as handle:
        for lang in ("en", "de", "es"):
            articles = json.loads((data / "eval" / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
            for a, article in enumerate(articles["data"]):
                for p, paragraph in enumerate(article["paragraphs"]):
                    handle.write(json.dumps({"doc_id": f"{lang}-{a}-{p}", "text": paragraph["context"],
                                             "lang": lang}, ensure_ascii=False) + "\n")
    index = out / "index"
    subprocess.run(["hmde", "index", "build", str(docs), "-o", str(index), "--no-progress"], check=True)
    return index


def pairs(data: Path, out: Path, n: int) -> tuple[Path, Path]:
    sides = []
    for lang in ("deu", "eng"):
        lines = (data / "eval" / "tatoeba" / f"tatoeba.deu-eng.{lang}").read_text(encoding="utf-8").splitlines()[:n]
        path = out / f"{lang}-{n}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        sides.append(path)
    return sides[0], sides[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        index = args.index or build_index(args.data, out)
        small, large = pairs(args.data, out, 20), pairs(args.data, out, 200)
        print(f"{os.cpu_count()} cores; index {index}; best of {args.rounds} rounds")
        for name, extra in PATHS.items():
            env = {**os.environ, **extra}
            subprocess.run(["hmde", "search", str(index), QUERY, "--top-k", "1"], env=env, check=True,
                           stdout=subprocess.DEVNULL)  # first use made here, not measured
            rows = {"hmde search (one query)": [], "hmde mine, 20 pairs": [], "hmde mine, 200 pairs": []}
            phases = []
            for _ in range(args.rounds):
                rows["hmde search (one query)"].append(wall(["hmde", "search", str(index), QUERY, "--top-k", "3"],
                                                            env))
                for label, (src, tgt) in (("hmde mine, 20 pairs", small), ("hmde mine, 200 pairs", large)):
                    rows[label].append(wall(["hmde", "mine", str(src), str(tgt), "-o", str(out / "mined.jsonl"),
                                             "--no-progress"], env))
                done = subprocess.run([sys.executable, "-c", PHASES, str(index), QUERY], env=env, check=True,
                                      capture_output=True, text=True)
                phases.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"\n{name}")
            for label, times in rows.items():
                print(f"  {label:<28} {min(times):6.2f} s")
            best = min(phases, key=lambda p: sum(v for v in p.values() if isinstance(v, float)))
            for label, value in best.items():
                print(f"    {label:<30} {value:.2f} s" if isinstance(value, float) else f"    {label:<30} {value}")


if __name__ == "__main__":
    main()
