"""``tierwise collective KIND --size .. --ranks ..``: one collective's cost on a cluster or on one link."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, print_table


def collective_report(kind: str, size: str, ranks: int, ranks_per_node: int | None, algorithm: str,
                      cluster_ref: str, link_bandwidth: str | None) -> dict:
    """Library entry for the command: the JSON document it prints."""
    from tierwise.collectives.model import ALGORITHMS, PROTOCOLS, collective_cost
    from tierwise.collectives.volumes import bus_factor, normalize_kind
    from tierwise.errors import SpecError
    from tierwise.hierarchy import TIER_ORDER, group_span, tier_name, tiers
    from tierwise.limits import MAX_BYTES, MAX_GPUS, check_int
    from tierwise.specs.cluster import cluster_from_mapping, load_cluster
    from tierwise.units import format_bandwidth, format_bytes, format_time, parse_bandwidth, parse_bytes

    kind = normalize_kind(kind)
    size_bytes = parse_bytes(size, what="--size", maximum=MAX_BYTES)
    check_int(ranks, "--ranks", minimum=2, maximum=MAX_GPUS, error=SpecError,
              hint=" (one rank moves nothing: its busbw is 0/0)")
    if ranks_per_node is not None:
        check_int(ranks_per_node, "--ranks-per-node", maximum=MAX_GPUS, error=SpecError)
    if kind == "send-recv" and ranks != 2:
        raise SpecError(f"send-recv is between two ranks; use --ranks 2 (got {ranks})")
    base = load_cluster(cluster_ref)
    notes: list[str] = []

    def run(cluster, per_node):
        if per_node < 1:
            raise SpecError(f"--ranks-per-node {per_node} must be >= 1")
        if per_node > cluster.gpus_per_node:
            raise SpecError(f"--ranks-per-node {per_node} exceeds the {cluster.gpus_per_node} GPUs per node of "
                            f"{cluster.name}; use --ranks-per-node <= {cluster.gpus_per_node}")
        stride = max(1, cluster.gpus_per_node // per_node)
        span = group_span(cluster, ranks, stride)
        cost = collective_cost(kind, size_bytes, span, cluster, algorithm)
        return span, cost

    if link_bandwidth is not None:
        link = parse_bandwidth(link_bandwidth, what="--link-bandwidth")
        flat = cluster_from_mapping({"base": base.name, "name": f"one {format_bandwidth(link)} link per rank",
                                     "gpus_per_node": 1, "scale_up_domain": 1, "nics_per_node": 1,
                                     "nic_bandwidth": link}, origin="--link-bandwidth")
        span, cost = run(flat, 1)
        datasheet_bw = link
        per_node = ranks_per_node or min(ranks, base.gpus_per_node)
        cspan, ccost = run(base, per_node)
        cluster_time = float(ccost.time_s)
        notes.append(f"datasheet arithmetic: {format_bytes(size_bytes * float(bus_factor(kind, ranks)))} per rank / "
                     f"{format_bandwidth(link)} = {format_time(size_bytes * float(bus_factor(kind, ranks)) / link)}")
        notes.append(f"modelled on the link: {format_time(float(cost.time_s))} (achievable fraction of the line "
                     "rate, protocol and per-step latency included)")
        if link >= 300e9:
            notes.append(f"{format_bandwidth(link)} looks like an NVLink-class datasheet figure, which counts both "
                         f"directions: one way it is {format_bandwidth(link / 2)}, so on such a link the time is "
                         f"about twice the datasheet arithmetic (--link-bandwidth {link / 2e9:g}GB/s models it)")
        notes.append(f"on {base.name} with {per_node} ranks per node this collective models "
                     f"{format_time(cluster_time)}: a ring across nodes runs one channel per NIC, so a node moves data "
                     f"at about {base.nics_per_node} x the NIC rate, not one NIC's rate")
        cluster_used = flat
    else:
        per_node = ranks_per_node or min(ranks, base.gpus_per_node)
        span, cost = run(base, per_node)
        cluster_used = base
        cluster_time = None
        tier_code = int(span.tier)
        tier_list = {t.name: t for t in tiers(base)}
        datasheet_bw = tier_list[tier_name(tier_code)].datasheet_bytes_per_s if tier_code else float("inf")
        if tier_code == 1:
            notes.append(f"datasheet scale-up figure {format_bandwidth(datasheet_bw)} counts both directions; one way it "
                         f"is {format_bandwidth(base.scale_up_bytes_per_s)} per GPU")
        if tier_code == 3 and int(span.ranks_per_domain) > 1:
            notes.append(f"{int(span.ranks_per_domain)} ranks per domain share {base.nics_per_node} NICs per node: "
                         "the datasheet arithmetic uses one NIC's rate, a multi-channel ring uses them all")
    if ALGORITHMS[int(cost.algorithm)] == "ring":
        from tierwise.netsim.compare import collective_ring_note

        why = collective_ring_note(kind, size_bytes, span, cluster_used)
        if why:
            notes.append(why)
    time_s = float(cost.time_s)
    bpr = float(cost.bytes_per_rank)
    algbw = size_bytes / time_s if time_s > 0 else float("inf")
    data = {
        "kind": kind,
        "size_bytes": size_bytes,
        "ranks": ranks,
        "ranks_per_node": per_node,
        "cluster": cluster_used.name,
        "tier": TIER_ORDER[int(span.tier)],
        "bytes_per_rank": bpr,
        "time_s": time_s,
        "datasheet_time_s": bpr / datasheet_bw if datasheet_bw and ranks > 1 else 0.0,
        "algbw_bytes_per_s": algbw,
        "busbw_bytes_per_s": algbw * float(bus_factor(kind, ranks)) if kind != "send-recv" else algbw,
        "algorithm": ALGORITHMS[int(cost.algorithm)],
        "protocol": PROTOCOLS[int(cost.protocol)],
        "wire_bytes_per_tier": {"scale_up": float(cost.scale_up_bytes), "scale_out": float(cost.scale_out_bytes)},
        "notes": notes,
    }
    if cluster_time is not None:
        data["cluster_time_s"] = cluster_time
    return data


def register(app: typer.Typer) -> None:
    @app.command("collective")
    def collective_cmd(
        kind: Annotated[str, typer.Argument(help="all-reduce | reduce-scatter | all-gather | all-to-all | broadcast | send-recv")],
        size: Annotated[str, typer.Option(help="buffer size as nccl-tests counts it, e.g. 16GB, 1GiB")],
        ranks: Annotated[int, typer.Option(help="number of ranks")],
        ranks_per_node: Annotated[int | None, typer.Option(help="ranks per node (default: fill nodes)")] = None,
        algorithm: Annotated[str, typer.Option(help="auto | ring | tree | hierarchical | nvls | direct")] = "auto",
        cluster: Annotated[str, typer.Option(help="catalog cluster or cluster YAML")] = "dgx-h100",
        link_bandwidth: Annotated[str | None, typer.Option(help="one link of this rate carries each rank's traffic, e.g. 50GB/s")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Cost of one collective: bytes per rank, time, algbw/busbw (nccl-tests definitions), algorithm."""
        data = collective_report(kind, size, ranks, ranks_per_node, algorithm, cluster, link_bandwidth)

        def render(console):
            from rich.table import Table

            from tierwise.units import format_bandwidth, format_bytes, format_time

            table = Table(title=f"{data['kind']} of {format_bytes(data['size_bytes'])} over {ranks} ranks ({data['cluster']})",
                          show_header=False)
            table.add_column("what", style="bold")
            table.add_column("value")
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

        emit(data, as_json, render)
