"""Encoding speed: hmde vs sentence-transformers on the same sentences, best precision against best, vs Longformer.

The lower encoder (``--lower``) is either a randomly initialised LaBSE-sized model
(``labse-shape``: BERT-base shape, 12 layers, hidden 768, built locally) or the bundled
USE-m port (``use-multilingual-v3``, real weights). The same documents are encoded by
  (a) hmde (segmentation excluded: documents given pre-split, so (a) and (b) see
      exactly the same sentences), in float32 and, with ``--bf16``, as ``--bf16`` runs (a bf16
      copy of the lower encoder's weights, upper encoder in float32, where that copy is
      faster; where hmde keeps float32, the bf16 copy is also timed, forced, to show why);
  (b) sentence-transformers' encode() on all those sentences, in float32 and, with
      ``--bf16``, with its weights cast to bf16 (``model.to(torch.bfloat16)``);
  (c) a Hugging Face Longformer of the same width on each document's concatenated
      text (up to 4,096 tokens, attention window 512; labse-shape only).
(a) and (b) run in alternating rounds (a fp32, b fp32, a bf16, b bf16, a fp32, ...), so
each round's ratio sees one machine load. Prints documents/s, tokens/s, per-round ratios at
equal precision, best precision against best precision, the cosine of bf16 document
vectors to float32, and the fraction of this machine's matmul peak (float32, and bf16 with
``--bf16``) that (a) reaches (labse-shape). Not a test: timings depend on the machine.

    python benchmarks/encode_speed.py --docs 48 --bf16 --repeat 5
    python benchmarks/encode_speed.py --lower use-multilingual-v3 --bf16 --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import statistics
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


@contextlib.contextmanager
def low_precision_policy(value: str):
    """``HMDE_LOW_PRECISION`` set to ``value`` for one timed call ("always": the bf16 copy even
    where hmde would keep float32), restored afterwards."""
    from hmde.encoders.precision import POLICY_VARIABLE

    previous = os.environ.get(POLICY_VARIABLE)
    os.environ[POLICY_VARIABLE] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[POLICY_VARIABLE]
        else:
            os.environ[POLICY_VARIABLE] = previous


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
    times, _ = timed_rounds({"a": fn_a, "b": fn_b}, repeat, device)
    return min(times["a"]), min(times["b"]), sorted(b / a for a, b in zip(times["a"], times["b"]))


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


def timed_rounds(systems: dict, repeat: int, device: str) -> tuple[dict[str, list[float]], dict]:
    """Each system's time per round, systems alternating within every round, after one warm-up
    run each; and each system's output of its last run."""
    outputs = {name: fn() for name, fn in systems.items()}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(repeat):
        for name, fn in systems.items():
            sync(device)
            t0 = time.perf_counter()
            outputs[name] = fn()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    return times, outputs


def cosines(a, b):
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def load_lower(args, sentences: list[str]):
    """(hmde model, sentence-transformers model of the same folder, forward FLOPs per token or None)."""
    from sentence_transformers import SentenceTransformer

    from hmde import HierarchicalEncoder
    from hmde.encoders.random_models import build_random_sentence_encoder

    if args.lower == "labse-shape":
        folder = build_random_sentence_encoder(Path(tempfile.mkdtemp()) / "labse", sentences * 3,
                                               hidden_size=args.hidden, num_layers=args.layers, num_heads=12,
                                               vocab_size=8000, style="labse")
        per_token = 2 * args.layers * (4 * args.hidden**2 + 2 * args.hidden * 4 * args.hidden)
        st = SentenceTransformer(str(folder), device=args.device)
    else:
        from hmde.encoders.registry import bundled_folder

        folder = bundled_folder(args.lower)
        per_token = None
        st = SentenceTransformer(str(folder), device=args.device, trust_remote_code=True)
    st.max_seq_length = 128
    return HierarchicalEncoder.from_sentence_encoder(str(folder)).to(args.device).eval(), st, per_token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lower", default="labse-shape", choices=["labse-shape", "use-multilingual-v3"])
    parser.add_argument("--docs", type=int, default=48)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--longformer-docs", type=int, default=8, help="0: skip Longformer")
    parser.add_argument("--bf16", action="store_true", help="also hmde in bf16 and sentence-transformers with bf16 weights")
    parser.add_argument("--sentence-batch-size", type=int, default=None,
                        help="hmde's token budget, in 128-token sentences (default: hmde's, 8 on CPUs, 64 on GPUs)")
    parser.add_argument("--st-batch-size", type=int, default=32, help="sentence-transformers' batch (its default: 32)")
    parser.add_argument("--repeat", type=int, default=2, help="alternating rounds; the best of each system is kept")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--data", type=Path, default=None,
                        help="Bible JSONL(.gz) with a 'verses' list per chapter (default ../shared/data/bible/eng.jsonl.gz)")
    args = parser.parse_args()

    import copy

    import numpy as np
    from transformers import LongformerConfig, LongformerModel

    docs = load_documents(args.docs, args.data)
    sentences = [s for d in docs for s in d]
    model, st, per_token = load_lower(args, sentences)
    n_tokens = sum(len(x) for x in model.lower.token_ids(sentences))

    def hmde(dtype, policy="measure"):
        def run():
            with low_precision_policy(policy):
                return model.encode_documents(docs, batch_size=len(docs), autocast_dtype=dtype,
                                              sentence_batch_size=args.sentence_batch_size)
        return run

    def sentence_transformers(encoder):
        return lambda: np.asarray(encoder.encode(sentences, batch_size=args.st_batch_size, convert_to_numpy=True),
                                  dtype=np.float32)

    systems = {"hmde fp32": hmde(None), "sentence-transformers fp32": sentence_transformers(st)}
    bf16_kept_fp32 = False
    if args.bf16:
        st_bf16 = copy.deepcopy(st).to(torch.bfloat16)
        systems |= {"hmde --bf16": hmde(torch.bfloat16), "sentence-transformers bf16 weights": sentence_transformers(st_bf16)}
        bf16_kept_fp32 = not model.lower.low_precision_pays(torch.bfloat16)
        if bf16_kept_fp32:  # --bf16 keeps float32 here; the bf16 copy is still measured, to show why
            systems["hmde bf16 copy (forced)"] = hmde(torch.bfloat16, "always")
    times, outputs = timed_rounds(systems, args.repeat, args.device)
    dps = {name: len(docs) / min(t) for name, t in times.items()}

    if args.longformer_docs and args.lower == "labse-shape":
        lf_docs = [" ".join(d) for d in docs[: args.longformer_docs]]
        tok = model.lower.tokenizer
        lf = LongformerModel(LongformerConfig(vocab_size=len(tok), hidden_size=args.hidden,
                                              num_hidden_layers=args.layers, num_attention_heads=12,
                                              intermediate_size=4 * args.hidden, attention_window=512,
                                              max_position_embeddings=4098, pad_token_id=0)).to(args.device).eval()

        def run_longformer():
            with torch.inference_mode():
                for text in lf_docs:
                    enc = tok(text, truncation=True, max_length=4096, return_tensors="pt").to(args.device)
                    mask = torch.zeros_like(enc["input_ids"])
                    mask[:, 0] = 1
                    lf(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], global_attention_mask=mask)

        dps["longformer"] = len(lf_docs) / timed(run_longformer, 1, args.device)

    print(f"{len(docs)} documents, {len(sentences)} sentences, {n_tokens} tokens; lower encoder {args.lower}"
          + (f" ({args.layers} layers x {args.hidden})" if args.lower == "labse-shape" else "")
          + f"; {args.device}, {torch.get_num_threads()} CPU threads; {args.repeat} alternating rounds")
    for name, value in dps.items():
        print(f"  {name:36s} {value:8.2f} documents/s" + (f", {value * n_tokens / len(docs):9.0f} tokens/s"
                                                          if name in times else ""))

    def compare(a: str, b: str, label: str) -> None:
        ratios = sorted(y / x for x, y in zip(times[a], times[b]))
        print(f"  {label}: {min(times[b]) / min(times[a]):.2f}x best against best; per round median "
              f"{statistics.median(ratios):.2f}x, range {ratios[0]:.2f}-{ratios[-1]:.2f}x")

    compare("hmde fp32", "sentence-transformers fp32", "hmde fp32 / sentence-transformers fp32")
    bf16_name = "hmde bf16 copy (forced)" if bf16_kept_fp32 else "hmde --bf16"
    if args.bf16:
        if bf16_kept_fp32:
            print("  --bf16 kept float32 on this machine (see the warning above)")
        compare(bf16_name, "sentence-transformers bf16 weights", f"{bf16_name} / sentence-transformers bf16 weights")
        best_hmde = min((k for k in times if k.startswith("hmde")), key=lambda k: min(times[k]))
        best_st = min(("sentence-transformers fp32", "sentence-transformers bf16 weights"), key=lambda k: min(times[k]))
        compare(best_hmde, best_st, f"best precision against best ({best_hmde} / {best_st}) [target >= 1.2x]")
        cos = cosines(outputs["hmde fp32"], outputs[bf16_name])
        print(f"  cosine of {bf16_name} document vectors to fp32: min {cos.min():.5f}, mean {cos.mean():.5f}")
    if "longformer" in dps:
        print(f"  hmde / longformer per document: {dps['hmde fp32'] / dps['longformer']:.2f}x (target >= 3x)")
    if per_token is not None:  # forward FLOPs ~ 2 * params_per_layer * tokens (+ attention, small at 128 tokens)
        for name, dtype in (("hmde fp32", torch.float32), (bf16_name, torch.bfloat16)):
            if name in times:
                peak = matmul_peak(args.device, dtype=dtype)
                achieved = per_token * n_tokens / min(times[name])
                print(f"  {name}: {achieved / 1e9:.1f} GFLOP/s, {100 * achieved / peak:.0f}% of this machine's "
                      f"{str(dtype).split('.')[-1]} matmul peak ({peak / 1e9:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
