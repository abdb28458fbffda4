"""Peak memory of `hmde encode` as the collection grows: it must stay flat.

Generates N short documents (JSONL), encodes them with a small random LaBSE-shaped model
(the model is not what is measured) in a fresh process per size, and prints that
process's peak RSS next to the size of the vectors written. Streaming reads, encodes and
writes 2,048 documents at a time into a memory-mapped .npy, so the peak should not grow
with N beyond the list of ids kept for the duplicate check.

    python benchmarks/streaming_memory.py --sizes 10000,100000,1000000
    python benchmarks/streaming_memory.py --sizes 20000,200000 --format parquet

Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

RUN = textwrap.dedent("""
    import resource, sys
    from hmde.cli.main import main
    code = main(sys.argv[1:])
    print("PEAK_MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    sys.exit(code)
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--method", default="mean")
    parser.add_argument("--format", choices=["npy", "parquet"], default="npy",
                        help="parquet: the whole representation (sentences, spans, their vectors; a row group a batch)")
    args = parser.parse_args()

    from hmde.encoders.random_models import build_random_sentence_encoder

    words = "the cat sat on a mat while economic growth slowed and the team won the final match".split()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = build_random_sentence_encoder(tmp / "model", [" ".join(words)] * 20, vocab_size=200, style="labse")
        for n in [int(x) for x in args.sizes.split(",")]:
            src = tmp / f"docs{n}.jsonl"
            with open(src, "w", encoding="utf-8") as f:
                for i in range(n):
                    text = " ".join(words[(i + j) % len(words)] for j in range(8)) + f" {i}."
                    f.write(json.dumps({"doc_id": f"d{i}", "text": text, "lang": "eng"}) + "\n")
            out = tmp / f"v{n}.{args.format}"
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RUN, "encode", str(model), str(src), "-o", str(out),
                                   "--method", args.method, "--no-progress"], capture_output=True, text=True,
                                  check=True)
            seconds = time.perf_counter() - t0
            peak = float(done.stdout.split("PEAK_MB")[-1])
            print(f"{n:>9,d} documents: peak RSS {peak:7.0f} MB, vectors {out.stat().st_size / 2**20:7.1f} MB, "
                  f"input {src.stat().st_size / 2**20:7.1f} MB, {seconds:6.1f} s")
            out.unlink()
            src.unlink()


if __name__ == "__main__":
    main()
