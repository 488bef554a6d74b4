"""Running a sweep: skip finished points, run the rest on an executor, write results as they finish.

Executors (``--executor``):

``local`` (default)
    ``--workers 1`` runs the points in this process; ``--workers N`` in a :mod:`multiprocessing` pool of N
    processes started by a fork server (``imap_unordered``: results come back as they finish). No Ray.
``ray``
    Each point is a Ray task (``ray.remote``) on the cluster that ``ray.init()`` joins: the one named by
    ``RAY_ADDRESS`` (``ray start --head`` / a Slurm-launched cluster), or else a new local instance. At most
    ``4 x --workers`` (or 4 x the cluster's CPUs) tasks are in flight, so a million-point grid does not
    become a million pending tasks. tierwise must be importable on every node. A ``RAY_ADDRESS`` naming a
    host and port is tried first with a plain TCP connection (:data:`RAY_CONNECT_TIMEOUT_S`): an address
    nothing answers on is one line, before any work, instead of ``ray.init`` retrying for minutes.

Finished rows are buffered and written as one part file (:func:`tierwise.sweep.store.write_part`) every
``batch_size`` points or ``flush_s`` seconds, whichever comes first, and at the end (also on Ctrl-C). A
``kill -9`` loses at most the rows of the batch not yet written, which the rerun runs again.
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tierwise._version import __version__
from tierwise.errors import TierwiseError
from tierwise.specs.parameters import load_parameters
from tierwise.sweep.grid import Point, SweepError, shard_points
from tierwise.sweep.kinds import KINDS, all_columns
from tierwise.sweep.store import finished_ids, run_tag, shard_lock, write_manifest, write_new_rows

__all__ = ["run_point", "run_sweep", "EXECUTORS", "SweepInterrupted"]

EXECUTORS = ("local", "ray")


def run_point(task: tuple[str, str, dict[str, Any], int]) -> dict[str, Any]:
    """Run one point ``(id, kind, params, study)`` into its result row (a user error becomes ``status: error``)."""
    import json

    pid, kind, params, study = task
    start = time.perf_counter()
    row: dict[str, Any] = {"point_id": pid, "kind": kind, "study": study, "status": "ok", "error": None,
                           "params": json.dumps(params, sort_keys=True), "tierwise_version": __version__}
    try:
        cols, doc = KINDS[kind].run(params, load_parameters())  # a worker's entry point: the run's parameters
        row.update(cols)
        if kind == "plan" and doc.get("plan") is None:
            row["status"] = "no_fit"
    except TierwiseError as exc:
        row.update(status="error", error=" ".join(str(exc).split()))
        doc = None
    except Exception as exc:  # noqa: BLE001 - recorded on the row: one bad point does not stop the sweep
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
        doc = None
    row["result"] = None if doc is None else json.dumps(_plain(doc), allow_nan=False)
    row["wall_s"] = time.perf_counter() - start
    row["finished_at"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
    cols = all_columns()
    return {k: row.get(k) for k in cols}


def _plain(value: Any) -> Any:
    """JSON types from numpy values and tuples; NaN and infinity become null."""
    import math

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _tasks(points: list[Point]) -> list[tuple[str, str, dict[str, Any], int]]:
    return [(p.id, p.kind, p.params, p.study) for p in points]


def _local(tasks: list, workers: int) -> Iterator[dict[str, Any]]:
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield run_point(t)
        return
    import multiprocessing as mp

    # forkserver, not fork: this process has run pyarrow's thread pool (reading the finished ids), and a fork
    # of a threaded process can deadlock; the server starts clean and forks workers with tierwise preloaded
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["tierwise.sweep.run", "tierwise.sweep.kinds", "tierwise.estimate"])
    else:
        ctx = mp.get_context("spawn")
    # workers ignore SIGINT: a terminal's Ctrl-C reaches the whole process group, and the parent, which gets it
    # too, stops the pool (no worker traceback on the terminal)
    quiet = {"initializer": signal.signal, "initargs": (signal.SIGINT, signal.SIG_IGN)}
    with ctx.Pool(min(workers, len(tasks)), **quiet) as pool:
        yield from pool.imap_unordered(run_point, tasks, chunksize=1)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_sweep`, after what finished was written: ``saved`` of the shard's ``total``
    points are in ``out`` (those of earlier runs included); a rerun runs the rest."""

    def __init__(self, out: str, saved: int, total: int):
        super().__init__(f"{saved:,} of {total:,} points saved in {out}; rerun to resume")
        self.out, self.saved, self.total = out, saved, total


RAY_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for the host and port of ``RAY_ADDRESS`` to answer before refusing (module docstring)."""


def check_ray_address(address: str | None = None, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Refuse a ``RAY_ADDRESS`` (default: the environment's) whose host and port do not answer in ``timeout_s``.

    ``auto``, ``local``, an empty value or none at all is left to Ray (a local instance); ``ray://host:port``
    (Ray Client) and ``host:port`` (the GCS) are tried with one TCP connection.
    """
    text = (os.environ.get("RAY_ADDRESS", "") if address is None else address).strip()
    if text.lower() in ("", "auto", "local"):
        return
    rest = text.split("://", 1)[1] if "://" in text else text
    host, sep, port_text = rest.rstrip("/").rpartition(":")
    shown = text if len(text) <= 80 else text[:77] + "..."
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SweepError(f"RAY_ADDRESS {shown!r} is not host:port (or ray://host:port, auto, local); fix it or unset "
                         "it to start a local Ray")
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:  # ValueError: a host name IDNA cannot encode (a label past 63 bytes)
        why = "no answer" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None)
                                                                 or "not a valid host name")
        raise SweepError(f"RAY_ADDRESS {shown!r} cannot be reached ({why} within {timeout_s:g} s); start the Ray "
                         "cluster (ray start --head), fix RAY_ADDRESS, or unset it for a local Ray") from None


def require_ray():
    try:
        import ray
    except ImportError:
        raise SweepError("--executor ray needs ray, which is not installed; pip install 'tierwise[ray]' (or use "
                         "--executor local)") from None
    return ray


def _ray(tasks: list, workers: int | None) -> Iterator[dict[str, Any]]:
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                 include_dashboard=False, configure_logging=False)
    remote = ray.remote(num_cpus=1)(run_point)
    width = 4 * (workers or int(ray.cluster_resources().get("CPU", 1)))
    todo = iter(tasks)
    pending = []
    for t in todo:
        pending.append(remote.remote(t))
        if len(pending) >= width:
            break
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            yield ray.get(ref)
        for t in todo:
            pending.append(remote.remote(t))
            break


def _check_executor(executor: str) -> None:
    """One line unless ``executor`` is known and (for ray) importable with a reachable address."""
    if executor not in EXECUTORS:
        raise SweepError(f"--executor {executor!r}; choose local or ray")
    if executor == "ray":
        require_ray()
        check_ray_address()


def run_sweep(points: list[Point], out: str | Path, *, workers: int = 1, executor: str = "local",
              shard: tuple[int, int] = (1, 1), grid: str = "grid", batch_size: int = 64, flush_s: float = 10.0,
              progress: Callable[[int, int], None] | None = None, on_start: Callable[[int, int], None] | None = None,
              ) -> dict[str, Any]:
    """Run the shard's unfinished points into ``out``; return the run's summary (counts, wall time, parts).

    ``on_start(to_run, total_in_shard)`` is called once before the first point; ``progress(done, to_run)`` after
    every point. The output directory must come from :func:`tierwise.sweep.store.prepare_out`.
    """

    _check_executor(executor)
    out = Path(out)
    start = time.perf_counter()
    mine = shard_points(points, shard)
    with shard_lock(out, shard):
        seen_parts: set[str] = set()
        done_before = finished_ids(out, seen_parts)
        stored = set(done_before)
        todo = [p for p in mine if p.id not in done_before]
        write_manifest(out, grid, points)
        if on_start:
            on_start(len(todo), len(mine))
        tag = run_tag(shard)
        buffer: list[dict[str, Any]] = []
        parts: list[str] = []
        counts = {"ok": 0, "no_fit": 0, "error": 0}
        last = time.monotonic()
        dropped = saved = 0

        def flush() -> None:
            nonlocal last, dropped, saved
            if buffer:
                path, n_dropped = write_new_rows(out, buffer, tag, len(parts), stored, seen_parts)
                dropped += n_dropped
                saved += len(buffer)  # written here, or already there by another run
                if path is not None:
                    parts.append(str(path))
                buffer.clear()
            last = time.monotonic()

        results: Iterable[dict[str, Any]] = (_ray(_tasks(todo), workers if workers > 1 else None)
                                             if executor == "ray" else _local(_tasks(todo), workers))
        try:
            for row in results:
                buffer.append(row)
                counts[row["status"]] = counts.get(row["status"], 0) + 1
                if progress:
                    progress(sum(counts.values()), len(todo))
                if len(buffer) >= batch_size or time.monotonic() - last >= flush_s:
                    flush()
        except KeyboardInterrupt:
            flush()
            raise SweepInterrupted(str(out), len(mine) - len(todo) + saved, len(mine)) from None
        finally:
            flush()  # Ctrl-C or an executor failure: what finished is kept
    return {"out": str(out), "shard": f"{shard[0]}/{shard[1]}", "executor": executor, "workers": workers,
            "points_in_grid": len(points), "points_in_shard": len(mine), "already_done": len(mine) - len(todo),
            "ran": sum(counts.values()), "status_counts": counts, "part_files_written": len(parts),
            "already_stored_by_another_run": dropped,
            "wall_s": time.perf_counter() - start}
