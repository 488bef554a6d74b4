"""Two `measure collective --out` runs of the same file at once: both runs' rows land (issue 12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.slow
def test_two_concurrent_runs_into_one_out_file_lose_nothing(tmp_path):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    out = tmp_path / "same.json"
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "tierwise", "measure", "collective", "--sizes", "4KiB:32KiB", "--iters", "2",
            "--warmup", "1", "--ranks", "2", "--out", str(out)]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    rows = json.loads(out.read_text())
    runs = {r["run"] for r in rows}
    assert len(runs) == 2
    for run in runs:
        assert sorted(r["size_bytes"] for r in rows if r["run"] == run) == [4096, 8192, 16384, 32768]
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]  # no temporary file left

    from tierwise.measure.calibrate import calibrate

    tier = calibrate([str(out)]).document["fitted"]["scale_up"]  # the latest run is fitted, no --select needed
    assert tier["num_ranks"] == 2
