"""Rows of sentences.npy read by position: the same values as the memory map, and no page of it mapped by a search."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hmde.errors import InputError
from hmde.index.row_file import RowFile
from hmde.index.store import DocumentIndex, IndexMeta


def _open(path: Path) -> tuple[RowFile, np.memmap]:
    array = np.load(path, mmap_mode="r")
    return RowFile(open(path, "rb"), array, path), array


def test_rows_in_any_order_with_repeats_equal_the_memory_map(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.arange(40 * 3, dtype=np.float32).reshape(40, 3))
    rows, array = _open(path)
    asked = np.array([7, 3, 4, 5, 39, 0, 4, 8, 6])  # runs (3-8), a repeat, both ends
    np.testing.assert_array_equal(rows.take(asked), array[asked])
    assert rows.take(np.array([], np.int64)).shape == (0, 3)
    np.testing.assert_array_equal(rows.span(10, 13), array[10:13])
    assert rows.span(38, 45).shape == (2, 3) and rows.span(5, 5).shape == (0, 3)
    with pytest.raises(IndexError, match="out of range 0..39"):
        rows.take(np.array([40]))
    rows.close()


def test_a_file_cut_short_after_opening_is_an_error_naming_it(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.ones((100, 4), np.float32))
    rows, _ = _open(path)
    with open(path, "r+b") as f:  # another program truncates it in place
        f.truncate(200)
    with pytest.raises(InputError, match=r"the file ends before row \d+; rebuild the index") as err:
        rows.take(np.array([90]))
    assert str(path) in str(err.value)
    rows.close()


def _mapped_kb(name: str) -> int:
    """Resident kB of this process's mappings of files called ``name`` (Linux /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.rstrip().endswith("/" + name)
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_a_compressed_multi_vector_search_maps_no_page_of_the_sentence_file(tmp_path):
    from hmde.index.build import write_batches
    from hmde.index.store import DocumentBatch

    rng = np.random.default_rng(0)
    dim, docs, per_doc = 16, 400, 8
    sents = rng.standard_normal((docs, per_doc, dim)).astype(np.float32)
    meta = IndexMeta(model="synthetic", model_sha256=None, dim=dim, method="mean", index_type="ivfpq", count=0,
                     multi_vector=True, sentence_vectors="lower", ivf_lists=4, pq_m=4)
    batch = DocumentBatch([f"d{i}" for i in range(docs)], ["eng"] * docs, [""] * docs, sents.mean(1),
                          [[f"s{j}" for j in range(per_doc)]] * docs, list(sents))
    write_batches(tmp_path / "idx", meta, iter([batch]), add=False).close()  # what `hmde index build` runs
    with DocumentIndex.open(tmp_path / "idx") as index:
        hits = index.search(sents[17, 3][None], 5)[0]
        assert hits[0].doc_id == "d17" and hits[0].best_sentence == "s3"
        assert _mapped_kb("sentences.npy") == 0  # the candidates, evidence and exact means were read, not mapped
