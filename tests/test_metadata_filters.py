"""Documents keep their metadata and searches filter by it (issue 61, item 4): one expression syntax parsed by hmde
(hmde.index.filters), pushed into DuckDB as parameters, the top hits of the matching documents (checked against a
brute-force filter-then-rank over the same vectors), and metadata through build, upsert, Parquet, CLI, Python and
HTTP."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_files import write_jsonl
from hmde.cli.main import main
from hmde.index.filter_eval import matches, to_duckdb
from hmde.index.filters import FilterError, In, Compare, And, Not, Or, parse

SECTIONS = ["sport", "politics", "science", "culture"]


def corpus(n: int = 60) -> list[dict]:
    docs = []
    for i in range(n):
        doc = {"doc_id": f"d{i:02d}", "lang": ["eng", "deu", "fra"][i % 3],
               "text": f"Article {i} reports on topic {i % 7}. It has a second sentence about item {i % 5}.",
               "section": SECTIONS[i % 4], "date": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}", "words": 100 + 37 * i}
        if i % 5 == 0:
            doc["title"] = f"Title {i}"
        if i % 6 == 0:
            doc["breaking"] = True
        docs.append(doc)
    return docs




# -- the expression language, by hand ------------------------------------------------------------------------
def test_expressions_parse_into_the_tree_a_user_means():
    assert parse('section == "sport"') == Compare("section", "==", "sport")
    assert parse("a == 1 or b != 'x' and not c < 2.5") == Or((Compare("a", "==", 1), And((
        Compare("b", "!=", "x"), Not(Compare("c", "<", 2.5))))))
    assert parse('(a == 1 or b == 2) and lang not in ["deu", "fra"]') == And((
        Or((Compare("a", "==", 1), Compare("b", "==", 2))), In("lang", ("deu", "fra"), negated=True)))
    assert parse('x == "say \\"hi\\"\\u00e9" && !(y == true)') == And((Compare("x", "==", 'say "hi"é'),
                                                                      Not(Compare("y", "==", True))))


@pytest.mark.parametrize("text, message", [
    ('section ==', "filter: expected a value at character 11, found the end"),
    ('section = "x"', "filter: cannot read '= \"x\"' at character 8"),
    ('(a == 1', "filter: expected ) at character 8, found the end"),
    ('a in []', "filter: an empty list after 'in'"),
    ('a > true', "filter: a > true: true and false compare with == or != only"),
    ('', "filter: an empty expression (e.g. section == \"sport\")"),
    ('a == "x" b == 1', "filter: unexpected 'b' at character 10"),
    ('a == "x"; DROP TABLE docs', "filter: cannot read '; DROP TABLE docs' at character 9"),
])
def test_a_malformed_expression_is_one_line_saying_where(text, message):
    with pytest.raises(FilterError) as refused:
        parse(text)
    assert str(refused.value) == message


def test_duckdb_and_python_agree_on_every_operator_and_on_missing_or_mistyped_fields():
    import duckdb

    docs = [("a", "eng", {"s": "sport", "d": "2024-03-01", "n": 2024, "b": True}),
            ("b", "deu", {"s": "politics", "d": "2023-12-31", "n": 2023}),
            ("c", None, {"s": "sport", "n": "2022"}),  # a number written as a string: no numeric comparison
            ("d", "fra", {})]
    con = duckdb.connect()
    con.execute("CREATE TABLE docs (row BIGINT, doc_id VARCHAR, lang VARCHAR, metadata VARCHAR)")
    for i, (d, lang, meta) in enumerate(docs):
        con.execute("INSERT INTO docs VALUES (?, ?, ?, ?)", [i, d, lang, json.dumps(meta)])
    cases = {'s == "sport"': "ac", 'd >= "2024-01-01"': "a", "n > 2022.5": "ab", "n in [2023, 2024]": "ab",
             'not (s == "sport")': "b", 'lang in ["deu", "fra"] or n == 2024': "abd", 'doc_id not in ["a"]': "bcd",
             "b == true": "a", "b != true": "", "n != 2023": "a", 'n == "2022"': "c", 'lang != "eng"': "bd",
             's != "sport" and not (n < 2024)': "", 'not (lang == "eng")': "bd", "n <= 2023": "b"}
    for text, expected in cases.items():
        tree = parse(text)
        sql, params = to_duckdb(tree)
        got = "".join(r[0] for r in con.execute(f"SELECT doc_id FROM docs WHERE {sql} ORDER BY row", params).fetchall())
        assert got == expected, (text, got)
        assert "".join(d for d, lang, meta in docs if matches(tree, d, lang, meta)) == expected, text
        assert "sport" not in sql and "2024" not in sql  # values travel as parameters only


# -- filtered search: the top hits of the matching documents ------------------------------------------------
@pytest.fixture(scope="module")
def news(tmp_path_factory):
    """The real default model: a random one ties its sentences at cosine 0.99999, and ties have no order."""
    folder = tmp_path_factory.mktemp("news")
    src = write_jsonl(folder / "docs.jsonl", corpus())
    for name, extra in (("multi", []), ("single", ["--single-vector"])):
        assert main(["index", "build", "hmde-e5", str(src), "-o", str(folder / name), "--no-progress", *extra]) == 0
    return folder


EXPRESSIONS = ['section == "sport"', 'section in ["sport", "science"] and words > 1000',
               'breaking == true or date < "2024-03-01"', 'not (lang == "eng")', 'title != "Title 5"']


@pytest.mark.parametrize("kind", ["multi", "single"])
def test_a_filtered_search_equals_filter_then_rank_by_brute_force(news, kind):
    from hmde.index.search import Index

    docs = {d["doc_id"]: d for d in corpus()}
    queries = ["topic 3 item 2", "Article 17 reports", "a second sentence about item 4"]
    with Index.open(str(news / kind)) as index:
        everything = index.search(queries, top_k=len(docs), query_lang="none")
        for expression in EXPRESSIONS:
            tree = parse(expression)
            filtered = index.search(queries, top_k=5, query_lang="none", filter=expression)
            for all_hits, hits in zip(everything, filtered):
                expected = [h for h in all_hits if matches(tree, h.doc_id, h.lang, {
                    k: v for k, v in docs[h.doc_id].items() if k not in ("doc_id", "text", "lang")})][:5]
                assert [h.doc_id for h in hits] == [h.doc_id for h in expected], expression
                assert all(abs(a.score - b.score) <= 1e-5 for a, b in zip(hits, expected))
                assert all(h.metadata == {k: v for k, v in docs[h.doc_id].items()
                                          if k not in ("doc_id", "text", "lang")} for h in hits)


def test_a_filter_is_checked_before_the_model_loads_and_matches_nothing_quietly(news, capsys):
    queries = ["topic 3"]
    assert main(["search", str(news / "multi"), *queries, "--model", "no-such-model", "--filter", 'sectoin == "x"']) == 2
    assert capsys.readouterr().err.strip() == ("hmde: error: filter: no document has the field 'sectoin' (did you "
                                               "mean 'section'? fields: breaking, date, doc_id, lang, section, title, "
                                               "words)")
    assert main(["search", str(news / "multi"), *queries, "--filter", 'section == "weather"']) == 0
    assert "(no hits)" in capsys.readouterr().out


# -- metadata through every way in and out ---------------------------------------------------------------
def test_metadata_round_trips_through_build_upsert_parquet_cli_and_python(tmp_path, hmde_dir, capsys):
    from hmde.index.search import Index

    docs = corpus(6)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    assert main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "rep.parquet"), "--no-progress"]) == 0
    assert main(["index", "build", str(tmp_path / "rep.parquet"), "-o", str(tmp_path / "from-parquet"),
                 "--no-progress"]) == 0
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "idx"), "--no-progress"]) == 0
    changed = [{**docs[0], "section": "weather", "title": "Renamed"}]
    assert main(["index", "upsert", str(tmp_path / "idx"), str(write_jsonl(tmp_path / "up.jsonl", changed)),
                 "--no-progress"]) == 0
    assert main(["index", "compact", str(tmp_path / "idx")]) == 0  # the rewritten table keeps the metadata
    capsys.readouterr()
    assert main(["search", str(tmp_path / "idx"), "Article 0", "--json", "--filter", 'section == "weather"']) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["doc_id"] for h in hits] == ["d00"]
    assert hits[0]["metadata"] == {"section": "weather", "date": "2024-01-01", "words": 100, "title": "Renamed",
                                   "breaking": True}
    with Index.open(str(tmp_path / "from-parquet")) as index:
        got = {h.doc_id: h.metadata for h in index.search("Article", top_k=6, query_lang="none")[0]}
    assert got == {d["doc_id"]: {k: v for k, v in d.items() if k not in ("doc_id", "text", "lang")} for d in docs}
    with Index.open(str(tmp_path / "idx")) as index:  # Python's documents: every other key is metadata
        index.upsert([{"doc_id": "p1", "text": "A page from Python.", "lang": "eng", "section": "sport", "rank": 3}])
        hits = index.search("A page from Python.", top_k=1, filter="rank == 3")[0]
        assert [(h.doc_id, h.metadata) for h in hits] == [("p1", {"section": "sport", "rank": 3})]


def test_the_server_filters_returns_metadata_and_names_a_bad_filter(news, tmp_path):
    pytest.importorskip("fastapi")
    import httpx

    from hmde.index.search import Index
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    index = tmp_path / "multi"
    shutil.copytree(news / "multi", index)
    expression = 'section == "science" and words >= 500'
    with Index.open(str(index)) as opened:
        local = opened.search(["topic 3 item 2"], top_k=4, query_lang="none", filter=expression)[0]
    with ThreadServer(load_served(None, [str(index)], "cpu"), ServeOptions(writable=True)) as running:
        r = httpx.post(running.url + "/search", json={"query": "topic 3 item 2", "top_k": 4, "query_lang": "none",
                                                      "filter": expression}, timeout=60)
        hits = r.json()["results"][0]["hits"]
        assert [(h["doc_id"], h["metadata"]) for h in hits] == [(h.doc_id, h.metadata) for h in local]
        assert all(abs(h["score"] - x.score) <= 1e-5 for h, x in zip(hits, local))
        bad = httpx.post(running.url + "/search", json={"query": "x", "filter": "words >"}, timeout=60)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "filter"
        assert bad.json()["error"]["message"] == "filter: expected a value at character 8, found the end"
        written = httpx.post(running.url + "/indexes/multi/documents", json={"documents": [
            {"doc_id": "h1", "text": "Posted over HTTP.", "section": "web", "url": "https://example.org/h1"}]},
            timeout=60)
        assert written.status_code == 200
        r = httpx.post(running.url + "/search", json={"query": "Posted over HTTP.", "filter": 'section == "web"'},
                       timeout=60)
        assert [(h["doc_id"], h["metadata"]) for h in r.json()["results"][0]["hits"]] == [
            ("h1", {"section": "web", "url": "https://example.org/h1"})]


def test_an_index_written_before_metadata_searches_and_gains_the_column_on_its_next_write(tmp_path, hmde_dir):
    import duckdb

    from hmde.errors import HmdeError
    from hmde.index.search import Index

    index = tmp_path / "old"
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl", corpus(4))), "-o",
                 str(index), "--no-progress"]) == 0
    with duckdb.connect(str(index / "docs.duckdb")) as con:  # as an index of an earlier hmde left it
        con.execute("ALTER TABLE docs DROP COLUMN metadata")
    with Index.open(str(index)) as opened:
        hits = opened.search("Article", top_k=4, query_lang="none", filter='lang == "eng"')[0]
        assert [(h.doc_id, h.metadata) for h in hits] == [("d00", {}), ("d03", {})]
        with pytest.raises(HmdeError, match="no document has the field 'section'"):
            opened.search("Article", filter='section == "sport"')
        opened.add([{"doc_id": "n1", "text": "New.", "section": "sport"}])
        assert [h.doc_id for h in opened.search("New.", filter='section == "sport"')[0]] == ["n1"]


def test_metadata_that_is_not_json_is_refused_naming_the_field(tmp_path):
    from hmde.errors import InputError
    from hmde.io.documents import read_documents, records_from

    with pytest.raises(InputError, match=r"documents\[0\], field 'when'"):
        records_from([{"doc_id": "a", "text": "x", "when": object()}])
    bad = tmp_path / "nan.jsonl"
    bad.write_text('{"doc_id": "a", "text": "x", "score": NaN}\n')
    with pytest.raises(InputError, match=r"nan.jsonl, line 1, field 'score': metadata must be JSON values"):
        list(read_documents(bad, keep_fields=("*",)))


def test_a_milvus_stored_index_keeps_metadata_and_filters_as_the_own_index(tmp_path, hmde_dir, capsys):
    pytest.importorskip("milvus_lite")
    index, own = tmp_path / "m", tmp_path / "own"
    src = write_jsonl(tmp_path / "d.jsonl", corpus(12))
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--store", f"milvus:{tmp_path / 'm.db'}",
                 "--no-progress"]) == 0
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(own), "--no-progress"]) == 0
    for expression in ['section == "sport"', 'not (section == "sport") and words > 300', 'title != "Title 5"']:
        found = []
        for folder in (index, own):  # every match (the random model ties its documents: no order to compare)
            capsys.readouterr()
            assert main(["search", str(folder), "Article", "--filter", expression, "--json", "--top-k", "12"]) == 0
            found.append({h["doc_id"]: h["score"] for h in map(json.loads, capsys.readouterr().out.splitlines())})
        tree = parse(expression)
        expected = {d["doc_id"] for d in corpus(12) if matches(tree, d["doc_id"], d["lang"], d)}
        # the matches only: a random model's near-identical languages make the subspace ill-conditioned (scores are
        # compared on real vectors: the store contract and the XQuAD parity test)
        assert set(found[0]) == set(found[1]) == expected, expression
    assert main(["search", str(index), "Article", "--filter", 'sectoin == "sport"']) == 2
    assert "no document has the field 'sectoin'" in capsys.readouterr().err
    changed = [{**corpus(1)[0], "section": "weather"}]
    assert main(["index", "upsert", str(index), str(write_jsonl(tmp_path / "up.jsonl", changed)), "--no-progress"]) == 0
    capsys.readouterr()
    for extra in ([], ["--single-vector"]):  # the metadata is kept in Milvus and comes back with the hits
        assert main(["search", str(index), "Article 0", "--json", "--top-k", "3", *extra]) == 0
        hits = {h["doc_id"]: h["metadata"] for h in map(json.loads, capsys.readouterr().out.splitlines())}
        expected = {d["doc_id"]: {k: v for k, v in d.items() if k not in ("doc_id", "text", "lang")}
                    for d in changed + corpus(12)[1:]}
        assert len(hits) == 3 and hits == {doc_id: expected[doc_id] for doc_id in hits}


def test_a_served_milvus_index_filters_writes_and_answers_as_its_own_search(tmp_path, hmde_dir):
    """`hmde serve` on an index stored in Milvus: the same ranking as Index.search, a filter pushed into Milvus, a
    write through the server committed and seen by the next search."""
    pytest.importorskip("fastapi")
    pytest.importorskip("milvus_lite")
    import httpx

    from hmde.index.search import Index
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served
    from serve_helpers import ThreadServer

    index = tmp_path / "stored"
    assert main(["index", "build", str(hmde_dir), str(write_jsonl(tmp_path / "d.jsonl", corpus(12))), "-o", str(index),
                 "--store", f"milvus:{tmp_path / 'm.db'}", "--no-progress"]) == 0
    expression = 'section in ["sport", "science"] and not (words > 500)'
    with Index.open(str(index)) as opened:
        local = opened.search(["Article 4 reports"], top_k=3, query_lang="none", filter=expression)[0]
    assert local and all(matches(parse(expression), h.doc_id, h.lang, h.metadata) for h in local)
    with ThreadServer(load_served(None, [str(index)], "cpu"), ServeOptions(writable=True)) as running:
        r = httpx.post(running.url + "/search", json={"query": "Article 4 reports", "top_k": 3, "query_lang": "none",
                                                      "filter": expression}, timeout=60)
        hits = r.json()["results"][0]["hits"]
        assert [(h["doc_id"], h["metadata"]) for h in hits] == [(h.doc_id, h.metadata) for h in local]
        assert all(abs(h["score"] - x.score) <= 1e-5 for h, x in zip(hits, local))
        written = httpx.post(running.url + "/indexes/stored/documents", json={"documents": [
            {"doc_id": "h1", "text": "Posted over HTTP.", "section": "web"}]}, timeout=60)
        assert written.status_code == 200, written.text
        r = httpx.post(running.url + "/search", json={"query": "Posted over HTTP.", "filter": 'section == "web"'},
                       timeout=60)
        assert [(h["doc_id"], h["metadata"]) for h in r.json()["results"][0]["hits"]] == [("h1", {"section": "web"})]
