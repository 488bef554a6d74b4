"""``tierwise tiers CLUSTER``: the interconnect hierarchy, tier by tier, datasheet and one-way figures."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, print_table


def register(app: typer.Typer) -> None:
    @app.command("tiers")
    def tiers_cmd(cluster: Annotated[str, typer.Argument(help="catalog cluster name or cluster YAML path")] = "dgx-h100",
                  as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """Show a cluster's tiers: datasheet figure, one-way figure per GPU, latency, ratios to HBM."""
        from tierwise.hierarchy import scale_up_domain, tiers
        from tierwise.specs.cluster import load_cluster

        c = load_cluster(cluster)
        rows = tiers(c)
        data = [{
            "name": t.name, "technology": t.technology, "domain_size": t.domain_size,
            "datasheet_bytes_per_s": t.datasheet_bytes_per_s, "datasheet_direction": t.datasheet_direction,
            "bytes_per_s": t.bytes_per_s, "latency_s": t.latency_s, "ratio_to_hbm": t.ratio_to_hbm,
            "datasheet_ratio_to_hbm": t.datasheet_ratio_to_hbm, "note": t.note,
        } for t in rows]
        dom = scale_up_domain(c)
        for d in data:
            if d["name"] == "scale_up":
                d.update(domain_aggregate_bytes_per_s=dom["aggregate_bytes_per_s"],
                         domain_aggregate_bidirectional_bytes_per_s=dom["aggregate_bidirectional_bytes_per_s"],
                         domain_bisection_bytes_per_s=dom["bisection_bytes_per_s"], domain_bisection_basis=dom[
                             "bisection_basis"])

        def render(console):
            from rich.table import Table

            from tierwise.units import format_bandwidth, format_time

            table = Table(title=f"{c.display_name or c.name}: interconnect tiers (fastest first)")
            for col in ("tier", "technology", "domain", "datasheet", "one-way / GPU", "latency",
                        "HBM / tier (one-way)", "HBM / tier (datasheet)"):
                table.add_column(col)
            for t in rows:
                table.add_row(t.name, t.technology, "cluster" if t.domain_size == 0 else str(t.domain_size),
                              f"{format_bandwidth(t.datasheet_bytes_per_s)} {t.datasheet_direction}",
                              format_bandwidth(t.bytes_per_s), format_time(t.latency_s) if t.latency_s else "-",
                              f"{t.ratio_to_hbm:.3g}x", f"{t.datasheet_ratio_to_hbm:.3g}x")
            print_table(console, table)
            for t in rows:
                if t.note:
                    console.print(f"{t.name}: {t.note}", style="dim")
            console.print(domain_line(dom))
            up = next((t for t in rows if t.name == "scale_up"), None)
            out = next((t for t in rows if t.name == "scale_out"), None)
            if up and out:
                console.print(
                    f"scale_up / scale_out: datasheet {up.datasheet_bytes_per_s / out.datasheet_bytes_per_s:.3g}x "
                    f"(a {up.datasheet_direction} NVLink-class figure against a one-way NIC figure); "
                    f"one-way against one-way {up.bytes_per_s / out.datasheet_bytes_per_s:.3g}x per NIC, "
                    f"{up.bytes_per_s / out.bytes_per_s:.3g}x per GPU share")

        emit({"cluster": cluster, "tiers": data}, as_json, render, document="tiers")


def domain_line(dom: dict) -> str:
    """One line on the scale-up domain as a whole (also used by ``topo``)."""
    from tierwise.units import format_bandwidth

    bis = dom["bisection_bytes_per_s"]
    return (f"scale-up domain of {dom['gpus']} GPUs: aggregate {format_bandwidth(dom['aggregate_bytes_per_s'])} one way "
            f"({format_bandwidth(dom['aggregate_bidirectional_bytes_per_s'])} bidirectional), bisection "
            + (f"{format_bandwidth(bis)} one way ({dom['bisection_basis']})" if bis else dom["bisection_basis"]))
