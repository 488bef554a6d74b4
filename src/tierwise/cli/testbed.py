"""``tierwise testbed up|run|ddp|check|down``: a tier testbed of network namespaces on this machine.

Values are validated before anything is created; root and iproute2 are checked next (one line without them).
torch and the simulator are imported inside the command bodies.
"""

from __future__ import annotations

import typer

from tierwise.cli._output import emit, kv_table, print_table

__all__ = ["register"]

testbed_app = typer.Typer(help="Emulated nodes (network namespaces, tbf-shaped links): measure collectives "
                               "across them and check the model.", no_args_is_help=True)

_DIR = typer.Option("tierwise-testbed", "--dir", help="folder of the testbed's state, cluster file and results")
_JSON = typer.Option(False, "--json", help="print the result as JSON")
_LAYOUT = typer.Option("contiguous", "--layout", help="contiguous (rank r on node r // ranks-per-node) or "
                                                      "interleaved (node r mod nodes)")


def _layout(layout: str) -> str:
    from tierwise.testbed.spec import LAYOUTS, TestbedError

    if layout not in LAYOUTS:
        raise TestbedError(f"--layout {layout!r}: choose contiguous or interleaved")
    return layout


@testbed_app.command("up")
def up(
    nodes: int = typer.Option(..., "--nodes", help="emulated nodes (network namespaces), 1-16"),
    ranks_per_node: int = typer.Option(2, "--ranks-per-node", help="ranks per node (talk over its loopback)"),
    link: str = typer.Option("1Gbit/s", "--link", help="tbf rate of each node's link, e.g. 1Gbit/s"),
    latency: str | None = typer.Option(None, "--latency", help="added one-way delay (needs netem), e.g. 50us"),
    oversubscription: float | None = typer.Option(None, "--oversubscription",
                                                  help="two leaves joined by an uplink of (nodes/2) x link / this"),
    name: str = typer.Option("tb", "--name", help="namespaces are twtb-NAME-..."),
    directory: str = _DIR,
    as_json: bool = _JSON,
) -> None:
    """Create the namespaces, veths, bridge(s) and tbf qdiscs; measure loopback and link; write cluster.yaml."""
    from tierwise.testbed.net import require_privileges
    from tierwise.testbed.run import bring_up
    from tierwise.testbed.spec import parse_spec

    spec = parse_spec(nodes=nodes, ranks_per_node=ranks_per_node, link=link, latency=latency,
                      oversubscription=oversubscription, name=name)
    require_privileges()
    from tierwise.cli._interrupt import keeping

    with keeping(lambda _: f"the half-built testbed twtb-{name} was taken down; nothing left"):
        state = bring_up(spec, directory)

    def render(console) -> None:
        table = kv_table(f"testbed {spec.name} up")
        table.add_row("namespaces", ", ".join(state["namespaces"]))
        for item in state["links"]:
            table.add_row("link", f"{item['link']}  ({item['tbf']})")
        if state["repaired"]:
            table.add_row("removed leftovers", ", ".join(state["repaired"]))
        p = state["probes"]
        table.add_row("loopback rate", f"{p['loopback_bytes_per_s'] / 1e9:.2f} GB/s (measured)")
        table.add_row("link payload rate", f"{p['link_payload_bytes_per_s_expected'] / 1e6:.1f} MB/s set, "
                      f"{(p['link_payload_bytes_per_s_measured'] or 0) / 1e6:.1f} MB/s measured")
        table.add_row("link latency", f"{(p['link_latency_s'] or 0) * 1e6:.1f} us (measured)")
        table.add_row("--latency", state["latency"])
        table.add_row("cluster file", state["cluster_file"])
        for item in state["assumed"]:
            table.add_row("assumed", item)
        print_table(console, table)

    emit(state, as_json, render, document="testbed-up")


@testbed_app.command("down")
def down(name: str = typer.Option("tb", "--name", help="the testbed's name (twtb-NAME-...)"),
         directory: str = _DIR, as_json: bool = _JSON) -> None:
    """Delete the testbed's namespaces (with them its veths, bridges and qdiscs)."""
    from tierwise.testbed.net import require_privileges
    from tierwise.testbed.run import take_down
    from tierwise.testbed.spec import parse_spec

    parse_spec(nodes=2, ranks_per_node=1, link="1Gbit/s", name=name)  # checks the name
    require_privileges()
    result = take_down(name, directory)

    def render(console) -> None:
        console.print(f"removed: {', '.join(result['removed']) or 'nothing (no such testbed)'}")

    emit(result, as_json, render, document="testbed-down")


def _rows_table(title: str, rows: list[dict]):
    def render(console) -> None:
        from rich.table import Table

        table = Table(title=title)
        for col in ("op", "algorithm", "layout", "size", "measured ms", "analytic ms", "simulated ms", "meas/ana"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["op"], r["algorithm"], r.get("layout", ""), f"{r['size_bytes']:,}",
                          f"{r['measured_s'] * 1e3:.2f}", f"{r['analytic_s'] * 1e3:.2f}" if "analytic_s" in r else "",
                          f"{r['simulated_s'] * 1e3:.2f}" if "simulated_s" in r else "",
                          f"{r['measured_over_analytic']:.2f}" if "measured_over_analytic" in r else "")
        print_table(console, table)

    return render


@testbed_app.command("run")
def run(
    *,
    op: list[str] = typer.Option(["all-reduce"], "--op", help="all-reduce|all-gather|reduce-scatter|broadcast|"
                                                              "all-to-all; repeat for several"),
    algorithm: str = typer.Option("gloo", "--algorithm", help="gloo (the backend's own), or ring|tree|"
                                                              "hierarchical (all-reduce on send/recv)"),
    sizes: str = typer.Option("1MiB:16MiB", "--sizes", help="e.g. 64KiB:64MiB (x4 steps with --factor 4) or 4MiB,16MiB"),
    factor: float = typer.Option(2.0, "--factor", help="size step of a range"),
    layout: str = _LAYOUT,
    iters: int = typer.Option(5, "--iters", help="timed operations per size (median kept)"),
    warmup: int = typer.Option(1, "--warmup", help="untimed operations per size"),
    directory: str = _DIR,
    as_json: bool = _JSON,
) -> None:
    """Measure collectives across the testbed's ranks; rows are appended to the results file."""
    from tierwise.collectives.volumes import normalize_kind
    from tierwise.limits import MAX_ITERS, check_int
    from tierwise.measure.bench import parse_sizes
    from tierwise.testbed.run import run_sweep
    from tierwise.testbed.schedule import ALGORITHMS, OPS
    from tierwise.testbed.spec import TestbedError

    ops = [normalize_kind(o) for o in op]
    for o in ops:
        if o not in OPS:
            raise TestbedError(f"--op {o!r}: the testbed measures {', '.join(OPS)}")
    if algorithm not in ALGORITHMS:
        raise TestbedError(f"--algorithm {algorithm!r}: choose {', '.join(ALGORITHMS)}")
    if algorithm != "gloo" and ops != ["all-reduce"]:
        raise TestbedError(f"--algorithm {algorithm} is an all-reduce; drop --op or use --algorithm gloo")
    size_list = parse_sizes(sizes, factor)
    check_int(iters, "--iters", minimum=1, maximum=MAX_ITERS, error=TestbedError)
    check_int(warmup, "--warmup", minimum=0, maximum=MAX_ITERS, error=TestbedError)
    layout = _layout(layout)
    cases = [{"op": o, "algorithm": algorithm, "size_bytes": s} for s in size_list for o in ops]
    rows = run_sweep(directory, cases, layout=layout, iters=iters, warmup=warmup)
    emit(rows, as_json, _rows_table("testbed run", rows), document="testbed-run")


@testbed_app.command("ddp")
def ddp(
    steps: int = typer.Option(7, "--steps", help="measured steps (>= 5)"),
    width: int = typer.Option(1024, "--width", help="hidden width of the MLP"),
    layers: int = typer.Option(6, "--layers", help="linear layers"),
    batch: int = typer.Option(32, "--batch", help="samples per rank per step"),
    layout: str = _LAYOUT,
    directory: str = _DIR,
    as_json: bool = _JSON,
) -> None:
    """``measure ddp`` with its ranks in the testbed's nodes."""
    from tierwise.limits import MAX_ITERS, check_int
    from tierwise.testbed.run import run_ddp
    from tierwise.testbed.spec import TestbedError

    check_int(steps, "--steps", minimum=5, maximum=MAX_ITERS, error=TestbedError)
    check_int(width, "--width", maximum=65536, error=TestbedError)
    check_int(layers, "--layers", maximum=1024, error=TestbedError)
    check_int(batch, "--batch", maximum=65536, error=TestbedError)
    layout = _layout(layout)
    result = run_ddp(directory, ["--steps", str(steps), "--width", str(width), "--layers", str(layers),
                                 "--batch", str(batch)], layout=layout)

    def render(console) -> None:
        from tierwise.measure.ddp import render_ddp

        render_ddp(result)(console)

    emit(result, as_json, render, document="testbed-ddp")


@testbed_app.command("check")
def check(
    sizes: str = typer.Option("64KiB:64MiB", "--sizes", help="sizes of the default sweep (no results yet)"),
    factor: float = typer.Option(4.0, "--factor", help="size step of the default sweep"),
    iters: int = typer.Option(5, "--iters", help="timed operations per size of the default sweep"),
    directory: str = _DIR,
    as_json: bool = _JSON,
) -> None:
    """Measured vs analytic (from cluster.yaml, no fit) vs simulated (netsim), one row per op and size."""
    from tierwise.limits import MAX_ITERS, check_int
    from tierwise.measure.bench import parse_sizes
    from tierwise.testbed.check import check as run_check
    from tierwise.testbed.spec import TestbedError

    size_list = parse_sizes(sizes, factor)
    check_int(iters, "--iters", minimum=1, maximum=MAX_ITERS, error=TestbedError)
    rows = run_check(directory, sizes=size_list, iters=iters)
    emit(rows, as_json, _rows_table("testbed check", rows), document="testbed-check")


def register(app: typer.Typer) -> None:
    app.add_typer(testbed_app, name="testbed")
