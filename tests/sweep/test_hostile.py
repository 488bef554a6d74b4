"""``tierwise sweep`` against hostile use (issue 32): the user's SQL is fenced and bounded, one point is one
row whatever its spelling or however runs overlap, and files tierwise did not make are never replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

import pyarrow.parquet as pq  # noqa: E402

from tierwise.cli import main  # noqa: E402
from tierwise.sweep import SweepError, grid_from_mapping, run_sweep  # noqa: E402
from tierwise.sweep import query as query_module  # noqa: E402
from tierwise.sweep.query import query  # noqa: E402
from tierwise.sweep.store import part_files, prepare_out  # noqa: E402

GRID = {"kind": "estimate", "model": "llama3.1-8b", "cluster": "dgx-h100", "gpus": [16, 32], "plan": {"tp": 8}}


def _rows(out) -> list[dict]:
    return [r for f in part_files(out) for r in pq.read_table(f).to_pylist()]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = prepare_out(str(tmp_path_factory.mktemp("sweep") / "res"))
    run_sweep(grid_from_mapping(GRID), out)
    return out


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("sql", "word"), [
    ("COPY (SELECT 1) TO 'x.csv'", "COPY"),
    ("COPY (SELECT 2 AS point_id) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)", "COPY"),
    ("ATTACH 'y.db' AS y", "ATTACH"),
    ("INSTALL httpfs", "INSTALL"),
    ("LOAD httpfs", "LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("SELECT 1; DROP VIEW results", "2 statements"),
    ("EXPORT DATABASE 'dump'", "EXPORT"),
    ("PRAGMA version", "PRAGMA"),
])
def test_a_query_that_would_write_attach_or_load_is_refused_and_nothing_changes(results, sql, word):
    before = _listing(results.parent)
    with pytest.raises(SweepError, match=word):
        query(str(results), sql.replace("{part}", str(part_files(results)[0])))
    assert _listing(results.parent) == before


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_text('/etc/hostname')",
])
def test_a_select_cannot_read_files_outside_the_results(results, sql):
    with pytest.raises(SweepError, match="disabled|Permission|does not exist"):
        query(str(results), sql)


def test_a_huge_cell_is_cut_and_a_huge_answer_stops(results, monkeypatch):
    doc = query(str(results), "SELECT repeat('x', 1000000) AS big")
    assert len(doc["rows"][0][0]) == query_module.MAX_CELL_CHARS and doc["rows"][0][0].endswith("...")
    monkeypatch.setattr(query_module, "MAX_RESULT_CHARS", 50_000)
    doc = query(str(results), "SELECT repeat('y', 5000) FROM range(1000)")
    assert doc["truncated"] and len(doc["rows"]) < 1000


def test_a_long_query_is_stopped_with_one_line(results):
    with pytest.raises(SweepError, match="ran past 0.5 s"):
        query(str(results), "SELECT count(*) FROM range(100000000000) a, range(100) b", timeout_s=0.5)


def test_the_cli_prints_one_line_for_a_refused_query(results, capsys):
    assert main(["sweep", "show", str(results), "--query", "COPY (SELECT 1) TO 'x.csv'"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "COPY" in err and "read-only" in err


def test_one_point_spelled_several_ways_is_one_point():
    spellings = [
        {"kind": "simulate", "topology": "fat-tree", "pattern": p, "size": s, "routing": r, "fail_links": f}
        for p, s, r, f in [("all-reduce", "1GB", "adaptive", "0"), ("allreduce", "1 GB", "ADAPTIVE", 0),
                           ("All_Reduce", 1_000_000_000, "adaptive", "0.0"), ("all-reduce", "1e9", "adaptive", 0.0)]
    ]
    ids = {grid_from_mapping(g)[0].id for g in spellings}
    assert len(ids) == 1
    names = [{**GRID, "model": m, "cluster": c} for m, c in [("llama3.1-8b", "dgx-h100"),
                                                                ("Llama3.1-8B", " DGX-H100 ")]]
    assert len({p.id for g in names for p in grid_from_mapping(g)}) == 2  # two gpus values, not four
    assert len(grid_from_mapping({**GRID, "model": ["llama3.1-8b", "LLAMA3.1-8B"]})) == 2


def test_overlapping_runs_store_each_point_once(tmp_path):
    from tierwise.sweep import shard_points

    pts = grid_from_mapping({**GRID, "gpus": [8, 16, 32, 64, 128, 256]})
    out = prepare_out(str(tmp_path / "res"))
    shard = next((i, 3) for i in (1, 2, 3) if 0 < len(shard_points(pts, (i, 3))) < len(pts))
    run_sweep(pts, out, shard=shard)
    # a run of the whole grid whose start missed shard 1's parts (it began before they were written)
    from tierwise.sweep import run as sweep_run

    real = sweep_run.finished_ids
    calls = []

    def stale(path, seen=None):
        calls.append(1)
        return set() if len(calls) == 1 else real(path, seen)

    first_half = len(_rows(out))
    assert 0 < first_half < len(pts)
    sweep_run.finished_ids = stale
    try:
        doc = run_sweep(pts, out, shard=(1, 1))
    finally:
        sweep_run.finished_ids = real
    assert doc["ran"] == len(pts)  # it ran every point again...
    assert doc["already_stored_by_another_run"] == first_half  # ...but stored only the new ones
    ids = [r["point_id"] for r in _rows(out)]
    assert sorted(ids) == sorted(p.id for p in pts)  # one row per point


def test_the_results_view_shows_one_row_per_point_even_if_a_point_was_stored_twice(results, tmp_path):
    import shutil

    copy = tmp_path / "res"
    shutil.copytree(results, copy)
    first = part_files(copy)[0]
    shutil.copy(first, first.with_name(first.name.replace("part-", "part-z")))
    doc = query(str(copy), "SELECT count(*), count(DISTINCT point_id) FROM results")
    assert doc["rows"][0][0] == doc["rows"][0][1] == 2
    from tierwise.sweep.query import summary

    assert summary(str(copy))["duplicate_rows"] == 2


def test_a_users_sweep_json_is_never_replaced(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "sweep.json").write_text('{"my": "notes"}\n')
    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 16\nplan: {tp: 8}\n")
    assert main(["sweep", "run", str(grid), "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "sweep.json" in err and err.count("\n") == 1
    assert (folder / "sweep.json").read_text() == '{"my": "notes"}\n'
    assert sorted(p.name for p in folder.iterdir()) == ["sweep.json"]
    os.remove(folder / "sweep.json")
    os.symlink(tmp_path / "elsewhere.json", folder / "sweep.json")
    assert main(["sweep", "run", str(grid), "--out", str(folder)]) == 2
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_rerun_over_tierwises_own_manifest_goes_on(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("kind: estimate\nmodel: llama3.1-8b\ncluster: dgx-h100\ngpus: 16\nplan: {tp: 8}\n")
    out = tmp_path / "res"
    assert main(["sweep", "run", str(grid), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    assert main(["sweep", "run", str(grid), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["already_done"] == 1


def test_a_lock_name_taken_by_a_link_is_refused(tmp_path):
    out = prepare_out(str(tmp_path / "res"))
    target = tmp_path / "precious"
    target.write_text("keep")
    os.symlink(target, out / ".lock-shard-1-of-1")
    with pytest.raises(SweepError, match="not a lock file"):
        run_sweep(grid_from_mapping(GRID), out)
    assert target.read_text() == "keep"


def test_an_unreachable_ray_address_is_refused_within_the_bound():
    import socket
    import time

    from tierwise.sweep.run import check_ray_address

    with socket.socket() as s:  # a port nothing listens on: bound, then closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(SweepError, match=r"cannot be reached .* within 0.5 s"):
        check_ray_address(f"127.0.0.1:{port}", timeout_s=0.5)
    with pytest.raises(SweepError, match="cannot be reached"):
        check_ray_address(f"ray://127.0.0.1:{port}", timeout_s=0.5)
    assert time.monotonic() - start < 5
    with pytest.raises(SweepError, match="not host:port"):
        check_ray_address("nowhere", timeout_s=0.5)
    for fine in ("", "auto", "local"):
        check_ray_address(fine)
    with socket.socket() as server:  # something answering is accepted
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_ray_address(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=2)
