"""Index build/search/add through the CLI; errors for mismatched models and bad input."""

import json
import shutil

import numpy as np
import pytest

from hmde.cli.main import main
from hmde.index import DocumentIndex

DOCS = [("d1", "eng", "The volcano erupted last night. Ash covered the villages."),
        ("d2", "deu", "Die Katze saß auf der Matte. Es war ein sonniger Tag."),
        ("d3", "fra", "Le chat était assis sur le tapis."),
        ("d4", "eng", "Economic growth slowed in the third quarter.")]


def _write(path, docs):
    path.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in docs))
    return path


@pytest.fixture()
def index_dir(hmde_dir, tmp_path):
    out = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(_write(tmp_path / "d.jsonl", DOCS[:3])), "-o", str(out),
                 "--no-progress"]) == 0
    return out


def test_search_finds_the_sentence_and_shows_it(index_dir, capsys):
    capsys.readouterr()
    assert main(["search", str(index_dir), "Ash covered the villages.", "--json", "--top-k", "3"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(hits) == 3 and [h["rank"] for h in hits] == [1, 2, 3]
    d1 = next(h for h in hits if h["doc_id"] == "d1")
    # the query equals one sentence of d1: that sentence is shown, with cosine 1
    assert d1["best_sentence"] == "Ash covered the villages." and d1["sentence_score"] == pytest.approx(1.0, abs=1e-4)
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]


def test_language_filter_and_incremental_add(index_dir, hmde_dir, tmp_path, capsys):
    capsys.readouterr()
    main(["search", str(index_dir), "cat", "--lang", "fra", "--json"])
    assert [json.loads(x)["doc_id"] for x in capsys.readouterr().out.splitlines()] == ["d3"]
    assert main(["index", "build", str(hmde_dir), str(_write(tmp_path / "more.jsonl", DOCS[3:])), "-o", str(index_dir),
                 "--add", "--no-progress"]) == 0
    index = DocumentIndex.open(index_dir)
    assert index.meta.count == 4 and index.doc_ids() == ["d1", "d2", "d3", "d4"] and index.index.ntotal == 4
    assert len(index.sentence_vectors) == 2 + 2 + 1 + 1  # the sentences of d1..d4
    assert main(["index", "build", str(hmde_dir), str(tmp_path / "more.jsonl"), "-o", str(index_dir), "--add",
                 "--no-progress"]) == 2  # d4 again
    assert "already in the index" in capsys.readouterr().err
    assert main(["search", str(index_dir), "x", "--lang", "jpn"]) == 2
    assert "no documents in 'jpn'" in capsys.readouterr().err


def test_errors_missing_index_empty_query_other_model(index_dir, hf_dir, tmp_path, capsys):
    assert main(["search", str(tmp_path / "nope"), "query"]) == 2
    assert "index folder not found" in capsys.readouterr().err
    assert main(["search", str(index_dir), "  "]) == 2
    assert "the query is empty" in capsys.readouterr().err
    assert main(["search", str(index_dir), "cat", "--model", str(hf_dir)]) == 2
    assert "built with another model" in capsys.readouterr().err
    meta = json.loads((index_dir / "index.json").read_text())
    meta["dim"] = 7
    (index_dir / "index.json").write_text(json.dumps(meta))
    assert main(["search", str(index_dir), "cat"]) == 2
    err = capsys.readouterr().err
    assert "the index's files disagree" in err and "dimension 7, FAISS 64" in err


def test_hnsw_index_agrees_with_exact_on_a_small_collection(hmde_dir, tmp_path):
    src = _write(tmp_path / "d.jsonl", DOCS)
    for kind in ("flat", "hnsw"):
        assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / kind), "--type", kind,
                     "--no-progress"]) == 0
    q = np.random.default_rng(0).normal(size=(3, DocumentIndex.open(tmp_path / "flat").meta.dim)).astype(np.float32)
    exact = [[h.doc_id for h in hits] for hits in DocumentIndex.open(tmp_path / "flat").search(q, 4)]
    approx = [[h.doc_id for h in hits] for hits in DocumentIndex.open(tmp_path / "hnsw").search(q, 4)]
    assert exact == approx


def test_demo_runs_on_a_given_model(hmde_dir, capsys):
    assert main(["demo", str(hmde_dir), "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "(36 documents" in out and out.count("query: ") == 6 and out.count("  1. ") == 6


def _random_index(path, kind, n=300, dim=16, **meta):
    from hmde.index.store import IndexMeta

    vectors = np.random.default_rng(1).normal(size=(n, dim)).astype(np.float32)
    ids = [f"v{i}" for i in range(n)]
    info = IndexMeta(model="m", model_sha256=None, dim=dim, method="mean", index_type=kind, count=0, **meta)
    return DocumentIndex.write(path, info, ids, ["eng"] * n, ids, vectors, [[] for _ in ids], [], add=False), vectors


def test_ivfpq_compresses_and_nprobe_ef_search_are_checked(tmp_path):
    index, vectors = _random_index(tmp_path / "pq", "ivfpq", ivf_lists=4, pq_m=4)
    assert index.meta.count == 300 and index.index.code_size == 4  # 4 bytes per vector instead of 64
    hits = index.search(vectors[:10], top_k=3, nprobe=4)  # every list searched: only quantisation error is left
    assert [h[0].doc_id for h in hits] == [f"v{i}" for i in range(10)]
    reopened = DocumentIndex.open(tmp_path / "pq")
    assert reopened.meta.pq_m == 4
    assert [h[0].doc_id for h in reopened.search(vectors[:3], 1, nprobe=4)] == ["v0", "v1", "v2"]
    flat, _ = _random_index(tmp_path / "flat", "flat")
    with pytest.raises(Exception, match="--nprobe applies to IVF indexes"):
        flat.search(vectors[:1], nprobe=2)
    with pytest.raises(Exception, match="--ef-search applies to HNSW indexes"):
        index.search(vectors[:1], ef_search=64)
    hnsw, _ = _random_index(tmp_path / "hnsw", "hnsw")
    exact = [[h.doc_id for h in q] for q in flat.search(vectors[:5], 5)]
    assert [[h.doc_id for h in q] for q in hnsw.search(vectors[:5], 5, ef_search=300)] == exact
    with pytest.raises(Exception, match="needs at least 256 documents"):
        _random_index(tmp_path / "small", "ivfpq", n=100, ivf_lists=4, pq_m=4)
    with pytest.raises(Exception, match="--pq-m must divide the dimension 16"):
        _random_index(tmp_path / "odd", "ivfpq", ivf_lists=4, pq_m=5)


def test_each_argument_is_its_own_query(index_dir, capsys):
    """Issue 18, item 2: `hmde search IDX q1 q2` merged the two queries into one."""
    capsys.readouterr()
    q1, q2 = "Ash covered the villages.", "Le chat était assis sur le tapis."
    assert main(["search", str(index_dir), q1, q2, "--json", "--top-k", "3"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["query"] for h in hits] == [q1] * 3 + [q2] * 3 and [h["rank"] for h in hits] == [1, 2, 3] * 2
    assert {h["doc_id"]: h["best_sentence"] for h in hits[:3]}["d1"] == q1  # each query's own best sentence
    assert {h["doc_id"]: h["best_sentence"] for h in hits[3:]}["d3"] == q2


def test_a_query_file_gives_a_trec_run_and_ir_measures(index_dir, tmp_path, capsys):
    import ir_measures

    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tAsh covered the villages.\nq2\tLe chat était assis sur le tapis.\nq3\tNothing judged.\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n")
    run = tmp_path / "run.txt"
    capsys.readouterr()
    assert main(["search", str(index_dir), "--queries", str(queries), "--run", str(run), "--qrels", str(qrels),
                 "--top-k", "3", "--measures", "RR,P@1"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in run.read_text().splitlines()]
    assert all(len(r) == 6 and r[1] == "Q0" and r[5] == "hmde" for r in rows)
    by_q = {}
    for qid, _, doc, rank, score, _ in rows:
        by_q.setdefault(qid, []).append((int(rank), doc, float(score)))
    assert sorted(by_q) == ["q1", "q2", "q3"] and all([r for r, _, _ in v] == [1, 2, 3] for v in by_q.values())
    rank_in = {q: next(r for r, d, _ in by_q[q] if d == rel) for q, rel in (("q1", "d1"), ("q2", "d2"))}
    expected_rr = (1.0 / rank_in["q1"] + 1.0 / rank_in["q2"]) / 2  # by hand, from the run's own ranks
    expected_p1 = sum(r == 1 for r in rank_in.values()) / 2
    assert f"RR {expected_rr:.4f}" in out and f"P@1 {expected_p1:.4f}" in out and "2 of 3 queries judged" in out
    scored = ir_measures.calc_aggregate([ir_measures.RR], ir_measures.read_trec_qrels(str(qrels)),
                                        ir_measures.read_trec_run(str(run)))
    assert scored[ir_measures.RR] == pytest.approx(expected_rr)


def test_search_input_errors_come_before_the_model(index_dir, tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("only-an-id\n")
    assert main(["search", str(index_dir), "--queries", str(bad)]) == 2
    assert f"{bad}, line 1" in capsys.readouterr().err
    assert main(["search", str(index_dir), "q", "--queries", str(bad)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["search", str(index_dir)]) == 2
    assert "the query is empty" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_a_streamed_build_equals_the_whole_input_at_once(hmde_dir, tmp_path, monkeypatch, kind):
    """Issue 17, item 3: `index build` encodes and writes a chunk at a time; IVF trains on the first chunks."""
    import hmde.cli.encode
    import hmde.cli.index
    from hmde import HierarchicalEncoder
    from hmde.methods.vectorizer import DocumentVectorizer

    docs = [(f"d{i}", "eng", f"Sentence {i} is here. Another about {i % 3}.") for i in range(9)]
    src = _write(tmp_path / "d.jsonl", docs)
    monkeypatch.setattr(hmde.cli.encode, "STREAM_CHUNK", 2)
    extra = ["--type", "ivf", "--ivf-lists", "2"] if kind == "ivf" else []
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "idx"), "--no-progress", *extra]) == 0
    expected = DocumentVectorizer(HierarchicalEncoder.from_pretrained(hmde_dir), "hmde").encode(
        [t for _, _, t in docs], ["eng"] * len(docs), normalize_embeddings=True)
    with DocumentIndex.open(tmp_path / "idx") as index:
        assert index.doc_ids() == [d for d, _, _ in docs] and index.sentence_rows() == 2 * len(docs)
        if kind == "flat":
            np.testing.assert_allclose(index.index.reconstruct_n(0, len(docs)), expected, atol=1e-5)
        else:
            assert index.index.is_trained and index.index.ntotal == len(docs)


def test_reciprocal_rank_fusion_by_hand():
    from hmde.index.lexical import reciprocal_rank_fusion

    fused = dict(reciprocal_rank_fusion([[3, 1, 2], [2, 3]], k=60))
    assert fused[3] == pytest.approx(1 / 61 + 1 / 62) and fused[2] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 62)
    assert [r for r, _ in reciprocal_rank_fusion([[3, 1, 2], [2, 3]], k=60)] == [3, 2, 1]
    weighted = reciprocal_rank_fusion([[3, 1, 2], [2, 3]], weights=[0.0, 1.0], k=60)
    assert [r for r, _ in weighted][:2] == [2, 3]  # dense weight 0: BM25's order


def test_hybrid_search_fuses_bm25_and_dense(hmde_dir, tmp_path, capsys):
    """Issue 18, item 4 (`--hybrid-fusion rrf` since issue 95): with BM25 weight alone the word-matching document comes
    first, whatever the (untrained) dense model says; the fused scores are the RRF of the two rankings; --add keeps
    BM25."""
    src = _write(tmp_path / "d.jsonl", DOCS)
    idx = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(idx), "--bm25", "--no-progress"]) == 0
    capsys.readouterr()
    query = "volcano ash villages"
    assert main(["search", str(idx), query, "--hybrid", "--hybrid-fusion", "rrf", "--hybrid-weights", "0,1", "--json", "--top-k", "2"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["doc_id"] == "d1" and hits[0]["score"] == pytest.approx(1 / 61, abs=1e-5)
    assert main(["search", str(idx), query, "--json", "--top-k", "4", "--single-vector"]) == 0
    dense = [json.loads(line)["doc_id"] for line in capsys.readouterr().out.splitlines()]
    assert main(["search", str(idx), query, "--hybrid", "--hybrid-fusion", "rrf", "--json", "--top-k", "4"]) == 0
    fused = {h["doc_id"]: h["score"] for h in map(json.loads, capsys.readouterr().out.splitlines())}
    bm25_rank_of_d1 = 1  # d1 is the only document with these words
    assert fused["d1"] == pytest.approx(1 / (60 + dense.index("d1") + 1) + 1 / (60 + bm25_rank_of_d1), abs=1e-5)
    more = _write(tmp_path / "more.jsonl", [("d9", "eng", "Lava and ash from the volcano reached the coast.")])
    assert main(["index", "build", str(more), "-o", str(idx), "--add", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["search", str(idx), "lava coast", "--hybrid", "--hybrid-fusion", "rrf", "--hybrid-weights", "0,1", "--json",
                 "--top-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["doc_id"] == "d9"


def test_hybrid_adds_bm25_only_to_documents_in_the_querys_language(hmde_dir, tmp_path, capsys):
    """Issue 95: --hybrid keeps the dense ranking and adds 0.05 x BM25 / the best BM25 score to the documents in the
    query's own language (given here: --query-lang); a collection without one ranks exactly as without --hybrid."""
    from hmde.index.lexical_bonus import LEXICAL_WEIGHT

    mono = tmp_path / "mono"
    english = [("e1", "eng", "The volcano erupted last night. Ash covered the villages."),
               ("e2", "eng", "Economic growth slowed in the third quarter."),
               ("e3", "eng", "The football team won the championship.")]
    assert main(["index", "build", str(hmde_dir), str(_write(tmp_path / "e.jsonl", english)), "-o", str(mono),
                 "--bm25", "--no-progress"]) == 0
    capsys.readouterr()

    def scores(index, *flags):
        assert main(["search", str(index), "volcano ash villages", "--json", "--query-lang", "eng", *flags]) == 0
        return {h["doc_id"]: h["score"] for h in map(json.loads, capsys.readouterr().out.splitlines())}

    dense, hybrid = scores(mono), scores(mono, "--hybrid")
    assert hybrid["e1"] == pytest.approx(dense["e1"] + LEXICAL_WEIGHT, abs=2e-5)  # the only one with the words
    assert {k: v for k, v in hybrid.items() if k != "e1"} == pytest.approx(
        {k: v for k, v in dense.items() if k != "e1"}, abs=2e-5)
    cross = tmp_path / "cross"
    others = [("g1", "deu", "Der Vulkan ist letzte Nacht ausgebrochen. Asche bedeckte die Dörfer volcano."),
              ("g2", "fra", "La croissance économique a ralenti au troisième trimestre.")]
    assert main(["index", "build", str(hmde_dir), str(_write(tmp_path / "g.jsonl", others)), "-o", str(cross),
                 "--bm25", "--no-progress"]) == 0
    capsys.readouterr()
    assert scores(cross, "--hybrid") == scores(cross)  # "volcano" is in g1, but g1 is not English: no change


def test_hybrid_needs_a_bm25_index(index_dir, capsys):
    assert main(["search", str(index_dir), "cat", "--hybrid"]) == 2
    assert "rebuild it with `hmde index build --bm25`" in capsys.readouterr().err


def test_flags_go_anywhere_json_hits_carry_the_qid_and_qrels_retrieve_deep_enough(index_dir, tmp_path, capsys):
    """Issue 57: `hmde search IDX --json "q"` was refused ('unrecognized arguments' and the top-level usage);
    --queries --json glued the qid into `query`; --qrels scored R@100 over 10 hits unless told --top-k."""
    from hmde.cli.index import deepest_cutoff

    capsys.readouterr()
    assert main(["search", str(index_dir), "--json", "Ash covered the villages.", "--top-k", "2",
                 "Le chat était assis sur le tapis."]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(h["qid"], h["query"]) for h in hits] == [("1", "Ash covered the villages.")] * 2 + \
        [("2", "Le chat était assis sur le tapis.")] * 2
    with pytest.raises(SystemExit):
        main(["search", str(index_dir), "--json", "q", "--no-such-flag"])
    err = capsys.readouterr().err
    assert "usage: hmde search" in err and "unrecognized arguments: --no-such-flag" in err
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tAsh covered the villages.\nq2\tLe chat était assis sur le tapis.\n")
    assert main(["search", str(index_dir), "--queries", str(queries), "--json", "--top-k", "1"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(h["qid"], h["query"]) for h in hits] == [("q1", "Ash covered the villages."),
                                                      ("q2", "Le chat était assis sur le tapis.")]
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 1\n")
    assert main(["search", str(index_dir), "--queries", str(queries), "--qrels", str(qrels), "--run",
                 str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert "R@100 1.0000" in captured.out and "counts only" not in captured.err
    assert deepest_cutoff(["AP", "R@100", "nDCG@10"]) == 100 and deepest_cutoff(["R@1000"]) == 1000
    # issue 77: measures that all have cutoffs retrieve as deep as the deepest, not 100
    assert deepest_cutoff(["Success@1", "RR@10"]) == 10 and deepest_cutoff(["RR", "P@1"]) == 100


def test_a_document_lifted_by_bm25_never_passes_one_of_another_language_above_it(tmp_path):
    """Issue 95: in a collection of several languages BM25 reorders the query's language's documents between the
    others; hand-checked values on a real BM25 index."""
    from types import SimpleNamespace

    import numpy as np

    from hmde.index.lexical import build_bm25, load_bm25
    from hmde.index.lexical_bonus import CAP_GAP, LEXICAL_WEIGHT, lexical_rerank

    texts = ["The weather was fine.", "Der Vulkan brach aus.", "The volcano erupted and ash fell."]
    build_bm25(texts, tmp_path / "bm25")
    retriever = load_bm25(tmp_path / "bm25", 3)

    def store(languages):  # the calibration's languages are written as hmde.text.coverage.language_code writes them
        languages = [{"eng": "en", "deu": "de"}[x] for x in languages]
        return SimpleNamespace(meta=SimpleNamespace(live=3), require_bm25=lambda: retriever,
                               _calibration=SimpleNamespace(languages=sorted(set(languages)),
                                                            row_language=np.array([sorted(set(languages)).index(x)
                                                                                   for x in languages])))

    dense = [[(1.50, 0), (1.49, 1), (1.48, 2)]]
    mixed = lexical_rerank(store(["eng", "deu", "eng"]), dense, ["volcano ash"], ["eng"])
    assert mixed == [[(1.50, 0), (1.49, 1), (pytest.approx(1.49 - CAP_GAP), 2)]]  # below the German one
    mono = lexical_rerank(store(["eng", "eng", "eng"]), dense, ["volcano ash"], ["eng"])
    assert mono == [[(pytest.approx(1.48 + LEXICAL_WEIGHT), 2), (1.50, 0), (1.49, 1)]]  # free among its own
    assert lexical_rerank(store(["deu", "deu", "deu"]), dense, ["volcano ash"], ["eng"]) == dense  # none English
    assert lexical_rerank(store(["eng", "eng", "eng"]), dense, ["volcano ash"], [None]) == mono  # one language
    assert lexical_rerank(store(["eng", "deu", "eng"]), dense, ["volcano ash"], [None]) == dense  # not known


def test_a_flat_index_that_would_not_fit_in_memory_is_refused_before_any_embedding(hmde_dir, tmp_path, capsys,
                                                                                   monkeypatch):
    """Issue 96: a flat index holds every sentence vector in memory to search; a build that could not be searched
    is refused in one line naming the memory it needs and the flag that fits, and nothing is written."""
    from hmde import Index
    from hmde.errors import HmdeError

    docs = _write(tmp_path / "d.jsonl", [(f"d{i}", "eng", "The cat sat on the mat. " * 50) for i in range(40)])
    monkeypatch.setenv("HMDE_MEMORY_BYTES", "100000")  # a machine of 100 kB
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "idx"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    # 40 x 1,200 characters: about 400 + 40 sentences; 480 vectors of 64 float32s are 122,880 bytes, and with the
    # sentences as float16 40 x 256 + 440 x 128 = 66,560, within 90% of the machine's
    assert err == (f"hmde: error: {docs}: a flat index of 40 documents (about 440 sentence vectors) needs about "
                   "123 kB of memory to search, this machine has 100 kB: build it with --sentence-dtype float16 "
                   "(about 67 kB) or --type ivfpq (about 50 kB; --pq-m 96 bytes a vector), or on a machine with more "
                   "memory")
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "idx"), "--no-progress",
                 "--sentence-dtype", "float16"]) == 0  # what it names fits
    assert json.loads((tmp_path / "idx" / "index.json").read_text())["sentence_dtype"] == "float16"
    shutil.rmtree(tmp_path / "idx")
    monkeypatch.setenv("HMDE_MEMORY_BYTES", "50000")  # float16 would not fit either: ivfpq alone is named
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "idx"), "--no-progress"]) == 2
    assert "build it with --type ivfpq (about 50 kB" in capsys.readouterr().err
    monkeypatch.setenv("HMDE_MEMORY_BYTES", "100000")
    assert not (tmp_path / "idx").exists()
    with pytest.raises(HmdeError, match="needs about .* of memory to search"):
        Index.create(str(tmp_path / "py"), [{"doc_id": "a", "text": "The cat sat. " * 6000}], model=str(hmde_dir),
                     device="cpu")
    assert not (tmp_path / "py" / "index.json").exists()
    monkeypatch.setenv("HMDE_MEMORY_BYTES", str(10**9))
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "idx"), "--no-progress"]) == 0
