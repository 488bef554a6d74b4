"""``sweep show``: the results directory as a DuckDB view named ``results``, queried with SQL.

The view reads ``read_parquet([every DIR/part-*.parquet], union_by_name = true)``: part files written before a
new point kind added columns still read (the missing columns are NULL), and it holds one row per point: a
point stored twice (two overlapping runs) shows once, its first row by part-file name. ``results_all_rows``
is the same without that step (``summary`` counts the duplicates from it). duckdb is the optional ``sweep``
extra.

``--query`` is the user's SQL, so it runs fenced (a query is read-only and bounded):

* one statement, a ``SELECT`` (``WITH``, ``FROM``, ``DESCRIBE``, ``SUMMARIZE``, ``SHOW`` are selects) or an
  ``EXPLAIN``; ``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``CREATE``, ``SET``, ``PRAGMA`` are refused by name;
* DuckDB runs with external access off (``enable_external_access = false``, only the part files readable,
  extensions neither installed nor loaded), its configuration locked so a query cannot turn that back on,
  and at most :data:`MEMORY_LIMIT` of memory;
* at most :data:`MAX_ROWS` rows and :data:`MAX_RESULT_CHARS` characters come back (the rest is cut, with
  ``truncated``), each text cell cut to :data:`MAX_CELL_CHARS`;
* a query still running after :data:`QUERY_TIMEOUT_S` seconds is interrupted: one line, exit 2.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tierwise.files import short_repr
from tierwise.sweep.grid import SweepError
from tierwise.sweep.store import part_files, read_manifest

__all__ = ["require_duckdb", "query", "summary", "DEFAULT_QUERY", "MAX_ROWS", "MAX_CELL_CHARS", "MAX_RESULT_CHARS",
           "QUERY_TIMEOUT_S", "MEMORY_LIMIT"]

DEFAULT_QUERY = ("SELECT kind, status, count(*) AS points, round(sum(wall_s), 1) AS cpu_s FROM results "
                 "GROUP BY ALL ORDER BY kind, status")
MAX_ROWS = 100_000
"""Rows a query returns at most (a table or JSON of more is not read by anyone; use LIMIT or aggregate)."""
MAX_CELL_CHARS = 10_000
"""Characters of one text cell kept (a longer one is cut with an ellipsis)."""
MAX_RESULT_CHARS = 64 * 2**20
"""Characters of a whole answer kept (about 64 MiB of text): past it the rows stop and ``truncated`` is set."""
QUERY_TIMEOUT_S = 60.0
"""Seconds one query may run before it is interrupted."""
MEMORY_LIMIT = "2GB"
"""DuckDB's memory limit for a query (a query needing more fails with one line)."""
_READ_ONLY = {"SELECT", "EXPLAIN"}
_FETCH = 1000


def require_duckdb():
    try:
        import duckdb
    except ImportError:
        raise SweepError("sweep show needs duckdb, which is not installed; pip install 'tierwise[sweep]'") from None
    return duckdb


def _connect(out: Path):
    """A DuckDB connection that can read the part files and nothing else (module docstring)."""
    duckdb = require_duckdb()
    parts = [str(f.resolve()) for f in part_files(out)]
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False, "memory_limit": MEMORY_LIMIT})
    con.execute("SET allowed_paths = $1", [parts])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    # the part files by name, not a glob: a directory named with '*', '?' or '[' still reads only its parts
    files = ", ".join("'" + f.replace("'", "''") + "'" for f in parts)
    con.execute("CREATE VIEW results_all_rows AS SELECT * FROM "
                f"read_parquet([{files}], union_by_name = true, filename = '_part_file')")
    con.execute("CREATE VIEW results AS SELECT * EXCLUDE (_part_file) FROM results_all_rows "
                "QUALIFY row_number() OVER (PARTITION BY point_id ORDER BY _part_file) = 1")
    return con


def _check_read_only(con, text: str) -> None:
    """One ``SELECT`` or ``EXPLAIN`` statement; anything else is a :class:`SweepError` naming what it is."""
    duckdb = require_duckdb()
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepError(f"--query {short_repr(text, 80)}: {first}") from None
    if len(statements) != 1:
        raise SweepError(f"--query {short_repr(text, 80)} holds {len(statements)} statements; give one SELECT")
    kind = str(statements[0].type).rsplit(".", 1)[-1]
    if kind not in _READ_ONLY:
        raise SweepError(f"--query {short_repr(text, 80)} is a {kind} statement; sweep show runs only a SELECT "
                         "(read-only: nothing is written, attached, installed or loaded)")


def check_results_dir(out: str) -> Path:
    p = Path(out)
    if not p.is_dir():
        what = "is a file" if p.exists() else "does not exist"
        raise SweepError(f"{out!r} {what}; give the directory that 'tierwise sweep run --out' wrote")
    if not part_files(p):
        raise SweepError(f"{out!r} holds no results (no part-*.parquet files); run 'tierwise sweep run GRID.yaml "
                         f"--out {out}' first")
    return p


def query(out: str, sql: str | None = None, *, timeout_s: float = QUERY_TIMEOUT_S) -> dict[str, Any]:
    """Run ``sql`` (default: points per kind and status) over the view ``results``; columns and rows.

    Fenced and bounded as the module docstring says; a query past ``timeout_s`` is interrupted.
    """
    p = check_results_dir(out)
    duckdb = require_duckdb()
    con = _connect(p)
    text = sql or DEFAULT_QUERY
    _check_read_only(con, text)
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        cur = con.execute(text)
        columns = [d[0] for d in cur.description] if cur.description else []
        rows, truncated = _fetch(cur)
    except duckdb.InterruptException:
        raise SweepError(f"--query {short_repr(text, 80)} ran past {timeout_s:g} s and was stopped; filter, "
                         "aggregate or add a LIMIT") from None
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepError(f"--query {short_repr(text, 80)}: {first}") from None
    finally:
        timer.cancel()
        con.close()
    return {"query": text, "columns": columns, "rows": rows, "truncated": truncated}


def _fetch(cur) -> tuple[list[list[Any]], bool]:
    """Rows as JSON values, at most :data:`MAX_ROWS` and :data:`MAX_RESULT_CHARS`; text cells cut."""
    rows: list[list[Any]] = []
    chars = 0
    while True:
        chunk = cur.fetchmany(_FETCH)
        if not chunk:
            return rows, False
        for r in chunk:
            row = [_cell(_json_value(v)) for v in r]
            chars += sum(len(v) if isinstance(v, str) else 8 for v in row)
            if len(rows) >= MAX_ROWS or chars > MAX_RESULT_CHARS:
                return rows, True
            rows.append(row)


def _cell(v: Any) -> Any:
    if isinstance(v, str) and len(v) > MAX_CELL_CHARS:
        return v[: MAX_CELL_CHARS - 3] + "..."
    if isinstance(v, list | dict) and len(str(v)) > MAX_CELL_CHARS:
        return str(v)[: MAX_CELL_CHARS - 3] + "..."
    return v


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
    rows, distinct = con.execute("SELECT count(*), count(DISTINCT point_id) FROM results_all_rows").fetchone()
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
