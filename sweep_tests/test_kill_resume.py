"""A 1,000-point sweep killed with SIGKILL mid-run, then rerun: every point in the results exactly once.

Slow (tens of seconds on two cores), so it runs in its own CI step (.ci/sweep-ray), not in the unit suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from tierwise.sweep import load_grid
from tierwise.sweep.store import part_files

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "examples" / "sweep" / "grid-1000.yaml"


def _sweep(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "tierwise", "sweep", "run", str(GRID), "--out", str(out),
                             "--batch-size", "25", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path):
    points = load_grid(str(GRID))
    assert len(points) == 1000
    out = tmp_path / "res"
    proc = _sweep(out, "--workers", "2")
    deadline = time.monotonic() + 300
    while len(part_files(out)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be killed; make the grid bigger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # the pool's workers die with their parent's pipe; give them a moment
    time.sleep(1.0)
    written = [r for f in part_files(out) for r in pq.read_table(f, columns=["point_id"]).to_pylist()]
    assert 0 < len(written) < 1000  # killed mid-run, with finished batches on disk
    assert len({r["point_id"] for r in written}) == len(written)
    resumed = _sweep(out, "--workers", "2", "--json")
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr.decode()[-2000:]
    import json

    summary = json.loads(stdout)
    ids = [r["point_id"] for f in part_files(out) for r in pq.read_table(f, columns=["point_id"]).to_pylist()]
    assert sorted(ids) == sorted(p.id for p in points)  # every point, exactly once
    assert summary["already_done"] >= len(written) - 0 and summary["already_done"] + summary["ran"] == 1000
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".tierwise-")]
    assert len(leftovers) <= 1  # at most the temporary file of the batch being written at the kill
