"""``tierwise sweep run GRID.yaml --out DIR`` (many grid points, resumable, Parquet) and ``tierwise sweep show
DIR`` (DuckDB SQL over the results). pyarrow/duckdb (extra ``sweep``) and ray (extra ``ray``) load inside."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, kv_table, print_table

__all__ = ["register"]

MAX_WORKERS = 1024
MAX_BATCH_POINTS = 100_000


def render_run(console, doc: dict) -> None:
    t = kv_table(f"sweep of {doc['points_in_grid']:,} points into {doc['out']}", key_style="")
    t.add_row("shard", doc["shard"])
    t.add_row("executor", f"{doc['executor']} ({doc['workers']} worker{'' if doc['workers'] == 1 else 's'})")
    t.add_row("points in this shard", f"{doc['points_in_shard']:,}")
    t.add_row("already done (skipped)", f"{doc['already_done']:,}")
    t.add_row("ran now", f"{doc['ran']:,}  " + ", ".join(f"{k} {v}" for k, v in doc["status_counts"].items()))
    t.add_row("part files written", str(doc["part_files_written"]))
    t.add_row("wall time", f"{doc['wall_s']:.1f} s")
    print_table(console, t)


def render_show(console, doc: dict) -> None:
    from rich.table import Table

    s = doc["summary"]
    t = kv_table(f"sweep results in {s['out']}", key_style="")
    t.add_row("rows / distinct points", f"{s['rows']:,} / {s['points']:,}")
    t.add_row("status", ", ".join(f"{k} {v}" for k, v in s["status_counts"].items()))
    if "grid_points" in s:
        t.add_row("last grid run here", f"{s['grid_points']:,} points, {s['grid_points_missing']:,} not yet done")
    print_table(console, t)
    q = doc["query"]
    console.print(q["query"], style="dim")
    table = Table()
    for col in q["columns"]:
        table.add_column(col, overflow="fold")
    for row in q["rows"]:
        table.add_row(*(_cell(v) for v in row))
    print_table(console, table)
    if q["truncated"]:
        console.print(f"first {len(q['rows']):,} rows shown; add LIMIT or aggregate", style="dim")


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def register(app: typer.Typer) -> None:
    sweep = typer.Typer(help="Run many scenarios (a grid) resumably into Parquet, and query the results.",
                        no_args_is_help=True)
    app.add_typer(sweep, name="sweep")

    @sweep.command("run")
    def run_cmd(
        grid: Annotated[str, typer.Argument(help="grid YAML (docs/sweep.md)")],
        out: Annotated[str, typer.Option("--out", help="results directory (new, or an earlier run's to resume)")],
        workers: Annotated[int, typer.Option("--workers", help="processes (local) or tasks in flight / 4 (ray)")] = 1,
        shard: Annotated[str | None, typer.Option("--shard", help="run shard i of N, e.g. 3/8 (Slurm arrays)")]
        = None,
        executor: Annotated[str, typer.Option("--executor", help="local (multiprocessing) or ray")] = "local",
        batch_size: Annotated[int, typer.Option("--batch-size", help="points per part file")] = 64,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON summary")] = False,
    ) -> None:
        """Run every point of GRID not already in --out; results are written as they finish (resume: rerun)."""
        from tierwise.cli._interrupt import keeping
        from tierwise.cli._progress import progress
        from tierwise.limits import check_int
        from tierwise.sweep.grid import SweepError, load_grid, parse_shard
        from tierwise.sweep.run import EXECUTORS, SweepInterrupted, check_ray_address, require_ray, run_sweep
        from tierwise.sweep.store import prepare_out, require_pyarrow

        if executor not in EXECUTORS:
            raise SweepError(f"--executor {executor!r}; choose local or ray")
        check_int(workers, "--workers", maximum=MAX_WORKERS, error=SweepError)
        check_int(batch_size, "--batch-size", maximum=MAX_BATCH_POINTS, error=SweepError)
        shard_t = parse_shard(shard)
        require_pyarrow()
        if executor == "ray":
            check_ray_address()  # an address nothing answers on: one line now, not ray.init retrying for minutes
            require_ray()
        points = load_grid(grid)
        out_dir = prepare_out(out)
        with keeping(lambda exc: str(exc) if isinstance(exc, SweepInterrupted) else None), progress("sweep") as bar:
            doc = run_sweep(points, out_dir, workers=workers, executor=executor, shard=shard_t, grid=grid,
                            batch_size=batch_size, on_start=lambda n, total: bar.update(0, n),
                            progress=lambda done, n: bar.update(done, n))
        emit(doc, as_json, lambda console: render_run(console, doc), document="sweep-run")

    sweep.command("show")(show_cmd)


def show_cmd(
    directory: Annotated[str, typer.Argument(help="the --out directory of 'sweep run'")],
    query: Annotated[str | None, typer.Option("--query", help="SQL over the view 'results' (default: points "
                                              "per kind and status)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
    html: Annotated[str | None, typer.Option("--html", help="write a self-contained HTML report here")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds a query may run before it is stopped")]
    = 60.0,
) -> None:
    """Summarise a results directory and answer an SQL query over it (DuckDB); --html plots it.

    The query is read-only (one SELECT; no file is written, attached or read besides the results) and
    bounded: 100,000 rows, 10,000 characters a cell, 2 GB of memory, --timeout seconds."""
    from tierwise.limits import check_float
    from tierwise.sweep.grid import SweepError
    from tierwise.sweep.query import check_results_dir, require_duckdb, summary, views
    from tierwise.sweep.query import query as run_query

    check_float(timeout, "--timeout", minimum=0.0, maximum=3600.0, min_open=True, error=SweepError)
    require_duckdb()
    if html is not None:
        from tierwise.atomic import check_writable
        from tierwise.report import require_plotly

        require_plotly()
        check_writable(html, "--html")
    check_results_dir(directory)
    doc = {"summary": summary(directory), "query": run_query(directory, query, timeout_s=timeout)}
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.sweep import sweep_page

        doc["views"] = views(directory)
        doc["html"] = write_page(html, sweep_page(doc))
    emit(doc, as_json, lambda console: render_show(console, doc), document="sweep-show")
