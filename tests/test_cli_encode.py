import gzip
import json

import numpy as np
import pytest

from hmde import HierarchicalEncoder
from cli_files import write_jsonl
from hmde.cli.main import main




ROWS = [
    {"doc_id": "a", "text": "The cat sat on the mat. It was sunny.", "lang": "eng"},
    {"doc_id": "b", "text": "Die Katze saß auf der Matte.", "lang": "deu"},
    {"doc_id": "c", "text": ["Pre-split one.", "Pre-split two."], "lang": "eng"},
]


def test_encode_jsonl_matches_the_library(hmde_dir, tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", ROWS)
    out = tmp_path / "out.npy"
    assert main(["encode", str(hmde_dir), str(src), "--output", str(out), "--no-progress"]) == 0
    vectors = np.load(out)
    assert (tmp_path / "out.ids.txt").read_text().split() == ["a", "b", "c"]
    expected = HierarchicalEncoder.from_pretrained(hmde_dir).encode_documents(
        [r["text"] for r in ROWS], langs=[r["lang"] for r in ROWS]
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind


def test_encode_gz_tsv_and_txt(hmde_dir, tmp_path):
    gz = tmp_path / "docs.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "x", "body": "Hello there."}) + "\n")
    assert main(["encode", str(hmde_dir), str(gz), "-o", str(tmp_path / "g.npy"), "--id-field", "id",
                 "--text-field", "body", "--no-progress"]) == 0
    (tmp_path / "d.tsv").write_text("d1\tFirst document.\nd2\tSecond one.\n")
    assert main(["encode", str(hmde_dir), str(tmp_path / "d.tsv"), "-o", str(tmp_path / "t.npy"), "--no-progress"]) == 0
    assert np.load(tmp_path / "t.npy").shape[0] == 2
    (tmp_path / "d.txt").write_text("one doc\nanother doc\nthird\n")
    assert main(["encode", str(hmde_dir), str(tmp_path / "d.txt"), "-o", str(tmp_path / "x.npy"), "--no-progress"]) == 0
    assert (tmp_path / "x.ids.txt").read_text().split() == ["1", "2", "3"]


def test_queries_with_a_sentence_encoder(labse_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    src = tmp_path / "q.txt"
    src.write_text("where is the cat?\nwer ist da?\n")
    assert main(["encode", str(labse_dir), str(src), "-o", str(tmp_path / "q.npy"), "--queries", "--no-progress"]) == 0
    reference = SentenceTransformer(str(labse_dir), device="cpu").encode(["where is the cat?", "wer ist da?"])
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), reference, atol=1e-5)


def test_a_sentence_encoder_encodes_documents_with_mean_unless_hmde_is_asked(labse_dir, tmp_path, capsys):
    """Issue 26: `hmde encode multilingual-e5-small docs.jsonl` must work: a sentence encoder without
    --method gives `mean` (said on stderr), as align and index build do; --method hmde is a clear error."""
    from hmde.methods.vectorizer import DocumentVectorizer
    from hmde.encoders.sentence_encoder import SentenceEncoder

    src = write_jsonl(tmp_path / "d.jsonl", ROWS)
    assert main(["encode", str(labse_dir), str(src), "-o", str(tmp_path / "o.npy"), "--no-progress"]) == 0
    assert "--method mean" in capsys.readouterr().err
    expected = DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "mean").encode(
        [r["text"] for r in ROWS], [r.get("lang") for r in ROWS])
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), expected, atol=1e-6)
    assert main(["encode", str(labse_dir), str(src), "-o", str(tmp_path / "h.npy"), "--method", "hmde"]) == 2
    err = capsys.readouterr().err
    assert "is a sentence encoder, not an hmde model" in err and "--queries" in err
    assert not (tmp_path / "h.npy").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"doc_id": "a", "text": "ok"}\n{"doc_id": "b", "text": oops}\n', "line 2: malformed JSON"),
        ('{"doc_id": "a", "text": "ok"}\n{"doc_id": "b"}\n', "line 2, field 'text': missing field"),
        ('{"text": "no id"}\n', "line 1, field 'doc_id': missing field"),
        ("", "the file holds no documents"),
        ('{"doc_id": "a", "text": 5}\n', "field 'text': must be a string or a list of strings"),
    ],
)
def test_bad_input_names_file_line_and_field(hmde_dir, tmp_path, capsys, content, message):
    src = tmp_path / "bad.jsonl"
    src.write_text(content)
    out = tmp_path / "out.npy"
    np.save(out, np.ones(3))  # an earlier result (hmde's: beside its ids) must survive a failed run
    (tmp_path / "out.ids.txt").write_text("a\nb\nc\n")
    assert main(["encode", str(hmde_dir), str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(src) in err and message in err and "Traceback" not in err
    assert np.array_equal(np.load(out), np.ones(3))


def test_empty_documents_get_zero_rows_and_a_warning(hmde_dir, tmp_path, capsys):
    src = write_jsonl(tmp_path / "d.jsonl", [{"doc_id": "e", "text": "  "}, {"doc_id": "f", "text": "Words."}])
    assert main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "o.npy"), "--no-progress"]) == 0
    assert "1 document(s) with no text get an all-zero vector: e" in capsys.readouterr().err
    vectors = np.load(tmp_path / "o.npy")
    assert np.all(vectors[0] == 0) and np.any(vectors[1] != 0)


def test_unloadable_model_name_explains_offline_use(tmp_path, capsys):
    src = write_jsonl(tmp_path / "d.jsonl", ROWS)
    assert main(["encode", "someone/not-a-local-model", str(src), "-o", str(tmp_path / "o.npy")]) == 2
    err = capsys.readouterr().err
    assert "hub could not be reached" in err and "pass the folder's path" in err


def test_missing_input_file(hmde_dir, tmp_path, capsys):
    assert main(["encode", str(hmde_dir), str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "o.npy")]) == 2
    assert "none.jsonl: file not found" in capsys.readouterr().err


def test_every_command_has_help(capsys):
    from hmde.cli.main import COMMANDS

    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        assert "usage: hmde" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["hmde", "mean", "seg"])
def test_streaming_in_chunks_gives_the_vectors_of_one_pass(hmde_dir, tmp_path, monkeypatch, method):
    """Issue 17, item 3: `hmde encode` reads, encodes and writes a chunk at a time (memory: one chunk)."""
    import hmde.cli.encode
    from hmde.methods.vectorizer import DocumentVectorizer

    rows = [{"doc_id": f"d{i}", "text": f"Sentence {i} here. Another one about {i % 3}.", "lang": "eng"}
            for i in range(11)]
    src = write_jsonl(tmp_path / "docs.jsonl", rows)
    monkeypatch.setattr(hmde.cli.encode, "STREAM_CHUNK", 3)  # 4 chunks, the last one short
    out = tmp_path / "v.npy"
    assert main(["encode", str(hmde_dir), str(src), "-o", str(out), "--method", method, "--no-progress"]) == 0
    expected = DocumentVectorizer(HierarchicalEncoder.from_pretrained(hmde_dir), method).encode(
        [r["text"] for r in rows], ["eng"] * len(rows))
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
    assert (tmp_path / "v.ids.txt").read_text().split() == [r["doc_id"] for r in rows]


def test_an_interrupted_stream_leaves_nothing_and_keeps_the_old_output(hmde_dir, tmp_path, monkeypatch):
    import hmde.cli.encode

    src = write_jsonl(tmp_path / "docs.jsonl", ROWS * 1 + [{"doc_id": f"x{i}", "text": "More.", "lang": "eng"}
                                                          for i in range(5)])
    out = tmp_path / "v.npy"
    out.write_bytes(b"an earlier result")
    (tmp_path / "v.ids.txt").write_text("earlier ids\n")  # hmde's own output, which a rerun may replace
    monkeypatch.setattr(hmde.cli.encode, "STREAM_CHUNK", 2)
    calls = []
    real = hmde.cli.encode.chunk_encoder

    def failing(args, kind, model):
        encode = real(args, kind, model)

        def run(texts, langs):
            calls.append(len(texts))
            if len(calls) == 3:
                raise KeyboardInterrupt  # Ctrl-C in the third chunk
            return encode(texts, langs)
        return run

    monkeypatch.setattr(hmde.cli.encode, "chunk_encoder", failing)
    assert main(["encode", str(hmde_dir), str(src), "-o", str(out), "--no-progress"]) == 130
    assert out.read_bytes() == b"an earlier result" and (tmp_path / "v.ids.txt").read_text() == "earlier ids\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "v.ids.txt", "v.npy"]  # no temporaries
