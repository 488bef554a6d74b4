"""The results directory: a Parquet dataset of atomically written part files, read back for resume and query.

Layout of ``--out DIR``::

    DIR/part-<UTC time>-<host>-<pid>-<shard>-<n>-<random>.parquet   one per batch of finished points
    DIR/sweep.json                                        the last grid run here: its point ids (for 'show')
    DIR/.lock-shard-<i>-of-<N>                            held (flock) while a run writes shard i/N

A part file is written whole to a temporary name beside it and ``os.replace``-d into place
(:func:`tierwise.atomic.write_atomic`), so a reader (and a rerun after ``kill -9``) sees a part file
complete or not at all; the points of a batch that was not yet written are simply run again. Each point is
written by the run that ran it, in one part file; a rerun skips every id already in a part file, so no point
is written twice. Two runs of the same shard on the same directory would both run the unfinished points:
the lock refuses the second one (one line, exit 2). Different shards (a Slurm array) share the directory.

pyarrow (the optional ``sweep`` extra) writes and reads the parts; :func:`require_pyarrow` turns its absence
into one line before the work.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tierwise._version import __version__
from tierwise.atomic import check_writable, locked_dir, write_atomic
from tierwise.files import load_json, read_user_text
from tierwise.sweep.grid import SweepError
from tierwise.sweep.kinds import all_columns

__all__ = ["require_pyarrow", "prepare_out", "part_files", "finished_ids", "write_part", "shard_lock",
           "write_manifest", "read_manifest", "schema", "write_new_rows"]

PART_GLOB = "part-*.parquet"
MANIFEST = "sweep.json"


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise SweepError("tierwise sweep needs pyarrow, which is not installed; pip install 'tierwise[sweep]'") \
            from None


def prepare_out(out: str) -> Path:
    """``--out``: an existing directory, or a new one (its parent must exist); never a file."""

    p = Path(out)
    if p.exists() and not p.is_dir():
        what = "a file" if p.is_file() else "not a directory"
        raise SweepError(f"--out {out!r} is {what}; name a directory for the results (new, or the one of an "
                         "earlier run to resume it)")
    if not p.exists():
        parent = p.parent if str(p.parent) else Path(".")
        if parent.exists() and not parent.is_dir():
            raise SweepError(f"--out {out!r}: {str(parent)!r} is not a directory; name a directory under one")
        if not parent.is_dir():
            raise SweepError(f"--out {out!r}: the parent directory {str(parent)!r} does not exist; create it first "
                             "(mkdir -p)")
        try:
            p.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise SweepError(f"--out {out!r}: cannot create the directory: {exc.strerror}") from None
    _check_manifest_is_ours(p, out)
    check_writable(p / MANIFEST, "--out")
    return p


def _check_manifest_is_ours(p: Path, out: str) -> None:
    """A ``sweep.json`` already in the directory must be a manifest tierwise wrote (it is replaced each run)."""
    manifest = p / MANIFEST
    if not manifest.exists() and not manifest.is_symlink():
        return
    try:
        doc = read_manifest(p) if manifest.is_file() and not manifest.is_symlink() else None
    except SweepError:
        doc = None
    if not (isinstance(doc, dict) and isinstance(doc.get("point_ids"), list) and "grid_sha256" in doc):
        raise SweepError(f"--out {out!r} holds {MANIFEST!r}, which is not a sweep manifest tierwise wrote (a "
                         "run replaces that file); move it away or name another --out directory")


def part_files(out: str | Path) -> list[Path]:
    return sorted(Path(out).glob(PART_GLOB))


def finished_ids(out: str | Path, seen: set[str] | None = None) -> set[str]:
    """Ids of every point in the directory's part files (with ``seen``: only in the parts whose names are not
    in it, which are then added to it)."""
    import pyarrow.parquet as pq

    ids: set[str] = set()
    for f in part_files(out):
        if seen is not None:
            if f.name in seen:
                continue
            seen.add(f.name)
        try:
            col = pq.read_table(f, columns=["point_id"]).column("point_id")
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise SweepError(f"--out {str(out)!r}: part file {f.name!r} cannot be read ({type(exc).__name__}); "
                             "move it aside and rerun (its points run again)") from None
        ids.update(col.to_pylist())
    return ids


def schema():
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    return pa.schema([(name, types[t]) for name, t in all_columns().items()])


def write_part(out: str | Path, rows: list[dict[str, Any]], tag: str, seq: int) -> Path:
    """Write ``rows`` as one new part file, atomically; return its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = schema()
    table = pa.Table.from_pylist([{k: r.get(k) for k in sch.names} for r in rows], schema=sch)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    import uuid

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    # the random part keeps two runs of one process (or a reused pid on another day) from sharing a name
    path = Path(out) / f"part-{stamp}-{tag}-{seq:05d}-{uuid.uuid4().hex[:8]}.parquet"
    write_atomic(path, buf.getvalue(), "--out")
    return path


def write_new_rows(out: Path, rows: list[dict[str, Any]], tag: str, seq: int, done: set[str],
                   seen: set[str]) -> tuple[Path | None, int]:
    """Write the rows of points not yet stored as one part file; return (its path or None, rows dropped).

    Under an exclusive lock on the directory: the ids of every part not in ``seen`` (written by another run
    meanwhile) join ``done``; rows whose ``point_id`` is in ``done`` are dropped; the rest are written and
    their ids join ``done``. Two runs that overlap therefore store each point once.
    """

    with locked_dir(out):
        done.update(finished_ids(out, seen))
        keep, ids = [], set()
        for row in rows:
            if row["point_id"] not in done and row["point_id"] not in ids:
                ids.add(row["point_id"])
                keep.append(row)
        if not keep:
            return None, len(rows)
        path = write_part(out, keep, tag, seq)
        done.update(ids)  # only once written: a Ctrl-C inside write_part leaves them to the retry (run_sweep)
        seen.add(path.name)
        return path, len(rows) - len(keep)


def run_tag(shard: tuple[int, int]) -> str:
    host = "".join(c for c in socket.gethostname() if c.isalnum())[:24] or "host"
    return f"{host}-{os.getpid()}-s{shard[0]}of{shard[1]}"


@contextlib.contextmanager
def shard_lock(out: Path, shard: tuple[int, int]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``DIR/.lock-shard-i-of-N`` (refuse a second run of the same shard)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = out / f".lock-shard-{shard[0]}-of-{shard[1]}"
    try:  # never through a link, never a FIFO or device of the user's with that name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, 0o644)
        if not os.path.isfile(path):
            os.close(fd)
            raise IsADirectoryError
    except OSError:
        raise SweepError(f"--out {str(out)!r}: {path.name!r} there is not a lock file tierwise made (a link, a "
                         "directory or a device); move it away or name another --out directory") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepError(f"--out {str(out)!r}: another 'sweep run' is writing shard {shard[0]}/{shard[1]} "
                             "there now; wait for it, or give another --out") from None
        except OSError:  # a file system without flock: run unlocked
            pass
        yield
    finally:
        os.close(fd)


def write_manifest(out: Path, grid: str, points: list) -> None:
    import hashlib

    ids = sorted(p.id for p in points)
    doc = {"grid": grid, "grid_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
           "num_points": len(ids), "tierwise_version": __version__, "point_ids": ids}
    write_atomic(out / MANIFEST, json.dumps(doc), "--out")


def read_manifest(out: Path) -> dict[str, Any] | None:

    p = out / MANIFEST
    if not p.exists():
        return None
    doc = load_json(read_user_text(p, what="sweep manifest", error=SweepError, max_bytes=256 * 2**20),
                    f"sweep manifest {str(p)!r}", error=SweepError)
    return doc if isinstance(doc, dict) else None
