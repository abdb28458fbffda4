"""Peak memory of one huge one-line document through HMDE: it must not grow with the document.

Writes a single line of N MB (real-looking sentences), encodes it with a bundled HMDE model in a
fresh process per size, and prints that process's peak RSS and the time. Document vectors are made
one group of 256 windows at a time (hmde.encoders.hierarchical._encode_streamed), so from a few MB on the
peak should grow only by the text itself and its list of sentences, not by token ids, sentence
vectors or batches. ``--one-pass`` measures the path that keeps every sentence vector (what
``return_sentences=True`` needs), side by side.

    python benchmarks/huge_document_memory.py --sizes 2,10 --one-pass

Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time

RUN = textwrap.dedent("""
    import random, resource, sys
    from hmde import HierarchicalEncoder
    size, model_name, one_pass = float(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    rng = random.Random(0)
    words = "river market council winter engine garden letter mountain station harvest".split()
    parts, n = [], 0
    while n < size * 1_000_000:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize() + ". "
        parts.append(s)
        n += len(s)
    text = "".join(parts)
    del parts
    model = HierarchicalEncoder.from_pretrained(model_name, device="cpu")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if one_pass:
        model.encode_documents([text], return_sentences=True)
    else:
        model.encode_documents([text])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RESULT {base:.0f} {peak:.0f}")
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2,10", help="document sizes in MB")
    parser.add_argument("--model", default="hmde-mini")
    parser.add_argument("--one-pass", action="store_true", help="also measure the path that keeps every sentence")
    args = parser.parse_args()
    print(f"{'MB':>4} {'path':>9} {'before encoding':>16} {'peak RSS':>9} {'added':>7} {'seconds':>8}")
    for size in [float(s) for s in args.sizes.split(",")]:
        for one_pass in ([False, True] if args.one_pass else [False]):
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", RUN, str(size), args.model, "1" if one_pass else "0"],
                                 capture_output=True, text=True, check=True).stdout
            base, peak = (float(x) for x in out.split("RESULT")[1].split())
            print(f"{size:>4g} {'one pass' if one_pass else 'streamed':>9} {base:>13.0f} MB {peak:>6.0f} MB "
                  f"{peak - base:>4.0f} MB {time.perf_counter() - start:>8.1f}")


if __name__ == "__main__":
    main()
