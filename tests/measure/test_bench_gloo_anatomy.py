"""The gloo anatomy benchmark runs end to end (2 ranks, one small size) and prints its table and ratios."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gloo_anatomy.py"


@pytest.mark.slow
def test_anatomy_prints_every_part_and_the_ratios():
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "256KiB", "--iters", "2", "--rounds", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.strip().startswith("size"))
    for part in ("AR", "AG", "BC", "XCH", "ONE", "CPY", "C/CPY", "BC/XCH"):
        assert part in header.split()
    row = next(line for line in lines if line.strip().startswith("0.25Mi"))
    times = [float(v) for v in row.split()[1:7]]
    assert all(t > 0 for t in times), row  # every part was timed
    assert lines[-1].startswith("medians over sizes: C/CPY ")
