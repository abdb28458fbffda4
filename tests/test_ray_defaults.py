"""``--engine ray`` with every Ray setting left at its default finishes on 1- and 2-CPU machines.

Issue 15, item 7: the default actor pool took every CPU, so the read tasks (1 CPU each)
never started and the run hung with 0 of 4 shards done. Each run is its own process with
its own Ray (``num_cpus`` as on such a machine) and a time limit, so a hang fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'hmde[ray]')")

RUN = textwrap.dedent("""
    import sys, ray
    ray.init(num_cpus=int(sys.argv[1]), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    from hmde.cli.main import main
    sys.exit(main(["encode", sys.argv[2], sys.argv[3], "-o", sys.argv[4], "--engine", "ray", "--method", "mean",
                   "--no-progress"]))
""")


@pytest.mark.parametrize("cpus", [1, 2])
def test_ray_defaults_finish_on_small_machines(labse_dir, tmp_path, cpus):
    shards = tmp_path / "shards"
    shards.mkdir()
    for s in range(4):
        with gzip.open(shards / f"s{s}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i in range(5):
                f.write(json.dumps({"doc_id": f"d{s}-{i}", "text": "The cat sleeps. It dreams.", "lang": "en"}) + "\n")
    try:
        done = subprocess.run([sys.executable, "-c", RUN, str(cpus), str(labse_dir), str(shards), str(tmp_path / "v")],
                              capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--engine ray with default settings did not finish in 240 s on {cpus} CPU(s)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "20 documents in 4 shards" in done.stdout
