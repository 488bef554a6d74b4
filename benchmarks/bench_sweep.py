"""Wall time of a 1,000-point sweep (examples/sweep/grid-1000.yaml, estimate points), killed with SIGKILL
mid-run and resumed, and of one ``sweep show`` query over the results (prints the figures).

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_sweep.py [--workers 1 2] [--kill-after-parts 5]``.
Each configuration runs the whole grid into a fresh directory (uninterrupted), then again killed after
``--kill-after-parts`` part files and resumed; it reports the wall times, the points the resume skipped
and ran, and checks that every point is in the results exactly once. The machines are shared: the wall time
is a figure for the docs, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "examples" / "sweep" / "grid-1000.yaml"


def _cmd(out: Path, workers: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tierwise", "sweep", "run", str(GRID), "--out", str(out), "--workers",
            str(workers), "--batch-size", "25", "--json", *extra]


def _ids(out: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [r["point_id"] for f in sorted(out.glob("part-*.parquet"))
            for r in pq.read_table(f, columns=["point_id"]).to_pylist()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--kill-after-parts", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    from tierwise.sweep import load_grid

    expected = sorted(p.id for p in load_grid(str(GRID)))
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        for workers in args.workers:
            full = tmp / f"full-{workers}"
            t0 = time.perf_counter()
            subprocess.run(_cmd(full, workers), env=env, check=True, capture_output=True)
            t_full = time.perf_counter() - t0
            assert sorted(_ids(full)) == expected
            killed = tmp / f"killed-{workers}"
            t0 = time.perf_counter()
            proc = subprocess.Popen(_cmd(killed, workers), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while len(list(killed.glob("part-*.parquet"))) < args.kill_after_parts and proc.poll() is None:
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            t_killed = time.perf_counter() - t0
            on_disk = len(_ids(killed))
            t0 = time.perf_counter()
            res = subprocess.run(_cmd(killed, workers), env=env, check=True, capture_output=True, text=True)
            t_resume = time.perf_counter() - t0
            summary = json.loads(res.stdout)
            ids = _ids(killed)
            assert sorted(ids) == expected, "a point was lost or duplicated"
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tierwise", "sweep", "show", str(killed), "--json", "--query",
                            "SELECT cluster, num_gpus, max(tokens_per_s) FROM results GROUP BY ALL"],
                           env=env, check=True, capture_output=True)
            t_show = time.perf_counter() - t0
            print(f"workers {workers}: 1,000 points uninterrupted {t_full:.1f} s; killed (SIGKILL) after "
                  f"{t_killed:.1f} s with {on_disk} points on disk; resume skipped {summary['already_done']} and ran "
                  f"{summary['ran']} in {t_resume:.1f} s; {len(ids)} rows, {len(set(ids))} distinct (expected 1,000); "
                  f"sweep show query {t_show:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
