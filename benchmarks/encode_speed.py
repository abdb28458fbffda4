"""Encoding speed: hmde vs sentence-transformers on the same sentences vs Longformer.

A randomly initialised LaBSE-sized model (BERT-base shape: 12 layers, hidden 768) is
built locally; the same documents are encoded by
  (a) hmde (segmentation excluded: documents given pre-split, so (a) and (b) see
      exactly the same sentences),
  (b) sentence-transformers' encode() on all those sentences,
  (c) a Hugging Face Longformer of the same width on each document's concatenated
      text (up to 4,096 tokens, attention window 512).
Prints documents/s, tokens/s, the ratios, and the fraction of this machine's measured
float32 matrix-multiply peak reached by (a). Not a test: timings depend on the machine.

    python benchmarks/encode_speed.py --docs 64 --layers 12
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

import torch


def load_documents(n: int, path: Path | None = None) -> list[list[str]]:
    shared = path or Path(__file__).resolve().parents[2] / "shared" / "data" / "bible" / "eng.jsonl.gz"
    if shared.exists():
        docs = []
        with gzip.open(shared, "rt", encoding="utf-8") as f:
            for line in f:
                docs.append(json.loads(line)["verses"][:32])
                if len(docs) == n:
                    break
        return docs
    words = "the cat sat on a mat while economic growth slowed and the team won".split()
    return [[" ".join(words[(i + j) % len(words):] + words[:(i * j) % 9]) for j in range(24)] for i in range(n)]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(device: str, seconds: float = 2.0, dtype: torch.dtype = torch.float32) -> float:
    n = 4096 if device.startswith("cuda") else 2048
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    sync(device)
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        count += 1
        if count % 16 == 0:
            sync(device)
    sync(device)
    return 2 * n**3 * count / (time.perf_counter() - t0)


def timed_pair(fn_a, fn_b, repeat: int, device: str) -> tuple[float, float, list[float]]:
    """Best times of two systems measured alternately (a, b, a, b, ...), and the per-round ratios b/a.

    Alternating rounds see the same machine load, so their ratios are steadier on a shared
    machine than two best-of runs taken one after the other.
    """
    fn_a(), fn_b()  # warm-up
    times_a, times_b = [], []
    for _ in range(repeat):
        for fn, out in ((fn_a, times_a), (fn_b, times_b)):
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            out.append(time.perf_counter() - t0)
    return min(times_a), min(times_b), sorted(b / a for a, b in zip(times_a, times_b))


def timed(fn, repeat: int, device: str) -> float:
    """Best of ``repeat`` timed runs after one warm-up: the least disturbed measurement."""
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=48)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--longformer-docs", type=int, default=8)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--sentence-batch-size", type=int, default=None,
                        help="hmde's token budget, in 128-token sentences (default: hmde's, 8 on CPUs, 64 on GPUs)")
    parser.add_argument("--st-batch-size", type=int, default=32, help="sentence-transformers' batch (its default: 32)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per system; the best is kept")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--data", type=Path, default=None,
                        help="Bible JSONL(.gz) with a 'verses' list per chapter (default ../shared/data/bible/eng.jsonl.gz)")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer
    from transformers import LongformerConfig, LongformerModel

    from hmde import HierarchicalEncoder
    from hmde.random_models import build_random_sentence_encoder

    docs = load_documents(args.docs, args.data)
    sentences = [s for d in docs for s in d]
    tmp = Path(tempfile.mkdtemp())
    folder = build_random_sentence_encoder(tmp / "labse", sentences * 3, hidden_size=args.hidden,
                                           num_layers=args.layers, num_heads=12, vocab_size=8000, style="labse")
    model = HierarchicalEncoder.from_sentence_encoder(str(folder)).to(args.device).eval()
    st = SentenceTransformer(str(folder), device=args.device)
    st.max_seq_length = 128
    n_tokens = sum(len(x) for x in model.lower.token_ids(sentences))
    amp = torch.bfloat16 if args.bf16 else None

    t_hmde, t_st, ratios = timed_pair(
        lambda: model.encode_documents(docs, batch_size=len(docs), autocast_dtype=amp,
                                       sentence_batch_size=args.sentence_batch_size),
        lambda: st.encode(sentences, batch_size=args.st_batch_size), args.repeat, args.device)

    lf_docs = [" ".join(d) for d in docs[: args.longformer_docs]]
    tok = model.lower.tokenizer
    lf = LongformerModel(LongformerConfig(vocab_size=len(tok), hidden_size=args.hidden, num_hidden_layers=args.layers,
                                          num_attention_heads=12, intermediate_size=4 * args.hidden,
                                          attention_window=512, max_position_embeddings=4098, pad_token_id=0))
    lf = lf.to(args.device).eval()

    def run_longformer():
        with torch.inference_mode():
            for text in lf_docs:
                enc = tok(text, truncation=True, max_length=4096, return_tensors="pt").to(args.device)
                mask = torch.zeros_like(enc["input_ids"])
                mask[:, 0] = 1
                lf(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], global_attention_mask=mask)

    t_lf = timed(run_longformer, 1, args.device)
    peak = matmul_peak(args.device)
    # forward FLOPs of the lower encoder ~ 2 * params_per_layer * tokens (+ attention, small at 128 tokens)
    per_token = 2 * args.layers * (4 * args.hidden**2 + 2 * args.hidden * 4 * args.hidden)
    achieved = per_token * n_tokens / t_hmde
    dps = {"hmde": len(docs) / t_hmde, "sentence-transformers": len(docs) / t_st, "longformer": len(lf_docs) / t_lf}
    print(f"{len(docs)} documents, {len(sentences)} sentences, {n_tokens} tokens; "
          f"model {args.layers} layers x {args.hidden}; {args.device}, {torch.get_num_threads()} CPU threads")
    for name, value in dps.items():
        print(f"  {name:22s} {value:8.2f} documents/s")
    print(f"  hmde tokens/s {n_tokens / t_hmde:.0f}; sentence-transformers tokens/s {n_tokens / t_st:.0f}")
    print(f"  hmde / sentence-transformers: {dps['hmde'] / dps['sentence-transformers']:.2f}x best against best "
          f"(target >= 1.2x); per alternating round: median {ratios[len(ratios) // 2]:.2f}x, "
          f"range {ratios[0]:.2f}-{ratios[-1]:.2f}x")
    print(f"  hmde / longformer per document: {dps['hmde'] / dps['longformer']:.2f}x (target >= 3x)")
    print(f"  float32 matmul peak {peak / 1e9:.1f} GFLOP/s; hmde reached {achieved / 1e9:.1f} GFLOP/s "
          f"({100 * achieved / peak:.0f}% of peak)")


if __name__ == "__main__":
    main()
