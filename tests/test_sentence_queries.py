"""Sentence-query retrieval tasks and results by document length."""

from __future__ import annotations

import json

import pytest

from hmde.errors import InputError, HmdeError
from hmde.evaluation.clir import length_label, per_query_scores, scores_by_length
from hmde.evaluation.sentence_queries import ParallelDocument, build_task, read_parallel_documents, write_task


def docs():
    return [ParallelDocument("eng/1", "c1", "eng", ["One.", "Two.", "Three."]),
            ParallelDocument("spa/1", "c1", "spa", ["Uno.", "Dos.", "Tres."]),
            ParallelDocument("eng/2", "c2", "eng", ["Four.", "Five."]),
            ParallelDocument("spa/2", "c2", "spa", ["Cuatro.", "Cinco."]),
            ParallelDocument("eng/3", "c3", "eng", ["Only English."])]


def test_every_query_is_a_sentence_of_its_relevant_documents_translation():
    topics, collection, qrels = build_task(docs(), "eng", "spa", max_queries=100, seed=1)
    assert sorted(d for d, _ in collection) == ["spa/1", "spa/2"]  # c3 has no Spanish side
    assert len(topics) == 5  # every English sentence of c1 and c2
    source = {"One.": "spa/1", "Two.": "spa/1", "Three.": "spa/1", "Four.": "spa/2", "Five.": "spa/2"}
    for qid, text in topics:
        assert qrels[qid] == {source[text]: 1}


def test_queries_are_sampled_reproducibly():
    a = build_task(docs(), "eng", "spa", max_queries=2, seed=3)[0]
    assert a == build_task(docs(), "eng", "spa", max_queries=2, seed=3)[0] and len(a) == 2


def test_documents_sharing_a_sentence_with_training_data_are_left_out():
    exclude = [ParallelDocument("x", "other", "spa", ["dos."])]  # case and spacing do not hide it
    topics, collection, qrels = build_task(docs(), "eng", "spa", exclude=exclude)
    assert [d for d, _ in collection] == ["spa/2"]
    assert {t for _, t in topics} == {"Four.", "Five."}
    with pytest.raises(InputError, match="no document exists"):
        build_task(docs(), "eng", "fra")


def test_task_files_round_trip_through_the_clir_readers(tmp_path):
    from hmde.evaluation.clir import read_collection, read_qrels, read_topics

    topics, collection, qrels = build_task(docs(), "eng", "spa")
    files = write_task(tmp_path, topics, collection, qrels, "spa")
    assert read_qrels(files["qrels"]) == qrels
    assert read_topics(files["topics"]).texts == [t for _, t in topics]
    coll = read_collection(files["documents"])
    assert coll.texts[0] == ["Uno.", "Dos.", "Tres."] and coll.lang == "spa"


def test_reader_takes_verses_or_text_and_names_bad_lines(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"doc_id": "a", "concept": "c", "lang": "eng", "verses": ["A b.", " "]}) + "\n"
                    + json.dumps({"doc_id": "b", "concept": "c", "lang": "deu", "text": "Ein Satz. Noch einer."}) + "\n"
                    + json.dumps({"doc_id": "c", "lang": "deu", "text": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"d.jsonl, line 3, field 'concept'"):
        read_parallel_documents(path)
    path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    got = read_parallel_documents(path)
    assert got[0].sentences == ["A b."] and got[1].sentences == ["Ein Satz.", "Noch einer."]


def test_length_buckets_hand_checked():
    assert [length_label(n, [8, 16]) for n in (1, 8, 9, 16, 17, 100)] == ["1-8", "1-8", "9-16", "9-16", "17+", "17+"]
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    run = {"q1": {"d1": 0.9, "d2": 0.1}, "q2": {"d1": 0.9, "d2": 0.5}, "q3": {}}
    scores = per_query_scores(qrels, run, "AP")
    assert scores == {"q1": 1.0, "q2": 0.5, "q3": 0.0}  # q2's relevant document is ranked second
    groups = scores_by_length(qrels, scores, {"d1": 3, "d2": 12, "d3": 40}, [8, 16])
    assert groups == {"1-8": [1.0], "9-16": [0.5], "17+": [0.0]}


def test_bad_length_buckets_are_an_error():
    from hmde.cli.eval_runs import _length_bounds

    assert _length_bounds("8,16,32") == [8, 16, 32]
    for bad in ("16,8", "a,b", "0,4", "8,8"):
        with pytest.raises(HmdeError, match="--length-buckets"):
            _length_bounds(bad)
