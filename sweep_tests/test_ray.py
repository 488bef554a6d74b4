"""``--executor ray`` against a local Ray instance started here (``ray.init(num_cpus=2)``): the same rows as
the local executor, and a rerun skips everything. Needs the ``ray`` extra (CI step .ci/sweep-ray)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray", reason="pip install 'tierwise[ray]'")

from tierwise.sweep import grid_from_mapping, run_sweep  # noqa: E402
from tierwise.sweep.store import part_files, prepare_out  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRID = {"studies": [
    {"kind": "estimate", "model": ["llama3.1-8b", "llama2-13b"], "cluster": ["dgx-h100", "dgx-a100"],
     "gpus": [16, 32, 64], "plan": [{"tp": 8}, {"tp": 4, "pp": 2}]},
    {"kind": "plan", "model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": [8, 16]},
    {"kind": "simulate", "topology": {"family": "fat-tree", "gpus": 64, "radix": 16, "tiers": 2},
     "pattern": ["all-reduce", "all-gather"], "size": "64MB"},
]}


@pytest.fixture(scope="module")
def local_ray():
    os.environ["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")  # for workers
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _rows(out):
    key = ("point_id", "status", "tokens_per_s", "plan", "time_s")
    return sorted(tuple(r[k] for k in key) for f in part_files(out) for r in pq.read_table(f).to_pylist())


def test_ray_executor_matches_the_local_one(local_ray, tmp_path):
    points = grid_from_mapping(GRID)
    local, remote = prepare_out(str(tmp_path / "local")), prepare_out(str(tmp_path / "ray"))
    run_sweep(points, local)
    summary = run_sweep(points, remote, executor="ray", batch_size=7)
    assert summary["ran"] == len(points) and summary["status_counts"]["ok"] == len(points)
    assert summary["part_files_written"] >= 2
    assert _rows(remote) == _rows(local)
    assert run_sweep(points, remote, executor="ray")["ran"] == 0
    pids = {r["point_id"] for f in part_files(remote) for r in pq.read_table(f).to_pylist()}
    assert len(pids) == len(points)
