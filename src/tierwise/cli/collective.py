"""``tierwise collective KIND --size .. --ranks ..``: one collective's cost on a cluster or on one link."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._fabric import SharpOpt
from tierwise.cli._output import emit, kv_table, print_table


def register(app: typer.Typer) -> None:
    @app.command("collective")
    def collective_cmd(
        *,
        kind: Annotated[str, typer.Argument(help="all-reduce | reduce-scatter | all-gather | all-to-all | broadcast | send-recv")],
        size: Annotated[str, typer.Option(help="buffer size as nccl-tests counts it, e.g. 16GB, 1GiB")],
        ranks: Annotated[int, typer.Option(help="number of ranks")],
        ranks_per_node: Annotated[int | None, typer.Option(help="ranks per node (default: fill nodes)")] = None,
        algorithm: Annotated[str, typer.Option(help="auto | ring | tree | hierarchical | nvls | sharp | direct")] = "auto",
        cluster: Annotated[str, typer.Option(help="catalog cluster or cluster YAML")] = "dgx-h100",
        link_bandwidth: Annotated[str | None, typer.Option(help="one link of this rate carries each rank's traffic, e.g. 50GB/s")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
        sharp: SharpOpt = False,
    ) -> None:
        """Cost of one collective: bytes per rank, time, algbw/busbw (nccl-tests definitions), algorithm."""
        from tierwise.netsim.collective_report import collective_report

        data = collective_report(kind, size, ranks, ranks_per_node, algorithm, cluster, link_bandwidth, sharp=sharp)

        def render(console):
            from tierwise.units import format_bandwidth, format_bytes, format_time

            table = kv_table(f"{data['op']} of {format_bytes(data['size_bytes'])} over {ranks} ranks "
                             f"({data['cluster']})")
            table.add_row("bytes per rank (ring-equivalent)", format_bytes(data["bytes_per_rank"]))
            table.add_row("tier crossed", data["tier"])
            table.add_row("algorithm / protocol", f"{data['algorithm']} / {data['protocol']}")
            table.add_row("modelled time", format_time(data["time_s"]))
            table.add_row("datasheet arithmetic", format_time(data["datasheet_time_s"]))
            if "cluster_time_s" in data:
                table.add_row(f"modelled on {cluster}", format_time(data["cluster_time_s"]))
            table.add_row("algbw", format_bandwidth(data["algbw_bytes_per_s"]))
            table.add_row("busbw", format_bandwidth(data["busbw_bytes_per_s"]))
            for tier, b in data["wire_bytes_per_tier"].items():
                table.add_row(f"wire bytes per rank on {tier}", format_bytes(b))
            print_table(console, table)
            for note in data["notes"]:
                console.print(f"- {note}")

        emit(data, as_json, render, document="collective")
