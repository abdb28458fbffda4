"""Evaluation protocols: hand-computed metrics, loaders on files the tests write, errors."""

import gzip
import json

import numpy as np
import pytest

from hmde.errors import InputError
from hmde.evaluation import clir
from hmde.evaluation.alignment import alignment_metrics
from hmde.evaluation.classification import align_labels, frozen_protocol, read_masakhanews_split, LabelledDocuments


def test_map_on_a_three_query_toy_run_is_hand_computed(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 d1 1\nq2 0 d2 1\nq2 0 d3 1\nq3 0 d3 1\n")
    run = {"q1": {"d2": 0.9, "d1": 0.8, "d3": 0.1}, "q2": {"d2": 0.9, "d1": 0.5, "d3": 0.4}, "q3": {"d1": 0.9, "d2": 0.8}}
    clir.write_run(tmp_path / "run", run)
    scores = clir.score_run(clir.read_qrels(tmp_path / "qrels"), clir.read_run(tmp_path / "run"), ["AP", "RR"])
    # AP: q1 = 1/2, q2 = (1/1 + 2/3) / 2, q3 = 0 (never retrieved)
    assert scores["AP"] == pytest.approx((0.5 + (1 + 2 / 3) / 2 + 0) / 3)
    assert scores["RR"] == pytest.approx((0.5 + 1 + 0) / 3)


def test_ranking_over_the_whole_collection_and_reranking():
    docs = np.eye(4, dtype=np.float32)
    queries = np.array([[0.1, 0.9, 0, 0], [0, 0, 0.2, 1.0]], dtype=np.float32)
    run = clir.rank(queries, docs, ["a", "b"], ["d0", "d1", "d2", "d3"], depth=2)
    assert list(run["a"]) == ["d1", "d0"] and list(run["b"]) == ["d3", "d2"]
    rer = clir.rerank(queries, docs, ["a"], ["d0", "d1", "d2", "d3"], {"a": {"d0": 5.0, "d2": 1.0}})
    assert rer["a"]["d0"] > rer["a"]["d2"] == 0.0
    with pytest.raises(InputError, match="not in the collection, e.g. 'dX'"):
        clir.rerank(queries, docs, ["a"], ["d0", "d1", "d2", "d3"], {"a": {"dX": 1.0}})


def test_qrels_errors_and_warnings(tmp_path):
    (tmp_path / "bad").write_text("q1 0 d1 1\nq1 0 d2\n")
    with pytest.raises(InputError, match=r"bad, line 2"):
        clir.read_qrels(tmp_path / "bad")
    warnings = clir.check_qrels({"q1": {"d1": 1, "ghost": 1}}, ["q1"], ["d1"])
    assert "1 document(s) not in the collection, e.g. 'ghost'" in warnings[0]
    with pytest.raises(InputError, match="no query of the topics has relevance"):
        clir.check_qrels({"zz": {"d1": 1}}, ["q1"], ["d1"])


def test_clef_sgml_loaders(tmp_path):
    (tmp_path / "docs.sgml").write_text(
        "<DOC>\n<DOCNO> GH950102-000001 </DOCNO>\n<HEADLINE>Flood</HEADLINE>\n<TEXT>Rivers rose.\nTowns  left.</TEXT>\n</DOC>\n"
        "<DOC><DOCNO>GH950102-000002</DOCNO><TEXT>Other news.</TEXT></DOC>\n")
    (tmp_path / "topics.sgml").write_text(
        "<top>\n<num> C141 </num>\n<EN-title> Floods </EN-title>\n<EN-desc> Find floods. </EN-desc>\n</top>\n")
    coll = clir.read_clef_documents([tmp_path / "docs.sgml"], "eng")
    assert coll.doc_ids == ["GH950102-000001", "GH950102-000002"]
    assert coll.texts[0] == "Flood Rivers rose. Towns left."
    topics = clir.read_clef_topics(tmp_path / "topics.sgml")
    assert topics.ids == ["C141"] and topics.texts == ["Floods Find floods."]
    (tmp_path / "broken.sgml").write_text("\n\n<DOC><TEXT>x</TEXT></DOC>")
    with pytest.raises(InputError, match="line 3.*DOCNO"):
        clir.read_clef_documents([tmp_path / "broken.sgml"])


def test_alignment_p_at_1_on_a_toy_alignment():
    src = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=np.float32)
    tgt = np.array([[0.9, 0.1, 0], [0, 0, 1], [0.1, 1, 0]], dtype=np.float32)
    m = alignment_metrics(src, tgt, ["a", "b", "c", "d"], ["a", "c", "b"])
    # src a->a, b->b, c->c right (3/3 with a gold pair); tgt a->a, c->c, b->b right; d has no translation
    assert m["p@1_src->tgt"] == 1.0 and m["p@1_tgt->src"] == 1.0 and m["unmatched_src"] == 1
    tgt_swapped = tgt[[0, 2, 1]]  # now tgt ids say a, c, b but vectors are a, b, c
    m2 = alignment_metrics(src, tgt_swapped, ["a", "b", "c", "d"], ["a", "c", "b"])
    assert m2["p@1_src->tgt"] == pytest.approx(1 / 3)


def test_masakhanews_reader_handles_quoted_newlines_and_labels(tmp_path):
    folder = tmp_path / "fra"
    folder.mkdir()
    with gzip.open(folder / "test.tsv.gz", "wt", encoding="utf-8") as f:
        f.write('category\theadline\ttext\turl\nsports\tMatch\t"Line one\nline two"\tu1\nreligion\tX\tY\tu2\n')
    docs = read_masakhanews_split(tmp_path, "fra", "test")
    assert docs.labels == ["sports", "religion"] and docs.texts[0] == "Match Line one\nline two"
    kept, warnings = align_labels(["sports", "business"], docs)
    assert kept.labels == ["sports"] and "religion" in warnings[0]
    with pytest.raises(InputError, match="no train split"):
        read_masakhanews_split(tmp_path, "fra", "train")


def test_frozen_protocol_separable_toy():
    train = LabelledDocuments(["a1", "a2", "b1", "b2"] * 5, ["A", "A", "B", "B"] * 5, "eng")
    test = LabelledDocuments(["a9", "b9"], ["A", "B"], "fra")
    encode = lambda texts, lang: np.array([[1.0, 0.1] if t.startswith("a") else [0.1, 1.0] for t in texts])  # noqa: E731
    assert frozen_protocol(encode, train, [test])["fra"]["accuracy"] == 1.0


def test_xquad_loader_on_shared_data(shared_data):
    topics, coll, qrels = clir.load_xquad(shared_data / "eval" / "xquad", "de", "en", "article")
    assert len(coll.doc_ids) == 48 and len(topics.ids) == 1190
    assert set(qrels[topics.ids[0]]) <= set(coll.doc_ids)
    _, paras, _ = clir.load_xquad(shared_data / "eval" / "xquad", "deu", "eng", "paragraph")
    assert len(paras.doc_ids) == 240
    with pytest.raises(InputError, match="missing from XQuAD"):
        clir.load_xquad(shared_data / "eval" / "xquad", "xx", "en")


def test_wmt16_lett_loader(tmp_path):
    import base64

    from hmde.evaluation.alignment import load_lett

    def row(lang, url, text):
        b64 = base64.b64encode(text.encode()).decode()
        return f"{lang}\ttext/html\tutf-8\t{url}\t{b64}\t{b64}\n"

    (tmp_path / "d.lett").write_text(row("en", "http://a/en1", "Hello world.") + row("fr", "http://a/fr1", "Bonjour.")
                                     + row("en", "http://a/en2", "Other page."))
    (tmp_path / "gold").write_text("http://a/en1\thttp://a/fr1\n")
    src, tgt = load_lett(tmp_path / "d.lett", tmp_path / "gold")
    assert src.ids == ["http://a/en1", "http://a/en2"] and src.texts[0] == "Hello world."
    assert src.concepts[0] == tgt.concepts[0] and src.concepts[1].startswith("none:")
    (tmp_path / "bad.lett").write_text("en\tonly\n")
    with pytest.raises(InputError, match="bad.lett, line 1"):
        load_lett(tmp_path / "bad.lett", tmp_path / "gold")


def test_full_greedy_top1_and_hungarian_differ_on_a_hand_checked_case():
    """Issue 16, item 7. Scores (gold: 0-0, 1-1):      t0    t1
                                                s0   0.90  0.80
                                                s1   0.85  0.50
    top-1 (LASER max): candidates s0->t0 .90, s1->t0 .85, t0->s0 .90, t1->s0 .80; after s0-t0
    every other candidate is blocked: s1, t1 stay unmatched, recall 1/2.
    full greedy: s0-t0 .90, then s1-t1 .50: recall 2/2. Hungarian: s0-t1 + s1-t0 = 1.65 > 1.40: 0/2."""
    from hmde.align.similarity import align, match_one_to_one

    scores = np.array([[0.90, 0.80], [0.85, 0.50]])
    assert match_one_to_one(scores, "greedy") == [(0, 0, 0.90), (1, 1, 0.50)]
    assert sorted(match_one_to_one(scores, "hungarian")) == [(0, 1, 0.80), (1, 0, 0.85)]
    # the same cosines from vectors: unit vectors whose dot products are the table above
    s1 = np.sqrt(1 - 0.85 ** 2)
    src = np.array([[1.0, 0.0, 0.0], [0.85, s1, 0.0]])
    tgt = np.array([[c0, (c1 - 0.85 * c0) / s1, 0.0] for c0, c1 in scores.T])  # column j: cosines to s0 and s1
    tgt[:, 2] = np.sqrt(1 - (tgt ** 2).sum(1))  # unit length
    np.testing.assert_allclose(src @ tgt.T, scores, atol=1e-6)
    assert {(i, j) for i, j, _ in align(src, tgt, "cosine", direction="max")} == {(0, 0)}
    got = {m: alignment_metrics(src, tgt, ["a", "b"], ["a", "b"], matching=m)["recall"]
           for m in ("top1", "greedy", "hungarian")}
    assert got == {"top1": 0.5, "greedy": 1.0, "hungarian": 0.0}


def test_wmt16_recall_is_summed_over_domains(tmp_path, hmde_dir, capsys):
    import base64

    from hmde.cli.main import main
    from hmde.evaluation.alignment import combine_domains

    assert combine_domains({"a": {"gold_pairs": 3, "found_pairs": 3, "p@1": 1.0},
                            "b": {"gold_pairs": 1, "found_pairs": 0, "p@1": 0.0}})["recall"] == 0.75  # not (1+0)/2

    def row(lang, url, text):
        b64 = base64.b64encode(text.encode()).decode()
        return f"{lang}\ttext/html\tutf-8\t{url}\t{b64}\t{b64}\n"

    gold = []
    for d in ("one.com", "two.org"):
        (tmp_path / f"{d}.lett").write_text(row("en", f"http://{d}/en", "The cat sleeps.") +
                                            row("fr", f"http://{d}/fr", "Le chat dort."))
        gold.append(f"http://{d}/en\thttp://{d}/fr\n")
    (tmp_path / "gold").write_text("".join(gold))
    out = tmp_path / "r.json"
    assert main(["eval", "align", str(hmde_dir), "--lett", str(tmp_path / "one.com.lett"), str(tmp_path / "two.org.lett"),
                 "--gold", str(tmp_path / "gold"), "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    # one document per side and domain: matched within the domain, never across
    assert result["metrics"]["all_domains"]["found_pairs"] == 2 and result["metrics"]["average"] == 1.0
    assert set(result["metrics"]["domains"]) == {"one.com", "two.org"}
    assert "recall over 2 domain(s): 1.0000 (2/2)" in capsys.readouterr().out


CLEF_SAMPLES = {  # one document in each CLEF 2003 collection's layout: (SGML, expected text)
    "sda": ("<DOC>\n<DOCNO>SDA.940101.0001</DOCNO>\n<DOCID>SDA.940101.0001</DOCID>\n<KW>UNW</KW>\n<TI>Hochwasser</TI>\n"
            "<LD>Bern (sda) Der Rhein stieg.</LD>\n<TX>Die Pegel stiegen weiter.\nDörfer wurden geräumt.</TX>\n</DOC>\n",
            "Hochwasser Bern (sda) Der Rhein stieg. Die Pegel stiegen weiter. Dörfer wurden geräumt."),
    "latimes": ("<DOC>\n<DOCNO> LA010194-0001 </DOCNO>\n<DATE><P>January 1, 1994</P></DATE>\n"
                "<HEADLINE><P>Floods &amp; storms</P></HEADLINE>\n<BYLINE><P>By A. Writer</P></BYLINE>\n"
                "<TEXT><P>Rivers rose.</P><P>Towns were left.</P></TEXT>\n</DOC>\n",
                "Floods & storms Rivers rose. Towns were left."),
    "spiegel": ("<DOC><DOCNO>SPIEGEL9401-000001</DOCNO><TITLE>Flut</TITLE><LEAD>Das Wasser kam.</LEAD>"
                "<TEXT>Es ging.</TEXT></DOC>", "Flut Das Wasser kam. Es ging."),
    "algemeen": ("<DOC><DOCNO>AD19940101-0001</DOCNO><TI><P>Water</P></TI><LE><P>Het steeg.</P></LE>"
                 "<TE><P>Het daalde.</P></TE></DOC>", "Water Het steeg. Het daalde."),
    "la2002": ("<DOC><DOCNO>LAT-0001</DOCNO><HD>Flood</HD><LD>Lead.</LD><TE>Body.</TE></DOC>", "Flood Lead. Body."),
    "izvestia": ("<DOC><DOCNO>IZV-19950101-001</DOCNO><TITLE>Наводнение</TITLE><SUBJECT>x</SUBJECT>"
                 "<TEXT>Реки поднялись.</TEXT></DOC>", "Наводнение Реки поднялись."),
    "lemonde": ("<DOC><DOCNO>LEMONDE94-000001-19940101</DOCNO><TITLE>Crue</TITLE><TEXT>L'eau monte.</TEXT></DOC>",
                "Crue L'eau monte."),
}


@pytest.mark.parametrize("collection", sorted(CLEF_SAMPLES))
def test_clef_documents_keep_every_text_field_of_each_collection(tmp_path, collection):
    """Issue 16, item 5: SDA/AGZ/ATS bodies are in <TX>, which was not read."""
    sgml, expected = CLEF_SAMPLES[collection]
    path = tmp_path / f"{collection}.sgml"
    path.write_bytes(sgml.encode("utf-8"))
    coll = clir.read_clef_documents([path])
    assert coll.texts == [expected]


def test_clef_latin1_is_decoded_not_replaced(tmp_path):
    sgml, expected = CLEF_SAMPLES["sda"]
    latin = tmp_path / "sda.sgml"
    latin.write_bytes(sgml.encode("iso-8859-1"))
    assert clir.read_clef_documents([latin]).texts == [expected]  # detected: not UTF-8, so ISO-8859-1
    assert "\ufffd" not in clir.read_clef_documents([latin], encoding="iso-8859-1").texts[0]
    with pytest.raises(InputError, match=r"sda.sgml, line 8: not utf-8 \(byte 0xf6\)"):
        clir.read_clef_documents([latin], encoding="utf-8")
    topics = tmp_path / "topics.sgml"
    topics.write_bytes("<top><num>C141</num><DE-title>Überschwemmung</DE-title></top>".encode("iso-8859-1"))
    assert clir.read_clef_topics(topics).texts == ["Überschwemmung"]
