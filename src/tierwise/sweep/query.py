"""``sweep show``: the results directory as a DuckDB view named ``results``, queried with SQL.

The view is ``read_parquet([every DIR/part-*.parquet], union_by_name = true)``: part files written before a new
point kind added columns still read (the missing columns are NULL). duckdb is the optional ``sweep`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tierwise.sweep.grid import SweepError
from tierwise.sweep.store import part_files, read_manifest

__all__ = ["require_duckdb", "query", "summary", "DEFAULT_QUERY", "MAX_ROWS"]

DEFAULT_QUERY = ("SELECT kind, status, count(*) AS points, round(sum(wall_s), 1) AS cpu_s FROM results "
                 "GROUP BY ALL ORDER BY kind, status")
MAX_ROWS = 100_000
"""Rows a query returns at most (a table or JSON of more is not read by anyone; use LIMIT or aggregate)."""


def require_duckdb():
    try:
        import duckdb
    except ImportError:
        raise SweepError("sweep show needs duckdb, which is not installed; pip install 'tierwise[sweep]'") from None
    return duckdb


def _connect(out: Path):
    duckdb = require_duckdb()
    con = duckdb.connect(":memory:")
    # the part files by name, not a glob: a directory named with '*', '?' or '[' still reads only its parts
    files = ", ".join("'" + str(f).replace("'", "''") + "'" for f in part_files(out))
    con.execute(f"CREATE VIEW results AS SELECT * FROM read_parquet([{files}], union_by_name = true)")
    return con


def check_results_dir(out: str) -> Path:
    p = Path(out)
    if not p.is_dir():
        what = "is a file" if p.exists() else "does not exist"
        raise SweepError(f"{out!r} {what}; give the directory that 'tierwise sweep run --out' wrote")
    if not part_files(p):
        raise SweepError(f"{out!r} holds no results (no part-*.parquet files); run 'tierwise sweep run GRID.yaml "
                         f"--out {out}' first")
    return p


def query(out: str, sql: str | None = None) -> dict[str, Any]:
    """Run ``sql`` (default: points per kind and status) over the view ``results``; columns and rows."""
    p = check_results_dir(out)
    duckdb = require_duckdb()
    con = _connect(p)
    text = sql or DEFAULT_QUERY
    try:
        cur = con.execute(text)
        columns = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchmany(MAX_ROWS + 1)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepError(f"--query {text!r}: {first}") from None
    truncated = len(rows) > MAX_ROWS
    return {"query": text, "columns": columns, "rows": [[_json_value(v) for v in r] for r in rows[:MAX_ROWS]],
            "truncated": truncated}


def _json_value(v: Any) -> Any:
    """A DuckDB value as plain JSON: DECIMAL -> float, dates and times -> ISO text, BLOB -> hex, UUID and
    INTERVAL -> text, LIST / STRUCT / MAP -> lists and objects; NaN and infinity -> null."""
    import datetime as dt
    import decimal
    import math

    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        return _json_value(float(v))
    if isinstance(v, dt.date | dt.datetime | dt.time):
        return v.isoformat()
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    return str(v)


def summary(out: str) -> dict[str, Any]:
    """Counts over the directory: rows, distinct points, duplicates, and the last grid's missing points."""
    duckdb = require_duckdb()
    try:
        return _summary(out)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepError(f"{out!r}: the results cannot be read ({first}); move a damaged part file aside and "
                         "rerun 'sweep run' (its points run again)") from None


def _summary(out: str) -> dict[str, Any]:
    p = check_results_dir(out)
    con = _connect(p)
    rows, distinct = con.execute("SELECT count(*), count(DISTINCT point_id) FROM results").fetchone()
    by_status = dict(con.execute("SELECT status, count(*) FROM results GROUP BY status ORDER BY status").fetchall())
    doc: dict[str, Any] = {"out": str(p), "part_files": len(part_files(p)), "rows": rows, "points": distinct,
                           "duplicate_rows": rows - distinct, "status_counts": by_status}
    manifest = read_manifest(p)
    if manifest and isinstance(manifest.get("point_ids"), list):
        ids = set(manifest["point_ids"])
        have = {r[0] for r in con.execute("SELECT DISTINCT point_id FROM results").fetchall()}
        doc.update(grid=manifest.get("grid"), grid_points=len(ids), grid_points_missing=len(ids - have))
    return doc


VIEWS = {
    "status": "SELECT kind, status, count(*) AS points FROM results GROUP BY ALL ORDER BY kind, status",
    "training": ("SELECT kind, model, cluster, num_gpus, max(tokens_per_s) AS tokens_per_s, max(mfu) AS mfu "
                 "FROM results WHERE status = 'ok' AND tokens_per_s IS NOT NULL GROUP BY ALL "
                 "ORDER BY kind, model, cluster, num_gpus"),
    "simulate": ("SELECT topology, pattern, routing, fail_links, avg(time_s) AS time_s, "
                 "avg(busbw_bytes_per_s) AS busbw_bytes_per_s FROM results WHERE status = 'ok' AND time_s IS NOT "
                 "NULL GROUP BY ALL ORDER BY topology, pattern, routing, fail_links"),
    "wall": "SELECT kind, wall_s FROM results ORDER BY kind LIMIT 100000",
}
"""The fixed queries behind the ``--html`` page's plots (each a ``query`` document)."""


def views(out: str) -> dict[str, Any]:
    return {name: query(out, sql) for name, sql in VIEWS.items()}
