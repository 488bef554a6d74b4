"""The torch.distributed runner: size parsing, bad input, correctness column, interruption."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tierwise.errors import MeasureError
from tierwise.measure.bench import BenchConfig, parse_sizes

SRC = Path(__file__).resolve().parents[2] / "src"


def test_parse_sizes_ranges_lists_and_errors():
    assert parse_sizes("1KiB:8KiB") == (1024, 2048, 4096, 8192)
    assert parse_sizes("1KiB:16KiB", factor=4) == (1024, 4096, 16384)
    assert parse_sizes("1MiB,3MiB") == (2**20, 3 * 2**20)
    assert parse_sizes("8MiB") == (8 * 2**20,)
    with pytest.raises(MeasureError, match="backwards; write it as 1KiB:256MiB"):
        parse_sizes("256MiB:1KiB")
    with pytest.raises(MeasureError, match="empty sweep"):
        parse_sizes(" ")
    with pytest.raises(MeasureError, match="--factor 1 is out of range; use 1 < --factor <= 1,024"):
        parse_sizes("1KiB:1MiB", factor=1)
    with pytest.raises(MeasureError, match="--factor nan is not a finite number"):
        parse_sizes("1KiB:1MiB", factor=float("nan"))
    with pytest.raises(MeasureError, match="is 110,903,555 sizes; a sweep has at most 64"):
        parse_sizes("1KiB:64MiB", factor=1.0000001)
    with pytest.raises(MeasureError, match="--sizes end '2TiB' is out of range; use --sizes end > 0 and <= 1 TiB"):
        parse_sizes("1B:2TiB")
    with pytest.raises(MeasureError, match="less than one byte"):
        parse_sizes("0.4B")
    with pytest.raises(MeasureError, match="lists 65 sizes; a sweep has at most 64"):
        parse_sizes(",".join(["1KiB"] * 65))
    assert len(parse_sizes("1B:1TiB")) == 41


def test_config_rejects_empty_sweeps_and_unknown_backends():
    with pytest.raises(MeasureError, match="empty sweep"):
        BenchConfig(ops=("all-reduce",), sizes_bytes=())
    with pytest.raises(MeasureError, match="unknown backend"):
        BenchConfig(ops=("all-reduce",), sizes_bytes=(1024,), backend="mpi")


@pytest.mark.slow
def test_every_collective_is_correct_on_gloo():
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    from tierwise.measure.bench import run_collectives

    ops = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send-recv")
    results = run_collectives(BenchConfig(ops=ops, sizes_bytes=(4096, 65536), iters=2, warmup=1), 2)
    for op in ops:
        rows = results[op]
        assert [r["size_bytes"] for r in rows] == [4096, 65536]
        assert all(r["wrong"] == 0 for r in rows), rows
    assert "not fitted" in results["reduce-scatter"][0]["note"]


@pytest.mark.slow
def test_rounds_interleave_the_ops_of_a_size_and_report_the_median_round(tmp_path):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    from tierwise.measure.bench import run_collectives

    out = tmp_path / "r.json"
    config = BenchConfig(ops=("all-reduce", "broadcast"), sizes_bytes=(4096, 65536), iters=2, warmup=1, rounds=3,
                         out=str(out))
    results = run_collectives(config, 2)
    for op in ("all-reduce", "broadcast"):
        rows = results[op]
        assert [r["size_bytes"] for r in rows] == [4096, 65536]
        for r in rows:
            assert r["rounds"] == 3 and len(r["time_rounds_s"]) == 3 and r["wrong"] == 0
            assert r["time_s"] == sorted(r["time_rounds_s"])[1]
            assert r["busbw_bytes_per_s"] == pytest.approx(r["size_bytes"] / r["time_s"])  # n = 2: factor 1
            # the host memory probe ran before each of the 3 rounds; a DRAM copy costs 5 ps-5 ns per byte
            assert r["host_memory_probes"] == 3 and 5e-12 < r["host_memory_s_per_byte"] < 5e-9
    assert [(r["op"], r["size_bytes"]) for r in json.loads(out.read_text())] == [
        ("all-reduce", 4096), ("all-reduce", 65536), ("broadcast", 4096), ("broadcast", 65536)]


@pytest.mark.slow
def test_an_interrupted_run_keeps_its_completed_sizes(tmp_path):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    out = tmp_path / "partial.json"
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        # 200 iterations: the large sizes take minutes, so the sweep cannot end before the interrupt even when
        # this test process is starved on a loaded host (with 20 it once finished, exit 0, before the SIGINT)
        [sys.executable, "-m", "tierwise", "measure", "collective", "--sizes", "4KiB:256MiB", "--iters", "200",
         "--ranks", "2", "--out", str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a user's Ctrl-C reaches a command whose SIGINT is at its default; a test runner started as a background
        # job without job control (nohup ... &) inherits SIGINT ignored, and Python then keeps it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 180  # two spawned ranks importing torch on a loaded 2-core host
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and len(json.loads(out.read_text())) >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130
    rows = json.loads(out.read_text())
    assert 2 <= len(rows) < 17  # 4 KiB .. 256 MiB is 17 sizes
    assert all(r["time_s"] > 0 and r["wrong"] == 0 for r in rows)
    assert "completed sizes are in" in stderr  # stdout stays empty (no partial table, no note in --json)
    assert stdout == ""


@pytest.mark.slow
def test_under_torchrun_it_joins_the_launchers_world_and_only_rank_0_prints(tmp_path):
    pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port),
         "-m", "tierwise", "measure", "collective", "--sizes", "4KiB:16KiB", "--iters", "2", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)  # exactly one JSON document: rank 1 printed nothing
    assert doc["document"] == "measure-collective"
    rows = doc["rows"]
    assert [r["size_bytes"] for r in rows] == [4096, 8192, 16384]
    assert all(r["num_ranks"] == 2 and r["ranks_per_node"] == 2 and r["wrong"] == 0 for r in rows)
