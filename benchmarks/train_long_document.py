"""One joint training step on pairs of long documents: time and peak memory, crop vs all.

The paper trains on documents truncated at 32 sentences. hmde's training crops each
document to its first ``max_sentences`` (32) by default; ``--train-max-sentences 0``
feeds every sentence (windows of 32) through the lower encoder with gradients. This
script measures one optimizer step on pairs of 300-sentence documents both ways, each in
a fresh process (peak RSS is per process), alternating the two a few rounds.

    python benchmarks/train_long_document.py --model hmde-mini --sentences 300 --rounds 2

Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

STEP = textwrap.dedent("""
    import json, resource, sys, time
    import torch
    from hmde import HierarchicalEncoder
    from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig

    model_name, n_sent, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    model = HierarchicalEncoder.from_pretrained(model_name, device="cpu")
    text = lambda tag: " ".join(f"This is sentence {i} of page {tag}, about the history of a city." for i in range(n_sent))
    docs = {f"{s}{k}": (text(f"{s}{k}"), "en") for s in "ab" for k in range(2)}
    pairs = [{"doc_a": f"a{k}", "doc_b": f"b{k}", "neg_a": None, "neg_b": None} for k in range(2)]
    cfg = PretrainingConfig(batch_size=2, grad_accum=1, max_units=None if limit == "default" else int(limit),
                            bf16="off", gradient_checkpointing=True)
    trainer = HmdeTrainer(model, pairs, docs, cfg, "unused", show_progress=False)
    for d in docs:
        trainer.units(d)  # segmentation is not what is measured
    model.train()
    t0 = time.perf_counter()
    loss = trainer.train_step(pairs)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak, "units": len(trainer.units("a0"))}))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="hmde-mini")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = {"default": [], "0": []}
    for _ in range(args.rounds):
        for limit in results:  # alternating: both see the same machine load
            done = subprocess.run([sys.executable, "-c", STEP, args.model, str(args.sentences), limit],
                                  capture_output=True, text=True, check=True)
            results[limit].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for limit, runs in results.items():
        name = "crop to max_sentences (default)" if limit == "default" else "every sentence (--train-max-sentences 0)"
        best = min(r["seconds"] for r in runs)
        print(f"{name:42s} units/doc {runs[0]['units']:4d}  step {best:7.2f} s (best of {len(runs)})  "
              f"peak RSS {max(r['peak_rss_mb'] for r in runs):7.0f} MB")
    ratio = min(r["seconds"] for r in results["0"]) / min(r["seconds"] for r in results["default"])
    print(f"every sentence / crop: {ratio:.1f}x the time of one step")


if __name__ == "__main__":
    main()
