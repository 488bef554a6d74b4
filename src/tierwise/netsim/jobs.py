"""Two jobs on one fabric (issue 34): where each job's ranks sit, and how much their collectives slow each other.

``simulate PATTERN --second-job PATTERN2 --placement packed|fragmented`` splits the fabric's servers between
two jobs of equal size:

* ``packed``: job A on the first half of the servers, job B on the second (whole leaves, and on a 3-tier
  fabric whole pods, per job where the halves align with them: a scheduler that packs jobs);
* ``fragmented``: servers alternate between the jobs (A on even servers, B on odd), so both jobs sit under
  every leaf (a fragmented cluster after churn).

Each job's collective is one phase of flows (:func:`tierwise.netsim.patterns.collective_phases`: a ring
all-reduce / all-gather / reduce-scatter, a direct all-to-all, a permutation). The two phases are routed and
shared max-min fairly on the fabric together (:mod:`.maxmin`; a ring moves in lock step as one unit, an
all-to-all's flows each on their own), re-shared each time a unit finishes (event-driven, as ``simulate``'s
direct phases); each job's time is its last unit's finish plus its path latency, and the same run with the
job alone gives its time alone. ``slowdown`` = together / alone. Sharing is per flow (what per-QP congestion
control converges to), so a ring's few flows get no more of a shared link than each of an all-to-all's many:
a ring sharing a bottleneck with an all-to-all slows until the all-to-all ends.

Interference needs a shared link that is the bottleneck: on a non-blocking Clos with adaptive routing two
jobs do not slow each other whatever their placement (every leaf's uplinks carry what its NICs send); under
oversubscription a fragmented placement puts both jobs' traffic on the same uplinks (x2 at 2:1, while packed
jobs each fill only their own leaves' uplinks), and ECMP hashing adds collisions between the jobs' flows.
"""

from __future__ import annotations

import numpy as np

from tierwise.errors import TopologyError
from tierwise.netsim.maxmin import incidence, max_min_rates
from tierwise.netsim.patterns import collective_phases
from tierwise.netsim.routing import route
from tierwise.topology.graph import Fabric

__all__ = ["simulate_two_jobs", "PLACEMENTS", "place_jobs"]

PLACEMENTS = ("packed", "fragmented")


def place_jobs(fab: Fabric, placement: str) -> tuple[np.ndarray, np.ndarray]:
    """The GPUs of job A and job B (module docstring): whole servers, half the fabric each."""
    if placement not in PLACEMENTS:
        raise TopologyError(f"--placement {placement!r} is unknown; choose one of {', '.join(PLACEMENTS)}")
    gpn = max(fab.gpus_per_node, 1)
    nodes = fab.num_gpus // gpn
    if nodes < 4:
        raise TopologyError(f"two jobs need at least 4 servers (2 each); the fabric has {nodes}: use more --gpus")
    half = nodes // 2
    node_ids = np.arange(2 * half)
    a_nodes = node_ids[:half] if placement == "packed" else node_ids[0::2]
    b_nodes = node_ids[half:] if placement == "packed" else node_ids[1::2]

    def gpus(ns):
        return (ns[:, None] * gpn + np.arange(gpn)[None, :]).ravel()

    return gpus(a_nodes), gpus(b_nodes)


def _phase(fab: Fabric, kind: str, ranks: np.ndarray, size_bytes: float, seed: int):
    algorithm = "ring" if kind in ("all-reduce", "all-gather", "reduce-scatter") else "direct"
    phases = collective_phases(kind, algorithm, ranks, fab.domain_size if fab.scale_up != "none" else 1,
                               size_bytes, seed=seed)
    if len(phases) != 1:
        raise TopologyError(f"a second job runs one phase of flows; {kind} ({algorithm}) has {len(phases)}")
    return phases[0]


def _job_times(fab, phases, routing: str, seed: int) -> list[float]:
    """Each phase's time when all of ``phases`` share the fabric (first max-min allocation)."""
    units, res_rows, weights, latency, offsets = [], [], [], [], [0]
    for ph in phases:
        paths, ok = route(fab, ph.src, ph.dst, seed=seed)
        if not ok.all():
            raise TopologyError("some flows of the two jobs have no path on this fabric")
        res = (np.where(paths >= 0, fab.link_group.astype(np.int32)[np.maximum(paths, 0)], np.int32(-1))
               if routing == "adaptive" else paths)
        hops = paths.shape[1]
        units.append(np.repeat(ph.unit + offsets[-1], hops))
        res_rows.append(res.ravel())
        w = np.ones(ph.src.size) if ph.flow_weight is None else ph.flow_weight
        weights.append(np.repeat(w, hops))
        latency.append(np.where(paths >= 0, fab.link_lat[np.maximum(paths, 0)], 0.0).sum(axis=1))
        offsets.append(offsets[-1] + int(ph.unit_bytes.size))
    cap = fab.group_capacity(fab.link_cap) if routing == "adaptive" else fab.link_cap
    A = incidence(np.concatenate(units), np.concatenate(res_rows), offsets[-1], cap.size,
                  weight=np.concatenate(weights))
    finish = _finish_times(A, cap, np.concatenate([ph.unit_bytes for ph in phases]).astype(float))
    return [float(finish[offsets[k]:offsets[k + 1]].max() + latency[k].max()) for k in range(len(phases))]


EVENT_TOLERANCE = 0.02
"""Units due to finish within 2% of the elapsed time after the next finish finish with it (their last bytes
are dropped, an error under 2% of a unit's time): ECMP spreads an all-to-all's finishes over thousands of
distinct times, and each event costs one max-min allocation; this bounds the events to about
``log(t_end / t_first) / log(1.02)``."""


def _finish_times(A, cap, size, max_events: int = 256) -> np.ndarray:
    """Each unit's finish time under event-driven max-min sharing: the rates are re-shared whenever a unit
    finishes (progressive filling, as :func:`tierwise.netsim.simulate._direct`; finishes within
    :data:`EVENT_TOLERANCE` are one event); units still running after ``max_events`` re-allocations finish at
    their last rate."""
    remaining, finish = size.copy(), np.zeros(size.size)
    active = remaining > 0
    AT, t = A.T.tocsr(), 0.0
    for _ in range(max_events):
        if not active.any():
            return finish
        rate = max_min_rates(A, cap, active=active, rel_tol=1e-3, AT=AT)
        idx = np.flatnonzero(active)
        if np.any(rate[idx] <= 0):
            raise TopologyError("a flow of the two jobs gets no bandwidth (a link of capacity 0 on its path)")
        with np.errstate(divide="ignore"):
            left = remaining[idx] / rate[idx]
        dt = float(left.min())
        done = t + left <= (t + dt) * (1 + EVENT_TOLERANCE) + 1e-18
        remaining[idx] -= np.where(np.isfinite(rate[idx]), rate[idx] * dt, remaining[idx])
        t += dt
        finish[idx[done]] = t
        active[idx[done]] = False
    idx = np.flatnonzero(active)
    finish[idx] = t + remaining[idx] / rate[idx]
    return finish


def simulate_two_jobs(fab: Fabric, kind: str, second_kind: str, size_bytes: float, *, placement: str = "packed",
                      routing: str = "adaptive", seed: int = 1) -> dict:
    """The two-job document (module docstring): each job's time alone and together, and the slowdowns."""
    if routing not in ("ecmp", "adaptive"):
        raise TopologyError(f"--routing {routing!r} is unknown; choose ecmp or adaptive")
    a, b = place_jobs(fab, placement)
    pa, pb = _phase(fab, kind, a, size_bytes, seed), _phase(fab, second_kind, b, size_bytes, seed)
    alone = [_job_times(fab, [pa], routing, seed)[0], _job_times(fab, [pb], routing, seed)[0]]
    together = _job_times(fab, [pa, pb], routing, seed)
    jobs = []
    for name, pattern, gpus, t_alone, t_both in (("A", kind, a, alone[0], together[0]),
                                                 ("B", second_kind, b, alone[1], together[1])):
        jobs.append({"job": name, "pattern": pattern, "gpus": int(gpus.size), "first_gpus": gpus[:8].tolist(),
                     "alone_time_s": t_alone, "together_time_s": t_both, "slowdown": t_both / t_alone})
    return {"topology": fab.family, "placement": placement, "routing": routing, "seed": seed,
            "size_bytes": float(size_bytes), "jobs": jobs, "slowdown": max(j["slowdown"] for j in jobs),
            "notes": ["per-flow max-min sharing, re-shared as units finish (rings move in lock step)",
                      "interference needs a shared bottleneck link: oversubscribed uplinks under a "
                      "fragmented placement, or ECMP collisions"]}
