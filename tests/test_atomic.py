"""tierwise.atomic: outputs checked before the work, written atomically, concurrent --out writers merged."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os

import pytest

from tierwise.atomic import check_writable, merge_rows_locked, read_rows, write_atomic
from tierwise.errors import OutputError


def test_check_writable_accepts_a_new_file_and_leaves_nothing(tmp_path):
    assert check_writable(tmp_path / "x.json") == tmp_path / "x.json"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target, needle", [
    ("missing/x.json", "does not exist"),
    ("afile/x.json", "is a file, not a directory"),
    ("adir", "is a directory"),
])
def test_check_writable_refuses_bad_places(tmp_path, target, needle):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    with pytest.raises(OutputError, match=needle):
        check_writable(tmp_path / target, "--out")


@pytest.mark.parametrize("target", ["/dev/full", "/proc/tierwise-x.json", "/sys/tierwise-x.json"])
def test_check_writable_refuses_devices_and_virtual_file_systems(target):
    with pytest.raises(OutputError, match="--html"):
        check_writable(target, "--html")


def test_write_atomic_replaces_the_target_and_keeps_no_temporary(tmp_path):
    target = tmp_path / "out.yaml"
    target.write_text("old\n")
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]


def test_a_write_failing_midway_leaves_the_old_file_and_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("the old content\n")

    def full(fd):  # the disk fills up when the data is flushed
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="no space left"):
        write_atomic(target, "x" * 100_000)
    assert target.read_text() == "the old content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_an_exception_while_rendering_leaves_nothing(tmp_path):
    def render():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_atomic(tmp_path / "r.html", render)
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_to_dev_full_is_one_error():
    with pytest.raises(OutputError, match="device"):
        write_atomic("/dev/full", "x")


def _writer(path: str, run: str, n: int) -> None:
    rows: list[dict] = []
    for i in range(n):
        rows.append({"op": "all-reduce", "size_bytes": 2 ** i, "time_s": 1e-5 * (i + 1)})
        merge_rows_locked(path, run, rows)  # rewritten after every size, as measure collective does


def test_concurrent_writers_of_one_out_file_both_land(tmp_path):
    path = str(tmp_path / "r.json")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, run, 40)) for run in ("run-a", "run-b", "run-c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = json.loads((tmp_path / "r.json").read_text())
    for run in ("run-a", "run-b", "run-c"):
        assert sorted(r["size_bytes"] for r in rows if r["run"] == run) == [2 ** i for i in range(40)]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_merging_keeps_other_runs_and_replaces_its_own(tmp_path):
    path = tmp_path / "r.json"
    merge_rows_locked(path, "a", [{"size_bytes": 1}])
    merge_rows_locked(path, "b", [{"size_bytes": 1}])
    merge_rows_locked(path, "a", [{"size_bytes": 1}, {"size_bytes": 2}])
    rows = json.loads(path.read_text())
    assert [(r["run"], r["size_bytes"]) for r in rows] == [("b", 1), ("a", 1), ("a", 2)]


def test_a_file_that_is_not_a_result_list_is_never_overwritten(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"mine": 1}')
    with pytest.raises(OutputError, match="not a tierwise result"):
        read_rows(path)
    with pytest.raises(OutputError):
        merge_rows_locked(path, "a", [{"size_bytes": 1}])
    assert path.read_text() == '{"mine": 1}'


# ---- symbolic links (issue 32): written through, never replaced by a regular file -------------------------

def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    assert check_writable(link, "--html") == link
    write_atomic(link, "new", "--html")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "real.html"]


def test_a_chain_of_links_and_a_dangling_link_are_written_at_their_end(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("sub/c")  # c does not exist yet
    write_atomic(tmp_path / "a", "x")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert (tmp_path / "sub" / "c").read_text() == "x"


def test_a_loop_of_links_and_a_link_into_a_missing_directory_are_one_line(tmp_path):
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    for call in (lambda: check_writable(tmp_path / "l1", "--out"), lambda: write_atomic(tmp_path / "l1", "x")):
        with pytest.raises(OutputError, match="loop of symbolic links"):
            call()
    (tmp_path / "far").symlink_to(tmp_path / "nowhere" / "x.yaml")
    with pytest.raises(OutputError, match="does not exist") as err:
        check_writable(tmp_path / "far", "--emit-cluster")
    assert "->" in str(err.value) and "--emit-cluster" in str(err.value)
    assert (tmp_path / "l1").is_symlink() and (tmp_path / "far").is_symlink()


def test_a_link_to_a_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "dl").symlink_to("d")
    with pytest.raises(OutputError, match="is a directory"):
        check_writable(tmp_path / "dl", "--out")


def test_merged_rows_go_through_a_link(tmp_path):
    real = tmp_path / "rows.json"
    real.write_text('[{"run": "a", "x": 1}]')
    (tmp_path / "link.json").symlink_to(real)
    merge_rows_locked(tmp_path / "link.json", "b", [{"x": 2}])
    assert (tmp_path / "link.json").is_symlink()
    assert [r["run"] for r in json.loads(real.read_text())] == ["a", "b"]
