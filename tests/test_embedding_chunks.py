"""The chunks an index embeds and writes together (issue 96, item 0): at least a batch of documents and
CHUNK_CHARACTERS of text, so that short documents' sentences are packed into the encoder's batches together (200
documents of 5 news sentences: 5.33 s in chunks of 64, 4.95 s in one, docs/speed.md), at most CHUNK_DOCUMENTS."""

from __future__ import annotations

from types import SimpleNamespace

from hmde.index.builder import CHUNK_CHARACTERS, CHUNK_DOCUMENTS, embedding_chunks
from hmde.methods.vectorizer import DocumentVectorizer


def docs(*lengths):
    return [SimpleNamespace(doc_id=str(i), text="x" * n) for i, n in enumerate(lengths)]


def sizes(chunks):
    return [len(c) for c in chunks]


def test_chunks_hold_a_batch_and_enough_text_and_never_more_than_the_cap():
    assert sizes(embedding_chunks(docs(5, 5, 5, 5, 5), 2, characters=12)) == [3, 2]  # 15 >= 12 at the third
    assert sizes(embedding_chunks(docs(20, 1, 1, 1), 2, characters=12)) == [2, 2]  # a batch at least
    assert sizes(embedding_chunks(docs(*[1] * 7), 2, characters=0)) == [2, 2, 2, 1]  # --batch-size alone
    assert sizes(embedding_chunks(docs(*[1] * 7), 1, characters=100, most=3)) == [3, 3, 1]  # the cap
    assert sizes(embedding_chunks(docs(), 4)) == []
    listed = [SimpleNamespace(doc_id="a", text=["abc", "de", 7]), SimpleNamespace(doc_id="b", text="f")]
    assert sizes(embedding_chunks(listed, 1, characters=5)) == [1, 1]  # a list of sentences: its strings count
    assert [d.doc_id for c in embedding_chunks(docs(3, 9, 2, 8, 1), 2, characters=10) for d in c] == \
        ["0", "1", "2", "3", "4"]  # every record once, in order
    assert CHUNK_CHARACTERS >= 100_000 and CHUNK_DOCUMENTS == 2048


def test_an_index_embeds_short_documents_in_one_chunk_whatever_the_batch(hmde_dir, tmp_path, monkeypatch):
    from hmde.index.search import Index

    seen = []
    original = DocumentVectorizer.encode_with_sentences

    def counted(self, texts, *args, **kwargs):
        seen.append(len(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(DocumentVectorizer, "encode_with_sentences", counted)
    short = [{"doc_id": f"d{i}", "text": f"Sentence {i} of a short page. Another one, {i}.", "lang": "eng"}
             for i in range(9)]
    with Index.create(str(tmp_path / "idx"), short[:5], model=str(hmde_dir), batch_size=2) as index:
        assert seen == [5]  # not 2 + 2 + 1: their sentences are sorted and packed together
        index.add(short[5:], batch_size=1)
        assert seen == [5, 4] and index.count() == 9
