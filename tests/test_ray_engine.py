"""Ray Data encoding: equal to the single-process path, exactly-once under a worker crash, resumable."""

import gzip
import json
import os
from dataclasses import asdict

import numpy as np
import pyarrow.parquet as pq
import pytest

from hmde import HierarchicalEncoder
from hmde.cli.main import main

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'hmde[ray]')")

from hmde.scale.ray_encode import (  # noqa: E402
    EncodeSpec, RayEncoder, RayOptions, encode_with_ray, input_shards, iter_vector_shards, read_vectors)

SENTENCES = ["The cat sleeps on the mat.", "Economic growth slowed this year.", "Die Katze schläft.",
             "Le chat dort sur le tapis.", "The team won the final match.", "Prices rose again in March."]


@pytest.fixture(scope="module")
def ray_local():
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    except Exception as e:  # noqa: BLE001 - any failure to start means: skip, saying why
        pytest.skip(f"Ray could not start here: {e}")
    yield ray
    ray.shutdown()


def write_shards(folder, n_shards=3, per_shard=7):
    folder.mkdir(parents=True, exist_ok=True)
    docs = []
    for s in range(n_shards):
        with gzip.open(folder / f"shard-{s}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i in range(per_shard):
                k = s * per_shard + i
                doc = {"doc_id": f"d{k}", "text": " ".join(SENTENCES[(k + j) % 6] for j in range(1 + k % 4)),
                       "lang": "en"}
                f.write(json.dumps(doc) + "\n")
                docs.append(doc)
    return docs


def spec_for(model_dir, **kw):
    return EncodeSpec(model=str(model_dir), model_sha256=None, method="hmde", batch_size=4, **kw)


OPTIONS = dict(actors=2, cpus_per_actor=0.5, batch_rows=5, shards_per_wave=8)


def test_ray_vectors_equal_single_process_and_rerun_skips_finished_shards(ray_local, hmde_dir, tmp_path):
    docs = write_shards(tmp_path / "in")
    out = tmp_path / "vectors"
    manifest = encode_with_ray(spec_for(hmde_dir), [tmp_path / "in"], out, options=RayOptions(**OPTIONS),
                               show_progress=False)
    ids, vectors = read_vectors(out, input_shards([tmp_path / "in"]))
    assert ids == [d["doc_id"] for d in docs]
    expected = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu").encode_documents(
        [d["text"] for d in docs], langs="en", batch_size=4)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    assert sorted(e["output"] for e in manifest.data["shards"].values()) == [
        "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    # a rerun finds nothing to do: the finished files are not rewritten
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.parquet")}
    encode_with_ray(spec_for(hmde_dir), [tmp_path / "in"], out, options=RayOptions(**OPTIONS), show_progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.parquet")} == stamps
    # a new shard is encoded on its own; other settings are refused
    write_shards(tmp_path / "more", n_shards=1, per_shard=3)
    (tmp_path / "more" / "shard-0.jsonl.gz").rename(tmp_path / "in" / "shard-9.jsonl.gz")
    encode_with_ray(spec_for(hmde_dir), [tmp_path / "in"], out, options=RayOptions(**OPTIONS), show_progress=False)
    assert len(list(iter_vector_shards(out))) == 4
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.parquet") if p.name in stamps} == stamps
    with pytest.raises(Exception, match="other settings.*normalize"):
        encode_with_ray(spec_for(hmde_dir, normalize=True), [tmp_path / "in"], out, options=RayOptions(**OPTIONS))


def test_a_worker_killed_mid_run_is_retried_without_duplicate_or_missing_rows(ray_local, hmde_dir, tmp_path):
    docs = write_shards(tmp_path / "in", n_shards=2, per_shard=9)
    flag = tmp_path / "crashed-once"

    class CrashOnce(RayEncoder):  # defined here, so Ray ships it by value
        def __call__(self, batch):
            if "d11" in batch.column("doc_id").to_pylist() and not flag.exists():
                flag.write_text("x")
                os._exit(1)  # the actor process dies without cleanup, as a killed worker would
            return super().__call__(batch)

    encode_with_ray(spec_for(hmde_dir), [tmp_path / "in"], tmp_path / "out",
                    options=RayOptions(**{**OPTIONS, "encoder_class": CrashOnce}), show_progress=False)
    assert flag.exists()  # the crash did happen
    ids, vectors = read_vectors(tmp_path / "out", input_shards([tmp_path / "in"]))
    assert ids == [d["doc_id"] for d in docs]
    assert np.isfinite(vectors).all() and vectors.shape == (18, 64)


def test_cli_engine_ray_and_bad_input(ray_local, hmde_dir, tmp_path, capsys):
    docs = write_shards(tmp_path / "in", n_shards=2, per_shard=3)
    argv = ["encode", str(hmde_dir), str(tmp_path / "in"), "-o", str(tmp_path / "vec"), "--engine", "ray",
            "--ray-actors", "1", "--ray-cpus-per-actor", "0.5", "--no-progress", "--device", "cpu"]
    assert main(argv) == 0
    assert "6 documents in 2 shards" in capsys.readouterr().out
    ids, vectors = read_vectors(tmp_path / "vec")
    assert ids == [d["doc_id"] for d in docs] and vectors.shape == (6, 64)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.jsonl").write_text('{"doc_id": "a", "text": "ok"}\n{"doc_id": "b", "text": 5}\n')
    assert main(["encode", str(hmde_dir), str(bad), "-o", str(tmp_path / "v2"), "--engine", "ray",
                 "--ray-actors", "1", "--ray-cpus-per-actor", "0.5", "--no-progress", "--device", "cpu"]) != 0
    err = capsys.readouterr().err
    assert "x.jsonl" in err and "line 2" in err and "text" in err


def test_index_build_with_ray_equals_the_local_build(ray_local, hmde_dir, tmp_path, capsys):
    from hmde.index import DocumentIndex

    docs = write_shards(tmp_path / "in", n_shards=2, per_shard=3)
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    ray_args = ["--engine", "ray", "--ray-actors", "1", "--ray-cpus-per-actor", "0.5", "--no-progress",
                "--device", "cpu"]
    assert main(["index", "build", str(hmde_dir), str(tmp_path / "in"), "-o", str(tmp_path / "ray"), *ray_args]) == 0
    assert main(["index", "build", str(hmde_dir), str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "local"),
                 "--no-progress", "--device", "cpu"]) == 0
    assert (tmp_path / "ray.vectors" / "manifest.json").exists()  # the encoded shards, kept for a rerun
    by_ray, local = DocumentIndex.open(tmp_path / "ray"), DocumentIndex.open(tmp_path / "local")
    assert by_ray.doc_ids() == local.doc_ids() == [d["doc_id"] for d in docs]
    np.testing.assert_allclose(by_ray.index.reconstruct_n(0, 6), local.index.reconstruct_n(0, 6), atol=1e-5)
    # issue 54: the Ray engine builds the default multi-vector index too (its shards hold the sentences)
    assert by_ray.meta.multi_vector and by_ray.meta.sentence_vectors == "lower"
    assert 0 < len(by_ray.sentence_vectors) == len(local.sentence_vectors)
    np.testing.assert_allclose(np.asarray(by_ray.sentence_vectors), np.asarray(local.sentence_vectors), atol=1e-5)
    from hmde.io.representation_parquet import COLUMNS, METADATA, read_info

    shard = next((tmp_path / "ray.vectors").glob("*.parquet"))
    assert pq.read_schema(shard).names == [*COLUMNS, METADATA] and read_info(shard).dim == 64  # a representation file
    capsys.readouterr()
    for folder in ("ray", "local"):
        assert main(["search", str(tmp_path / folder), "The cat sleeps", "--json", "--device", "cpu"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    ray_hits, local_hits = out[:6], out[6:]
    assert [(h["doc_id"], h["best_sentence"]) for h in ray_hits] == [(h["doc_id"], h["best_sentence"]) for h in local_hits]
    for a, b in zip(ray_hits, local_hits):
        assert a["score"] == pytest.approx(b["score"], abs=1e-4)
        assert a["sentence_score"] == pytest.approx(b["sentence_score"], abs=1e-4)
    # --add streams a new folder of shards onto the index; an id already there is refused
    write_shards(tmp_path / "more", n_shards=3, per_shard=3)
    (tmp_path / "more" / "shard-0.jsonl.gz").unlink()
    (tmp_path / "more" / "shard-1.jsonl.gz").unlink()
    assert main(["index", "build", str(hmde_dir), str(tmp_path / "more"), "-o", str(tmp_path / "ray"), "--add",
                 "--vectors-dir", str(tmp_path / "more.vectors"), *ray_args]) == 0
    assert DocumentIndex.open(tmp_path / "ray").doc_ids() == [d["doc_id"] for d in docs] + ["d6", "d7", "d8"]
    assert main(["index", "build", str(hmde_dir), str(tmp_path / "more"), "-o", str(tmp_path / "ray"), "--add",
                 "--vectors-dir", str(tmp_path / "more.vectors"), *ray_args]) == 2
    assert "'d6' is already in the index" in capsys.readouterr().err


E5_DOCS = [{"doc_id": "tax", "text": "Η κυβέρνηση μειώνει τους φόρους. Ο προϋπολογισμός παρουσιάστηκε χθες.", "lang": "ell"},
           {"doc_id": "match", "text": "Timu ilishinda fainali. Mashabiki walisherehekea usiku kucha.", "lang": "swh"},
           {"doc_id": "cat", "text": "Die Katze schläft auf dem Sofa. Draußen regnet es.", "lang": "deu"}]


@pytest.mark.parametrize("name,method", [("multilingual-e5-small", "mean"), ("hmde-e5", "hmde")])
def test_e5_models_by_name_with_ray_equal_the_local_encode(ray_local, e5_folder, tmp_path, name, method):
    """Issue 26: the wheel-based lower encoder runs in Ray actors like any other, by its name; its
    prompts reach the actors (queries take ``query: ``; documents whatever the folder declares, as locally)."""
    (tmp_path / "in").mkdir()
    with gzip.open(tmp_path / "in" / "shard-0.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in E5_DOCS)
    common = ["--method", method, "--no-progress", "--device", "cpu"]
    assert main(["encode", name, str(tmp_path / "in"), "-o", str(tmp_path / "vec"), "--engine", "ray",
                 "--ray-actors", "1", "--ray-cpus-per-actor", "0.5", *common]) == 0
    # Ray's actors run PyTorch; locally, hmde-e5's default on a CPU is its int8 graph: compared with PyTorch's
    assert main(["encode", name, str(tmp_path / "in" / "shard-0.jsonl.gz"), "-o", str(tmp_path / "local.npy"),
                 "--backend", "torch", *common]) == 0
    ids, vectors = read_vectors(tmp_path / "vec")
    assert ids == [d["doc_id"] for d in E5_DOCS] and vectors.shape == (3, 384)
    np.testing.assert_allclose(vectors, np.load(tmp_path / "local.npy"), atol=1e-5)


def test_an_actor_without_a_cache_of_its_own_uses_the_drivers(hmde_dir, tmp_path, monkeypatch):
    """Ray workers keep the environment of ``ray.init``: one that names no HMDE_CACHE would build the
    wheel-based e5 folder again under ~/.cache; the driver hands its cache folder to each actor, which
    takes it only when its own environment names none."""
    spec = asdict(spec_for(hmde_dir))
    monkeypatch.delenv("HMDE_CACHE", raising=False)
    RayEncoder(spec, "cpu", 1, cache=str(tmp_path / "driver-cache"))
    assert os.environ["HMDE_CACHE"] == str(tmp_path / "driver-cache")
    monkeypatch.setenv("HMDE_CACHE", str(tmp_path / "own"))
    RayEncoder(spec, "cpu", 1, cache=str(tmp_path / "driver-cache"))
    assert os.environ["HMDE_CACHE"] == str(tmp_path / "own")
