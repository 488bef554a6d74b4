"""Leaf incast and lossless-fabric congestion at flow level (issue 34): ``tierwise simulate incast``.

**The pattern.** ``fan_in`` senders, GPU 0 of nodes 1..N (the receiver's rail), each send ``S`` to one receiver,
GPU 0 of node 0: the many-to-one traffic of a hot expert's dispatch or of a parameter-server style gather. Each
sender also sends ``S`` to an idle GPU (a *victim* flow: its own destination is not congested, but it shares
the sender's NIC link, and under adaptive or ECMP routing some leaf and spine links, with the incast).

**Three ways the fabric shares it**, at flow level:

* ``max-min`` (ideal per-flow sharing): the receiver's link is the bottleneck, each incast flow runs at
  ``C / N`` and the victims take what their own links leave (Bertsekas & Gallager, *Data Networks*, section
  6.5.2, :mod:`.maxmin`). The incast takes ``N S / C``: the fan-in is a bandwidth term, no collapse (the
  fabric is lossless, so TCP's incast timeouts do not arise).
* ``dcqcn`` (ECN marking at the congested queue and rate-based backoff at the senders): DCQCN converges to the
  flows' fair share and keeps the queue below the PFC threshold, so victims are not paused (Zhu et al.,
  "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, sections 2 and 6); at flow level that
  is the max-min allocation. Its rate oscillation and convergence time (tens of microseconds to
  milliseconds) are packet-level dynamics, not modelled: the efficiency term is 1.
* ``pfc`` (priority flow control alone, no end-to-end congestion control; InfiniBand's credit flow control
  without its congestion control behaves alike): the congested egress fills its ingress queues, every
  ingress holding packets for it is paused, and the pause climbs hop by hop to the senders (the congestion
  tree). PFC pauses a port (and priority), not a flow, so a paused link's FIFO drains the incast's packets
  and the victim's in arrival order: every flow crossing a paused link leaves it at the rate of the congested
  flows on it, ``C / N`` (Zhu et al. section 2, "unfairness" and "victim flow"). Here: the paused links
  are those on an incast flow's path upstream of the receiver's link, and a victim crossing any of them runs
  at ``min(its max-min rate, the incast flows' rate there)``. A victim's slowdown is then about ``N - 1`` for
  ``N`` senders when it shares a NIC with one of them (the DCQCN paper's victim-flow experiment, section 2,
  shows the same direction: the victim's throughput falls as senders are added behind the congested port,
  and DCQCN restores it). One pass: the
  capacity a slowed victim leaves is not re-shared (PFC would leave it idle while the link is paused).

What is left to a packet-level simulator (SimAI's ns-3 backend, ASTRA-sim with its ns-3 network; see
docs/topology.md): buffer sizes and PFC thresholds, pause storms and deadlock, DCQCN's parameters and
oscillation, the time for the congestion tree to form and drain.
"""

from __future__ import annotations

import numpy as np

from tierwise.errors import TopologyError
from tierwise.netsim.maxmin import incidence, max_min_rates
from tierwise.netsim.routing import route
from tierwise.topology.graph import Fabric

__all__ = ["simulate_incast", "CONGESTION_MODES"]

CONGESTION_MODES = ("max-min", "dcqcn", "pfc")


def _flows(fab: Fabric, fan_in: int):
    """(src, dst, is_incast) of the pattern (module docstring); a one-line error when the fabric is too small."""
    gpn = max(fab.gpus_per_node, 1)
    nodes = fab.num_gpus // gpn
    if not 1 <= fan_in <= nodes - 2:
        raise TopologyError(f"--fan-in {fan_in} needs {fan_in + 2} servers (a receiver, {fan_in} senders and one "
                            f"for the victims' destinations); the fabric has {nodes}: use 1 <= --fan-in <= "
                            f"{max(nodes - 2, 1)} or more --gpus")
    senders = np.arange(1, fan_in + 1) * gpn
    idle = np.arange(fan_in + 1, nodes) * gpn
    victims_dst = idle[np.arange(fan_in) % idle.size]
    src = np.concatenate([senders, senders])
    dst = np.concatenate([np.zeros(fan_in, dtype=np.int64), victims_dst])
    return src, dst, np.arange(2 * fan_in) < fan_in


def _pfc_caps(res: np.ndarray, rate: np.ndarray, incast: np.ndarray) -> np.ndarray:
    """Per flow, the rate PFC's paused links allow it: the incast flows' slowest rate on each paused resource it
    crosses (inf where it crosses none). Paused: every resource on an incast path except its last (the
    receiver's link, the congested egress itself)."""
    cap = np.full(res.shape[0], np.inf)
    paused: dict[int, float] = {}
    for i in np.flatnonzero(incast):
        hops = res[i][res[i] >= 0]
        for r in hops[:-1]:
            paused[int(r)] = min(paused.get(int(r), np.inf), float(rate[i]))
    for i in range(res.shape[0]):
        for r in res[i][res[i] >= 0]:
            cap[i] = min(cap[i], paused.get(int(r), np.inf))
    return cap


def simulate_incast(fab: Fabric, fan_in: int, size_bytes: float, *, routing: str = "adaptive",
                    seed: int = 1) -> dict:
    """The ``simulate incast`` document: the incast's completion time and the victim flows' rate and time under
    max-min, DCQCN and PFC sharing (module docstring)."""
    if routing not in ("ecmp", "adaptive"):
        raise TopologyError(f"--routing {routing!r} is unknown; choose ecmp or adaptive")
    src, dst, incast = _flows(fab, int(fan_in))
    paths, ok = route(fab, src, dst, seed=seed)
    if not ok.all():
        raise TopologyError("some incast or victim flows have no path on this fabric; use a fat-tree or "
                            "rail-optimized --topology")
    if routing == "adaptive":
        res = np.where(paths >= 0, fab.link_group.astype(np.int32)[np.maximum(paths, 0)], np.int32(-1))
        cap = fab.group_capacity(fab.link_cap)
    else:
        res, cap = paths, fab.link_cap
    hops = res.shape[1]
    A = incidence(np.repeat(np.arange(src.size), hops), res.ravel(), src.size, cap.size)
    rate = max_min_rates(A, cap)
    lat = np.where(paths >= 0, fab.link_lat[np.maximum(paths, 0)], 0.0).sum(axis=1)
    pfc_rate = np.where(incast, rate, np.minimum(rate, _pfc_caps(res, rate, incast)))
    victim = ~incast

    def times(r):
        return size_bytes / r + lat

    t_fair, t_pfc = times(rate), times(pfc_rate)
    recv_cap = float(fab.link_cap[paths[0][paths[0] >= 0][-1]])
    return {
        "topology": fab.family, "pattern": "incast", "routing": routing, "seed": seed, "fan_in": int(fan_in),
        "size_bytes": float(size_bytes), "receiver": 0, "senders": src[incast].tolist(),
        "victim_destinations": dst[victim].tolist(),
        "incast_time_s": float(t_fair[incast].max()),
        "incast_analytic_time_s": float(fan_in * size_bytes / recv_cap + lat[incast].max()),
        "incast_flow_rate_bytes_per_s": float(rate[incast].min()),
        "victims": {
            mode: {"rate_bytes_per_s": float(r[victim].min()), "time_s": float(t[victim].max())}
            for mode, r, t in (("max-min", rate, t_fair), ("dcqcn", rate, t_fair), ("pfc", pfc_rate, t_pfc))
        },
        "victim_slowdown_pfc": float(t_pfc[victim].max() / t_fair[victim].max()),
        "notes": [
            "max-min and dcqcn: DCQCN converges to the fair share and keeps PFC from pausing (Zhu et al. SIGCOMM "
            "2015); its oscillation and convergence are packet-level, not modelled",
            "pfc: a paused link drains every flow at the congested flows' rate (port-level pause, FIFO); the "
            "victims' slowdown grows with --fan-in",
            "buffer sizes, PFC thresholds, pause storms and deadlock need a packet-level simulator (SimAI ns-3, "
            "ASTRA-sim): docs/topology.md",
        ],
    }
