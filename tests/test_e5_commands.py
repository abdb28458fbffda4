"""multilingual-e5-small is a lower encoder like any other: every command takes its name, and an
HMDE built on it keeps its prompts in its saved folder, its Router folder and its ONNX export."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.cli.main import main

DOCS = [{"doc_id": "cat", "text": "Die Katze schläft auf dem Sofa. Draußen regnet es.", "lang": "deu"},
        {"doc_id": "tax", "text": "Η κυβέρνηση μειώνει τους φόρους. Ο προϋπολογισμός παρουσιάστηκε.", "lang": "ell"},
        {"doc_id": "match", "text": "Timu ilishinda fainali. Mashabiki walisherehekea usiku kucha.", "lang": "swh"}]


@pytest.fixture()
def docs_file(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["mean", "first", "seg"])
def test_encode_by_name_and_search_in_languages_use_m_lacks(method, e5_folder, docs_file, tmp_path, capsys):
    index = tmp_path / "idx"
    assert main(["index", "build", "multilingual-e5-small", str(docs_file), "-o", str(index), "--method", method,
                 "--no-progress"]) == 0
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tthe cat is sleeping\nq2\ttax cuts in the budget\nq3\twho won the final?\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    assert main(["search", str(index), "--queries", str(queries), "--run", str(run), "--top-k", "1"]) == 0
    top = {line.split()[0]: line.split()[2] for line in run.read_text().splitlines()}
    assert top == {"q1": "cat", "q2": "tax", "q3": "match"}


def test_encode_queries_take_the_query_prompt_and_documents_the_default(e5_folder, docs_file, tmp_path):
    from hmde.encoders.sentence_encoder import SentenceEncoder

    lower = SentenceEncoder.load("multilingual-e5-small")
    out = tmp_path / "q.npy"
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tthe cat is sleeping\n", encoding="utf-8")
    assert main(["encode", "multilingual-e5-small", str(queries), "-o", str(out), "--queries", "--no-progress"]) == 0
    expected = lower.embed(["the cat is sleeping"], prompt="query: ").detach().numpy()
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
    unprefixed = lower.embed(["the cat is sleeping"], prompt="").detach().numpy()
    assert not np.allclose(np.load(out), unprefixed, atol=1e-3)


def test_an_hmde_on_e5_keeps_its_prompts_in_the_router_folder_and_the_onnx_export(e5_folder, tmp_path):
    pytest.importorskip("onnxruntime")
    from sentence_transformers import SentenceTransformer

    from hmde import HierarchicalEncoder
    from hmde.export.onnx import OnnxHierarchicalEncoder, export_onnx

    model = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small")
    model.save_pretrained(tmp_path / "hmde-e5")
    st = SentenceTransformer(str(tmp_path / "hmde-e5"), trust_remote_code=True)
    query, doc = ["the cat sleeps"], ["Die Katze schläft. Es regnet."]
    np.testing.assert_allclose(st.encode_query(query), model.encode_queries(query), atol=1e-5)
    np.testing.assert_allclose(st.encode_document(doc), model.encode_documents(doc), atol=1e-5)
    export_onnx(model, tmp_path / "onnx", int8=True)
    for int8, tolerance in ((False, 0.9999), (True, 0.98)):
        onnx = OnnxHierarchicalEncoder(tmp_path / "onnx", int8=int8)
        a = onnx.encode_queries(query, normalize_embeddings=True)
        b = model.encode_queries(query, normalize_embeddings=True)
        assert float((a * b).sum()) > tolerance
        c = onnx.encode_documents(doc, normalize_embeddings=True)
        d = model.encode_documents(doc, normalize_embeddings=True)
        assert float((c * d).sum()) > tolerance


def test_an_hmde_on_e5_embeds_document_sentences_with_the_document_prompt_in_every_path(e5_folder, tmp_path):
    """On a lower encoder whose documents take a prompt (here ``passage: ``, as hmde's e5 folder had
    until stop 36), inference, training with the units cache and training without it give the lower
    encoder the same ids: the prompt and the sentence. The segmentation's length check used to hand
    its bare-sentence ids to the lower encoder, so HMDE embedded its documents without the prompt
    that ``mean`` and the training step without a cache gave them."""
    import torch

    from hmde import HierarchicalEncoder
    from hmde.pretraining.prepared import build_units

    torch.manual_seed(0)
    model = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small").eval()
    model.lower.model.prompts = {"query": "query: ", "document": "passage: "}
    doc = "Die Katze schläft auf dem Sofa. Draußen regnet es."
    units = model.segment(doc, "deu")
    assert len(units) == 2 and model.lower.document_prompt == "passage: "
    with torch.no_grad():
        prompted = model.contextualize([model.lower.embed(units, prompt="passage: ")]).numpy()
        bare = model.contextualize([model.lower.embed(units, prompt="")]).numpy()
    got = model.encode_documents([doc], langs=["deu"])
    np.testing.assert_allclose(got, prompted, atol=1e-5)
    assert not np.allclose(got, bare, atol=1e-3)
    prepared = build_units({"d": (doc, "deu")}, model, limit=32, show_progress=False)
    assert prepared.ids["d"] == model.lower.token_ids(units)
    assert model.lower.tokenizer.convert_ids_to_tokens(prepared.ids["d"][0])[1:4] == ["▁passage", ":", "▁Die"]


def test_encode_by_name_without_a_method_gives_mean_vectors(e5_folder, docs_file, tmp_path, capsys):
    """Issue 26, done when: `hmde encode multilingual-e5-small docs.jsonl` works offline."""
    from hmde.methods.vectorizer import DocumentVectorizer
    from hmde.encoders.sentence_encoder import SentenceEncoder

    out = tmp_path / "v.npy"
    assert main(["encode", "multilingual-e5-small", str(docs_file), "-o", str(out), "--no-progress"]) == 0
    assert "--method mean" in capsys.readouterr().err
    expected = DocumentVectorizer(SentenceEncoder.load("multilingual-e5-small"), "mean").encode(
        [d["text"] for d in DOCS], [d["lang"] for d in DOCS])
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)


PAGES = [  # two languages e5 knows and USE-m does not (Greek, Swahili), plus English
    {"concept": "Q1", "lang": "eng", "text": "The cat sleeps on the sofa. It is raining outside.", "categories": ["a"]},
    {"concept": "Q1", "lang": "ell", "text": "Η γάτα κοιμάται στον καναπέ. Έξω βρέχει.", "categories": ["a"]},
    {"concept": "Q1", "lang": "swh", "text": "Paka amelala kwenye kochi. Nje kunanyesha.", "categories": ["a"]},
    {"concept": "Q2", "lang": "eng", "text": "The government cuts taxes. The budget was presented.", "categories": ["a"]},
    {"concept": "Q2", "lang": "ell", "text": "Η κυβέρνηση μειώνει τους φόρους. Ο προϋπολογισμός παρουσιάστηκε.",
     "categories": ["a"]},
    {"concept": "Q2", "lang": "swh", "text": "Serikali inapunguza kodi. Bajeti iliwasilishwa.", "categories": ["a"]},
    {"concept": "Q3", "lang": "eng", "text": "The team won the final. Fans celebrated all night.", "categories": ["b"]},
    {"concept": "Q3", "lang": "ell", "text": "Η ομάδα κέρδισε τον τελικό. Οι οπαδοί γιόρτασαν όλη νύχτα.",
     "categories": ["b"]},
    {"concept": "Q3", "lang": "swh", "text": "Timu ilishinda fainali. Mashabiki walisherehekea usiku kucha.",
     "categories": ["b"]},
]


@pytest.fixture()
def concept_folder(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    for lang in ("eng", "ell", "swh"):
        rows = [dict(p, doc_id=f"{lang}/{p['concept']}") for p in PAGES if p["lang"] == lang]
        (folder / f"{lang}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                              encoding="utf-8")
    return folder


@pytest.mark.parametrize("method", ["mean", "lawdr"])
def test_align_and_eval_align_on_e5(method, e5_folder, concept_folder, tmp_path):
    out = tmp_path / "pairs.tsv"
    assert main(["align", "multilingual-e5-small", str(concept_folder / "ell.jsonl"), str(concept_folder / "eng.jsonl"),
                 "-o", str(out), "--method", method, "--no-progress", *(["--lawdr-m", "1"] if method == "lawdr" else [])]) == 0
    pairs = sorted(line.split("\t")[:2] for line in out.read_text().splitlines()[1:])
    result = tmp_path / "r.json"
    assert main(["eval", "align", "multilingual-e5-small", "--data", str(concept_folder), "--pairs", "swh-eng,ell-swh",
                 "--method", method, "-o", str(result), "--no-progress",
                 *(["--lawdr-m", "1"] if method == "lawdr" else [])]) == 0
    record = json.loads(result.read_text())
    if method == "mean":  # three documents a language: e5's sentence vectors align every one
        assert pairs == [["ell/Q1", "eng/Q1"], ["ell/Q2", "eng/Q2"], ["ell/Q3", "eng/Q3"]]
        assert record["metrics"]["average"] == 1.0
    else:  # LAWDR's statistics need more than three documents a language to help: it runs, fitted, one to one
        assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs}) >= 1
        assert record["settings"]["lawdr_m"] == 1 and 0.0 <= record["metrics"]["average"] <= 1.0


@pytest.mark.parametrize("stage", ["frozen", "joint"])
def test_train_an_hmde_on_e5_frozen_and_joint_then_encode_with_it(stage, e5_folder, concept_folder, tmp_path):
    from hmde import HierarchicalEncoder
    from hmde.pretraining.pairs import PairOptions, build_pairs

    pairs = tmp_path / "p.parquet"
    build_pairs([concept_folder / f"{lang}.jsonl" for lang in ("eng", "ell", "swh")], pairs,
                PairOptions(no_negative="keep"), show_progress=False)
    run = tmp_path / "run"
    flags = ["--freeze-lower"] if stage == "frozen" else ["--lower-trainable", "top-1"]
    assert main(["train", "multilingual-e5-small", str(pairs), "-o", str(run), "--batch-size", "2", "--grad-accum", "1",
                 "--max-steps", "1", "--warmup", "0", "--lr", "1e-4", "--no-progress", "--device", "cpu", *flags]) == 0
    trained = HierarchicalEncoder.from_pretrained(run, device="cpu")
    assert trained.lower.prompts == {"query": "query: ", "document": ""}
    start = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small", device="cpu")
    changed = [name for (name, a), (_, b) in zip(start.lower.model.state_dict().items(),
                                                 trained.lower.model.state_dict().items()) if not np.array_equal(a, b)]
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1] and log[-1]["lr"] == 0.0  # one step at lr 1e-4, then 0
    if stage == "frozen":
        assert changed == []
    else:  # the top layer only: --lower-trainable top-1
        assert changed and all(".layer.11." in name for name in changed)
    out = tmp_path / "v.npy"
    assert main(["encode", str(run), str(concept_folder / "swh.jsonl"), "-o", str(out), "--no-progress"]) == 0
    assert np.load(out).shape == (3, 384)


@pytest.mark.parametrize("covered_only", [False, True])
def test_train_says_how_many_pages_are_in_languages_the_lower_encoder_lacks(covered_only, e5_folder, concept_folder,
                                                                             tmp_path, capsys):
    """K'iche' (quc) is not among e5's languages: its sentence vectors are close to random, and a pair with
    such a page can be matched only by what survives in them; hmde train says so before it trains, and
    --covered-pairs-only trains on the other pairs alone."""
    from hmde.pretraining.pairs import PairOptions, build_pairs

    quc = tmp_path / "quc.jsonl"
    rows = [json.loads(line) for line in (concept_folder / "swh.jsonl").read_text(encoding="utf-8").splitlines()]
    quc.write_text("".join(json.dumps(dict(r, lang="quc", doc_id="quc/" + r["concept"])) + "\n" for r in rows),
                   encoding="utf-8")
    pairs = tmp_path / "p.parquet"
    build_pairs([concept_folder / "eng.jsonl", concept_folder / "ell.jsonl", quc], pairs,
                PairOptions(no_negative="keep"), show_progress=False)
    assert main(["train", "multilingual-e5-small", str(pairs), "-o", str(tmp_path / "run"), "--batch-size", "2",
                 "--grad-accum", "1", "--max-steps", "1", "--warmup", "0", "--no-progress", "--device", "cpu",
                 "--freeze-lower", *(["--covered-pairs-only"] if covered_only else [])]) == 0
    err = capsys.readouterr().err
    start = json.loads((tmp_path / "run" / "train_log.jsonl").read_text().splitlines()[0])
    if covered_only:  # eng-ell pairs only: one a concept
        assert "not trained on" not in err and start["pairs"] == 3
        assert ("hmde: --covered-pairs-only: training on the 3 of 9 pairs whose two pages are in languages "
                "multilingual-e5-small was trained on") in err
        # a saved HMDE on e5 (hmde recipe e5's stage 2 starts from stage 1's folder) is still known to be e5
        assert main(["train", str(tmp_path / "run"), str(pairs), "-o", str(tmp_path / "run2"), "--batch-size", "2",
                     "--grad-accum", "1", "--max-steps", "1", "--warmup", "0", "--no-progress", "--device", "cpu",
                     "--freeze-lower", "--covered-pairs-only"]) == 0
        assert "training on the 3 of 9 pairs" in capsys.readouterr().err
        return
    assert start["pairs"] == 9
    warnings = [line for line in err.splitlines() if "not trained on" in line]
    assert warnings == [("hmde: warning: 3 training pages are in languages multilingual-e5-small's lower encoder "
                         "(multilingual-e5-small) was not trained on: quc (3); its vectors there are close to random")]


def test_covered_pairs_only_refuses_a_lower_encoder_whose_languages_are_unknown(concept_folder, tmp_path, capsys):
    from hmde.pretraining.pairs import PairOptions, build_pairs

    pairs = tmp_path / "p.parquet"
    build_pairs([concept_folder / "eng.jsonl", concept_folder / "ell.jsonl"], pairs, PairOptions(no_negative="keep"),
                show_progress=False)
    assert main(["train", "hmde-mini", str(pairs), "-o", str(tmp_path / "run"), "--covered-pairs-only",
                 "--max-steps", "1", "--no-progress", "--device", "cpu"]) == 2
    assert ("--covered-pairs-only: hmde cannot tell which languages hmde-mini's lower encoder was trained on"
            in capsys.readouterr().err)
    assert not (tmp_path / "run" / "checkpoint").exists()
