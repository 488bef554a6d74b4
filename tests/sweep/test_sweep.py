"""``tierwise sweep``: grid expansion and ids, shards, resume (nothing lost or duplicated), pluggable kinds, the
CLI's one-line errors and ``sweep show``. The kill -9 test on 1,000 points and the Ray executor test are in
sweep_tests/ (CI step .ci/sweep-ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

import pyarrow.parquet as pq  # noqa: E402

from tierwise.cli import main  # noqa: E402
from tierwise.sweep import SweepError, grid_from_mapping, parse_shard, run_sweep, shard_points  # noqa: E402
from tierwise.sweep.kinds import KINDS, PointKind, register_kind  # noqa: E402
from tierwise.sweep.store import part_files, prepare_out  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

ESTIMATE = {"kind": "estimate", "model": ["llama3.1-8b", "llama2-13b"], "cluster": "dgx-h100",
            "gpus": [16, 32, 64], "plan": [{"tp": 8, "pp": 1}, {"tp": 4, "pp": 2}]}


def _rows(out) -> list[dict]:
    return [r for f in part_files(out) for r in pq.read_table(f).to_pylist()]


def test_grid_expands_to_the_product_with_stable_distinct_ids():
    pts = grid_from_mapping(ESTIMATE)
    assert len(pts) == 2 * 3 * 2
    assert len({p.id for p in pts}) == len(pts)
    assert [p.id for p in grid_from_mapping(json.loads(json.dumps(ESTIMATE)))] == [p.id for p in pts]
    assert pts[0].params["global_batch"] == 1024 and pts[0].params["seq"] == 8192  # defaults filled, then hashed
    # the same point written with its default spelled out is the same point
    spelled = grid_from_mapping({**ESTIMATE, "global_batch": 1024})
    assert {p.id for p in spelled} == {p.id for p in pts}
    other = grid_from_mapping({**ESTIMATE, "seq": 4096})
    assert not {p.id for p in other} & {p.id for p in pts}
    # two studies naming the same point run it once
    both = grid_from_mapping({"studies": [ESTIMATE, ESTIMATE]})
    assert len(both) == len(pts)


def test_shards_partition_the_points():
    pts = grid_from_mapping(ESTIMATE)
    shards = [shard_points(pts, (i, 3)) for i in (1, 2, 3)]
    ids = [p.id for s in shards for p in s]
    assert sorted(ids) == sorted(p.id for p in pts) and len(set(ids)) == len(ids)
    assert parse_shard("2/3") == (2, 3) and parse_shard(None) == (1, 1)
    for bad in ("3/2", "0/2", "1/0", "x", "1/2/3", "-1/2"):
        with pytest.raises(SweepError):
            parse_shard(bad)


@pytest.mark.parametrize("grid,word", [
    ({**ESTIMATE, "model": ["llama3.1-8b", "no-such-model"]}, "no-such-model"),
    ({**ESTIMATE, "kind": "estimat"}, "estimat"),
    ({**ESTIMATE, "gpu": [8]}, "gpu"),
    ({**ESTIMATE, "gpus": []}, "gpus"),
    ({**ESTIMATE, "gpus": [0]}, "gpus"),
    ({**ESTIMATE, "cluster": {"base": "dgx-h100", "nic_bandwith": "1 Gb/s"}}, "nic_bandwith"),
    ({**ESTIMATE, "cluster": {"base": "dgx-z900"}}, "dgx-z900"),
    ({"kind": "plan", "model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": 8, "objective": "speed"}, "speed"),
    ({"kind": "plan", "model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": 8, "constraints": {"max_qq": 2}},
     "max_qq"),
    ({"kind": "simulate", "topology": {"family": "fat-tre", "gpus": 64}, "pattern": "all-reduce"}, "fat-tre"),
    ({"kind": "simulate", "topology": "fat-tree", "pattern": "all-reduc"}, "all-reduc"),
    ({"studies": []}, "studies"),
])
def test_a_bad_grid_is_refused_before_any_work(grid, word):
    with pytest.raises(Exception) as info:
        grid_from_mapping(grid)
    from tierwise.errors import TierwiseError

    assert isinstance(info.value, TierwiseError)
    assert word in str(info.value)


def test_rerun_skips_finished_points_and_an_interrupted_run_keeps_what_finished(tmp_path):
    pts = grid_from_mapping(ESTIMATE)
    out = prepare_out(str(tmp_path / "res"))
    seen = []

    def stop_after_five(done, total):
        seen.append(done)
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(pts, out, batch_size=2, progress=stop_after_five)
    first = _rows(out)
    assert len(first) == 5  # 2 + 2 written as batches, the 5th flushed on the way out
    again = run_sweep(pts, out, batch_size=2)
    assert again["already_done"] == 5 and again["ran"] == len(pts) - 5
    rows = _rows(out)
    assert sorted(r["point_id"] for r in rows) == sorted(p.id for p in pts)  # every point exactly once
    assert run_sweep(pts, out)["ran"] == 0
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["tokens_per_s"] > 0 and json.loads(r["result"])["step_time_s"] > 0 for r in ok)


def test_shards_into_one_directory_make_the_whole_grid(tmp_path):
    pts = grid_from_mapping(ESTIMATE)
    out = prepare_out(str(tmp_path / "res"))
    for i in (1, 2):
        run_sweep(pts, out, shard=(i, 2))
    assert sorted(r["point_id"] for r in _rows(out)) == sorted(p.id for p in pts)


def test_local_workers_give_the_same_rows_as_one_process(tmp_path):
    pts = grid_from_mapping(ESTIMATE)
    a, b = prepare_out(str(tmp_path / "a")), prepare_out(str(tmp_path / "b"))
    run_sweep(pts, a, workers=1)
    run_sweep(pts, b, workers=2)
    key = lambda r: (r["point_id"], r["status"], r["tokens_per_s"], r["plan"])  # noqa: E731
    assert sorted(map(key, _rows(a))) == sorted(map(key, _rows(b)))


def test_a_refused_point_is_a_row_with_its_reason_and_the_sweep_goes_on(tmp_path):
    grid = {**ESTIMATE, "plan": [{"tp": 8, "pp": 1}, {"tp": 3, "pp": 1}]}  # tp 3 does not divide 64 heads / GPUs
    out = prepare_out(str(tmp_path / "res"))
    summary = run_sweep(grid_from_mapping(grid), out)
    rows = _rows(out)
    bad = [r for r in rows if r["status"] == "error"]
    assert bad and summary["status_counts"]["error"] == len(bad) and summary["status_counts"]["ok"] > 0
    assert all(r["error"] and "tp" in r["error"] for r in bad)


def test_plan_and_simulate_points(tmp_path):
    grid = {"studies": [
        {"kind": "plan", "model": "llama3.1-8b", "gpus": [16],
         "cluster": ["dgx-h100", {"base": "dgx-h100", "name": "slow-ib", "nic_bandwidth": "100 Gb/s"}],
         "constraints": {"max_micro_batch_size": 1, "max_vpp": 1}},
        {"kind": "plan", "model": "llama3.1-405b", "cluster": "dgx-h100", "gpus": 8},  # does not fit
        {"kind": "simulate", "topology": {"family": "fat-tree", "gpus": 64, "radix": 16, "tiers": 2},
         "pattern": ["all-reduce", "all-to-all"], "size": "64MB", "fail_links": ["0", "2"]},
    ]}
    out = prepare_out(str(tmp_path / "res"))
    run_sweep(grid_from_mapping(grid), out)
    rows = {(r["kind"], r["model"], r["cluster"], r["pattern"], r["fail_links"]): r for r in _rows(out)}
    fast = rows[("plan", "llama3.1-8b", "dgx-h100", None, None)]
    slow = rows[("plan", "llama3.1-8b", "slow-ib", None, None)]
    assert fast["status"] == slow["status"] == "ok" and fast["tokens_per_s"] > slow["tokens_per_s"]
    big = rows[("plan", "llama3.1-405b", "dgx-h100", None, None)]
    assert big["status"] == "no_fit" and big["tokens_per_s"] is None
    sims = [r for r in rows.values() if r["kind"] == "simulate"]
    assert len(sims) == 4 and all(r["time_s"] > 0 and r["num_gpus"] == 64 for r in sims)
    failed = [r for r in sims if r["fail_links"] == "2"]
    assert all(r["degradation"] is not None and r["degradation"] >= 1.0 - 1e-9 for r in failed)


def test_a_new_kind_plugs_in(tmp_path):
    kind = PointKind(name="square", parameters={"x": None}, columns={"x_squared": "int64"},
                     run=lambda p, parameters: ({"x_squared": p["x"] ** 2}, {"x": p["x"], "x_squared": p["x"] ** 2}),
                     normalizers={"x": lambda v, w: int(v)})
    register_kind(kind)
    try:
        out = prepare_out(str(tmp_path / "res"))
        run_sweep(grid_from_mapping({"kind": "square", "x": [1, 2, 3]}), out)
        assert sorted(r["x_squared"] for r in _rows(out)) == [1, 4, 9]
    finally:
        KINDS.pop("square")


def test_a_kind_written_for_run_params_alone_still_plugs_in(tmp_path):
    """The plug-in signature before the model's parameters were passed (``run(params)``) keeps working."""
    kind = PointKind(name="cube", parameters={"x": None}, columns={"x_cubed": "int64"},
                     run=lambda p: ({"x_cubed": p["x"] ** 3}, {"x": p["x"], "x_cubed": p["x"] ** 3}),
                     normalizers={"x": lambda v, w: int(v)})
    register_kind(kind)
    try:
        out = prepare_out(str(tmp_path / "res"))
        run_sweep(grid_from_mapping({"kind": "cube", "x": [2, 3]}), out)
        assert sorted(r["x_cubed"] for r in _rows(out)) == [8, 27]
    finally:
        KINDS.pop("cube")


def test_cli_run_and_show(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: [16, 32]\nplan: {tp: 8}\n")
    out = tmp_path / "res"
    assert main(["sweep", "run", str(grid), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ran"] == 2 and doc["status_counts"]["ok"] == 2
    assert main(["sweep", "run", str(grid), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["already_done"] == 2
    assert main(["sweep", "show", str(out), "--json", "--query",
                 "SELECT num_gpus, tokens_per_s FROM results ORDER BY num_gpus"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["summary"]["points"] == 2 and shown["summary"]["duplicate_rows"] == 0
    assert [r[0] for r in shown["query"]["rows"]] == [16, 32] and shown["query"]["rows"][1][1] > shown["query"]["rows"][0][1]
    assert main(["sweep", "show", str(out)]) == 0
    assert "estimate" in capsys.readouterr().out
    # any DuckDB type comes back as plain JSON (DECIMAL, TIMESTAMP, LIST, STRUCT, BLOB, INTERVAL, NaN)
    assert main(["sweep", "show", str(out), "--json", "--query",
                 "SELECT 1.25::DECIMAL(4,2) AS d, TIMESTAMP '2026-01-02 03:04:05' AS t, [1, 2] AS l, {'a': 1} AS s, "
                 "'x'::BLOB AS b, INTERVAL 1 DAY AS i, 'nan'::DOUBLE AS n"]) == 0
    row = json.loads(capsys.readouterr().out)["query"]["rows"][0]
    assert row[:5] == [1.25, "2026-01-02T03:04:05", [1, 2], {"a": 1}, "78"] and isinstance(row[5], str)
    assert row[6] is None


@pytest.mark.parametrize("args,word", [
    (["--shard", "3/2"], "3/2"),
    (["--workers", "0"], "--workers"),
    (["--executor", "slurm"], "slurm"),
])
def test_cli_bad_options_are_one_line(tmp_path, capsys, args, word):
    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 16\nplan: {tp: 8}\n")
    assert main(["sweep", "run", str(grid), "--out", str(tmp_path / "res"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:") and word in err
    assert not (tmp_path / "res").exists()  # refused before any work


def test_cli_out_that_is_a_file_and_a_bad_query(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: nope-model\ncluster: dgx-h100\ngpus: 16\nplan: {tp: 8}\n")
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["sweep", "run", str(grid), "--out", str(tmp_path / "res")]) == 2
    assert "nope-model" in capsys.readouterr().err and not (tmp_path / "res").exists()
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 16\nplan: {tp: 8}\n")
    assert main(["sweep", "run", str(grid), "--out", str(afile)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["sweep", "run", str(grid), "--out", str(tmp_path / "res")]) == 0
    capsys.readouterr()
    assert main(["sweep", "show", str(tmp_path / "res"), "--query", "SELECT nope FROM results"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err
    assert main(["sweep", "show", str(tmp_path / "empty-or-missing")]) == 2


def test_the_local_executor_needs_no_ray_and_ray_without_ray_is_one_line(tmp_path):
    import os
    import subprocess
    import sys

    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: [16, 32]\nplan: {tp: 8}\n")
    no_ray = ("import sys; sys.modules['ray'] = None; from tierwise.cli import main; "  # import ray -> ImportError
              "sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    run = [sys.executable, "-c", no_ray, "sweep", "run", str(grid), "--out", str(tmp_path / "res")]
    ok = subprocess.run([*run, "--workers", "2", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status_counts"]["ok"] == 2
    bad = subprocess.run([*run, "--executor", "ray"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "tierwise[ray]" in bad.stderr
