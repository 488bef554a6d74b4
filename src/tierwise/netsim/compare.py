"""Why ``tierwise collective`` and ``tierwise simulate`` give different times for the same ring.

The two answer different questions and charge different things:

* the collective model (:mod:`tierwise.collectives.model`) is NCCL on a healthy, non-blocking fabric: the
  achievable fraction of each tier's line rate (``link_efficiency``), the protocol's share of a link and its
  per-generation bus-bandwidth cap (LL128: 120 of 128 bytes), and NCCL's per-step, base and launch latencies;
* the flow simulator (:mod:`tierwise.netsim.simulate`) moves bytes at line rate and pays only each link's hop
  latency, but routes every flow and shares links max-min fairly, so oversubscription, failures and ECMP
  collisions slow it down; its ``analytic_time_s`` is the same alpha-beta ring at line rate.

Both sides are computed with the library's own functions (``alpha_beta.ring_time``, ``collective_cost``),
never a copy of their formulas; the split of the model's time uses the model itself, run once with every
link efficiency at 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tierwise.collectives import alpha_beta
from tierwise.collectives.model import collective_cost
from tierwise.errors import TierwiseError
from tierwise.hierarchy import group_span
from tierwise.specs.cluster import cluster_from_mapping
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.units import format_time

__all__ = ["RING_KINDS", "collective_ring_note", "simulate_ring_notes"]

RING_KINDS = ("all-reduce", "all-gather", "reduce-scatter")


def _ms(t: float) -> str:

    return format_time(t)


def _line_rate_ring_s(kind: str, size: float, n: int, nl: int, cluster) -> float:
    """The ring's bytes at line rate on ``cluster``'s figures, no latency (what the simulator's bandwidth
    term is on a non-blocking fabric)."""
    b_out = cluster.scale_out_bytes_per_s
    return float(alpha_beta.ring_time(kind, size, n, nl, cluster.scale_up_bytes_per_s, b_out, 0.0, 0.0))


def _ring_s(kind: str, size: float, span, cluster, parameters: Parameters) -> tuple[float, str]:

    cost = collective_cost(kind, size, span, cluster, "ring", parameters=parameters)
    return float(cost.time_s), str(cost.protocol)


def _model_parts(kind: str, size: float, span, cluster, parameters: Parameters) -> tuple[float, float, list[str]]:
    """(model time, line-rate time, what the model adds over line rate, largest first where it can split).

    The model is run as it is and with every link efficiency 1; its latency is the intercept of its time,
    affine in the size for one protocol (``2 t(S) - t(2S)``), used only where both sizes pick one protocol.
    """

    n, nl = int(span.size), int(span.ranks_per_domain)
    line = _line_rate_ring_s(kind, size, n, nl, cluster)
    model, proto = _ring_s(kind, size, span, cluster, parameters)
    ideal_cluster = dataclasses.replace(cluster, efficiency={"scale_up": 1.0, "host": 1.0, "scale_out": 1.0})
    ideal, proto_ideal = _ring_s(kind, size, span, ideal_cluster, parameters)
    double, proto_double = _ring_s(kind, 2 * size, span, ideal_cluster, parameters)
    eff = {**parameters.collectives["link_efficiency"], **cluster.efficiency}
    parts = [(model - ideal, f"NCCL's achievable fraction of the line rate (scale-up {eff['scale_up']:.0%}, "
                             f"scale-out {eff['scale_out']:.0%})")]
    protocol = f"the {proto.upper()} protocol's share of the link and its bus-bandwidth cap"
    if proto_ideal == proto_double == proto:
        latency = max(2 * ideal - double, 0.0)
        parts += [(ideal - line - latency, protocol), (latency, "NCCL's per-step, base and launch latencies")]
    else:
        parts.append((ideal - line, f"{protocol}, and NCCL's per-step, base and launch latencies"))
    shown = [f"{what} +{_ms(t)}" for t, what in sorted(parts, key=lambda p: -p[0]) if t > 0.005 * model]
    return model, line, shown


def collective_ring_note(kind: str, size: float, span, cluster, *, parameters: Parameters) -> str | None:
    """For ``collective``: the same ring as the flow simulator times it, and what this model adds (priced under
    ``parameters``)."""
    if kind not in RING_KINDS or int(span.size) < 2 or getattr(cluster, "fitted", None):
        return None
    model, line, parts = _model_parts(kind, size, span, cluster, parameters)
    return (f"against `tierwise simulate`: the flow simulator moves this ring's bytes at line rate, {_ms(line)} "
            f"on a non-blocking fabric of these figures (plus about 0.3 us per hop); this model's {_ms(model)} "
            f"adds {'; '.join(parts) or 'nothing measurable'}. The simulator in turn slows down where flows share "
            "links (oversubscription, failed parts, ECMP collisions), which this model does not charge")


def _equivalent_cluster(fab, base: str, parameters: Parameters):
    """A cluster with the fabric's shape and rates, for the collective model (None where none maps)."""

    if fab.family == "torus" or fab.scale_up == "none":
        return None
    try:
        cluster = cluster_from_mapping({
            "base": base, "name": f"{fab.family} fabric", "gpus_per_node": int(fab.gpus_per_node),
            "scale_up_domain": int(fab.domain_size), "nics_per_node": int(fab.nics_per_node),
            "nic_bandwidth": f"{fab.nic_bytes_per_s / 1e9:.6g} GB/s",
            "scale_up_bandwidth": f"{fab.scale_up_bytes_per_s / 1e9:.6g} GB/s"}, origin="the simulated fabric",
            parameters=parameters)
    except TierwiseError:
        return None
    return None if getattr(cluster, "fitted", None) else cluster


def _contention(result: dict[str, Any], oversubscription: float | None, routing: str) -> str:
    why = []
    if oversubscription and oversubscription > 1:
        why.append(f"{oversubscription:g}:1 oversubscription")
    f = result.get("failures", {})
    if any(f.get(k) for k in ("failed_cables", "failed_switches", "failed_domains")):
        why.append("failed parts")
    if routing == "ecmp":
        why.append("ECMP hash collisions")
    links = result.get("bottleneck_links") or []
    saturated = links[0].get("saturated_in_phase", 0) if links else 0
    head = f"{saturated} links saturated" if saturated else "links shared by several flows"
    return head + (f" ({', '.join(why)})" if why else "")


def simulate_ring_notes(fab, result: dict[str, Any], base: str = "dgx-h100",
                        oversubscription: float | None = None, *,
                        parameters: Parameters | None = None) -> tuple[dict[str, Any], list[str]]:
    """For ``simulate``: (extra JSON fields, notes) saying why its ring time differs from the analytic one
    and from ``tierwise collective``'s (priced under ``parameters``; None, this being a command's entry point:
    :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    notes: list[str] = []
    extra: dict[str, Any] = {}
    t, a = float(result["time_s"]), float(result["analytic_time_s"])
    if t > 0 and a > 0 and abs(t / a - 1) > 0.01:
        notes.append(f"simulated {_ms(t)} vs analytic {_ms(a)} ({t / a - 1:+.0%}): the analytic ring assumes every "
                     f"rank gets its full share of the links; here {_contention(result, oversubscription, result['routing'])}")
    if result["pattern"] not in RING_KINDS or result["algorithm"] != "ring" or result["num_ranks_simulated"] < 2:
        return extra, notes
    cluster = _equivalent_cluster(fab, base, parameters)
    if cluster is None:
        return extra, notes

    n = int(result["num_ranks_simulated"])
    span = group_span(cluster, n, 1)
    model, line, parts = _model_parts(result["pattern"], float(result["size_bytes"]), span, cluster, parameters)
    extra["collective_model_time_s"] = model
    notes.append(f"against `tierwise collective`: on a non-blocking cluster of these figures it models this ring "
                 f"at {_ms(model)}, over the bytes at line rate ({_ms(line)}): "
                 f"{'; '.join(parts) or 'nothing measurable'}. This simulator charges line rate and each hop's "
                 "latency only, plus the sharing of links between flows")
    return extra, notes
