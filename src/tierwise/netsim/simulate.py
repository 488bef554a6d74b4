"""Simulate a collective or traffic pattern on a fabric: routing, max-min sharing, completion time.

Steps: apply failures -> drop unreachable ranks -> turn the collective into phases of flows
(:mod:`.patterns`) -> route every flow (:mod:`.routing`; adaptive maps links to their groups) -> share
bandwidth max-min fairly (:mod:`.maxmin`) -> time each phase -> compare with the analytic model.

* pipelined phases (rings): each ring moves in lock step at its max-min rate; unit time =
  ``bytes / rate + steps x mean hop latency``; the phase ends with its slowest ring;
* direct phases (all-to-all, permutation, pipeline sends): flows finish at different times, and the rate a
  finished flow frees is re-shared (event-driven progressive filling, at most ``max_events`` rate
  changes; flows still running after that finish at their last rate, an upper bound);
* time is the sum over phases; algbw = S / time, busbw = algbw x bus_factor (nccl-tests definitions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tierwise.collectives.volumes import bus_factor
from tierwise.errors import TopologyError
from tierwise.netsim.analytic import analytic_time
from tierwise.netsim.classes import LUMP_KINDS, NotAggregated, class_problem
from tierwise.netsim.faults import Failures, apply_failures, slow_link_scale
from tierwise.netsim.maxmin import incidence, max_min_rates
from tierwise.netsim.patterns import Phase, collective_phases
from tierwise.netsim.routing import dragonfly_ugal, effective_nics, route
from tierwise.topology.graph import LINK_TIER_NAMES, Fabric

MAX_ALL_TO_ALL_RANKS = 1024
"""Per flow, an all-to-all of n ranks is n (n - 1) flows: 1,024 ranks (1 M flows) take seconds, 4,096 minutes
and 10 GB; path classes (:mod:`.classes`) have no such limit."""

__all__ = ["simulate", "KINDS"]

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "pipeline", "permutation")


@dataclass
class _PhaseResult:
    name: str
    time_s: float
    utilization: np.ndarray
    cap: np.ndarray
    lat_in: list
    lat_out: list
    describe: object = None
    """Name of a resource id when it is not a link or group (path classes' lumped endpoint links)."""


def _resources(fab: Fabric, paths: np.ndarray, link_cap: np.ndarray, routing: str):
    if routing == "adaptive":
        res = np.where(paths >= 0, fab.link_group.astype(np.int32)[np.maximum(paths, 0)], np.int32(-1))
        return res, fab.group_capacity(link_cap)
    return paths, link_cap


def _run_phase(fab, phase: Phase, paths, res, cap, max_events: int) -> _PhaseResult:
    lat_flow = np.where(paths >= 0, fab.link_lat[np.maximum(paths, 0)], 0.0).sum(axis=1)
    hops = paths.shape[1]
    num_units = int(phase.unit_bytes.size)
    w = None if phase.flow_weight is None else np.repeat(phase.flow_weight, hops)
    A = incidence(np.repeat(phase.unit, hops), res.ravel(), num_units, cap.size, weight=w)
    local = (phase.src // max(fab.domain_size, 1)) == (phase.dst // max(fab.domain_size, 1))
    if fab.scale_up == "none":
        local[:] = False
    if phase.pipelined:
        rate = max_min_rates(A, cap)
        cnt = np.bincount(phase.unit, minlength=num_units)
        mean_lat = np.bincount(phase.unit, weights=lat_flow, minlength=num_units) / np.maximum(cnt, 1)
        if phase.unit_steps_split is not None:
            steps_in, steps_out = phase.unit_steps_split
            lat_in = _mean_by_unit(phase.unit, lat_flow, local, num_units)
            lat_out = _mean_by_unit(phase.unit, lat_flow, ~local, num_units)
            latency = steps_in * lat_in + steps_out * lat_out
        else:
            latency = phase.unit_steps * mean_lat
        with np.errstate(divide="ignore"):
            unit_t = phase.unit_bytes / rate + latency
        unit_t = np.where(cnt > 0, unit_t, 0.0)
        time_s = float(unit_t.max()) if unit_t.size else 0.0
        load = A @ np.where(np.isfinite(rate), rate, 0.0)
    else:
        time_s, load = _direct(A, cap, phase.unit_bytes.astype(float), max_events)
        time_s += float(lat_flow.max()) if lat_flow.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cap > 0, load / cap, 0.0)
    lat_in = [float(lat_flow[local].mean())] if local.any() else []
    lat_out = [float(lat_flow[~local].mean())] if (~local).any() else []
    return _PhaseResult(phase.name, time_s, util, cap, lat_in, lat_out)


def _ugal(fab, ph: Phase, seed, link_ok, nics) -> Phase:
    """Expand a phase's flows into UGAL's minimal / Valiant sub-paths (same unit, bytes split by fraction)."""
    from dataclasses import replace

    rows, frac, paths, ok = dragonfly_ugal(fab, ph.src, ph.dst, seed=seed, link_ok=link_ok, nics=nics)
    w = frac if ph.flow_weight is None else ph.flow_weight[rows] * frac
    return replace(ph, src=ph.src[rows], dst=ph.dst[rows], unit=ph.unit[rows], flow_weight=w,
                   extra={"paths": paths, "ok": ok})


def _mean_by_unit(unit, value, mask, num_units):
    cnt = np.bincount(unit[mask], minlength=num_units)
    tot = np.bincount(unit[mask], weights=value[mask], minlength=num_units)
    return tot / np.maximum(cnt, 1)


def _direct(A, cap, size, max_events):
    """Event-driven max-min: returns (transfer time, resource load of the first allocation)."""
    remaining = size.copy()
    active = remaining > 0
    t = 0.0
    first_load = None
    A = A.tocsr()
    AT = A.T.tocsr()
    for _ in range(max_events):
        if not active.any():
            break
        rate = max_min_rates(A, cap, active=active, rel_tol=1e-3, AT=AT)
        if first_load is None:
            first_load = A @ np.where(active & np.isfinite(rate), rate, 0.0)
        r = rate[active]
        if np.any(r <= 0):
            return float("inf"), first_load
        with np.errstate(divide="ignore"):
            finish = remaining[active] / r
        dt = float(finish.min())
        if not np.isfinite(dt):
            break
        idx = np.nonzero(active)[0]
        done = finish <= dt * (1 + 1e-6) + 1e-18
        remaining[idx] -= np.where(np.isfinite(r), r * dt, remaining[idx])
        active[idx[done]] = False
        remaining[idx[done]] = 0.0
        t += dt
    else:
        if active.any():
            t += float((remaining[active] / rate[active]).max())
    return t, (first_load if first_load is not None else np.zeros(cap.size))


def _run_classes(fab: Fabric, prob, flow_bytes: float, max_events: int) -> _PhaseResult:
    """A direct all-to-all's phase from its path classes (:mod:`.classes`): same event-driven sharing."""
    size = np.full(prob.unit_flows.size, float(flow_bytes))
    time_s, load = _direct(prob.A, prob.cap, size, max_events)
    time_s += float(prob.unit_lat_max.max()) if prob.unit_lat_max.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(prob.cap > 0, load / prob.cap, 0.0)
    loc = prob.unit_local
    w = prob.unit_flows * prob.unit_paths
    lat_in = [float((prob.unit_lat_mean[loc] * w[loc]).sum() / w[loc].sum())] if loc.any() else []
    lat_out = [float((prob.unit_lat_mean[~loc] * w[~loc]).sum() / w[~loc].sum())] if (~loc).any() else []

    def describe(res_id: int, routing: str) -> str:
        if res_id < prob.num_fabric:
            return _describe(fab, res_id, routing)
        k = res_id - prob.num_fabric

        members = int(prob.lump_links[k])
        return (f"{LUMP_KINDS[int(prob.lump_kind[k])]} links of {_node_name(fab, int(prob.lump_edge[k]))}'s "
                f"GPUs ({members} links loaded alike)")

    return _PhaseResult("all-to-all", time_s, util, prob.cap, lat_in, lat_out, describe)


def _describe(fab: Fabric, res_id: int, routing: str) -> str:
    members = np.nonzero(fab.link_group == res_id)[0] if routing == "adaptive" else np.array([res_id])
    link = members[0]
    tier = LINK_TIER_NAMES.get(int(fab.link_tier[link]), "?")
    s, d = int(fab.link_src[link]), int(fab.link_dst[link])
    text = f"{tier} {_node_name(fab, s)} -> {_node_name(fab, d)}"
    if members.size > 1:
        text += f" (+{members.size - 1} parallel links sprayed together)"
    return text


def _name_failed_parts(fab: Fabric, counts: dict) -> dict:
    """``counts`` with the failed parts' ids replaced by names: cables as ``tier a <-> b``, switches by their
    node name, scale-up domains with their GPUs."""
    ids = counts.pop("failed_ids", {})
    cables = []
    for cable in ids.get("cables", []):
        link = int(np.nonzero(fab.link_cable == cable)[0][0])
        tier = LINK_TIER_NAMES.get(int(fab.link_tier[link]), "?")
        a, b = sorted((int(fab.link_src[link]), int(fab.link_dst[link])))
        cables.append(f"{tier} {_node_name(fab, a)} <-> {_node_name(fab, b)}")
    dom = max(fab.domain_size, 1)
    counts["failed_parts"] = {
        "cables": cables,
        "switches": [_node_name(fab, int(s)) for s in ids.get("switches", [])],
        "domains": [f"domain {d} (GPUs {d * dom}-{(d + 1) * dom - 1})" for d in ids.get("domains", [])],
    }
    return counts


def _node_name(fab: Fabric, node: int) -> str:
    kind = int(fab.node_kind[node])
    if kind == 0:
        return f"gpu{node}"
    if kind == 1:
        return f"scaleup-switch{node}"
    if kind == 2:
        return f"nic{node}"
    tier = int(fab.node_tier[node])
    if fab.family == "dragonfly":
        return f"router{node}"
    three = bool((fab.node_tier == 3).any())
    return {1: "leaf", 2: "agg" if three else "spine", 3: "core"}.get(tier, "switch") + str(node)


def simulate(fab: Fabric, kind: str, size_bytes: float, *, algorithm: str = "auto", num_ranks: int | None = None,
             routing: str = "adaptive", seed: int = 1, failures: Failures | None = None, stages: int = 4, shift: int | None = None,
             max_events: int = 8, compare_healthy: bool = True, per_flow: bool = False) -> dict:
    """Simulate; returns a JSON-ready dict (time_s, algbw/busbw, analytic_time_s, bottleneck_links, ...).

    A direct all-to-all runs on path classes (:mod:`.classes`) where they model the fabric, else (or with
    ``per_flow``) one flow per GPU pair, up to ``MAX_ALL_TO_ALL_RANKS`` ranks; ``method`` says which ran.
    """
    algorithm, n = _checked(fab, kind, algorithm, num_ranks, routing, stages, shift)
    ask = _Ask(kind, algorithm, size_bytes, n, stages, shift)
    failures = failures or Failures()
    net, unreachable, counts = _degraded(fab, failures, routing, seed, max_events, n)
    method, results, hop_choices, alive = "per flow", None, "hashed", None
    if kind == "all-to-all" and algorithm == "direct":
        results, alive, hop_choices = _all_to_all_classes(net, ask, unreachable, per_flow, bool(counts["slow_cables"]))
        method = "per flow" if results is None else "path classes"
    routed = []
    if results is None:
        alive, routed, unreachable = _route_phases(net, ask, unreachable)
    _check_alive(alive, n, failures)
    if results is None:
        results = [_run_phase(fab, ph, p, r, c, max_events) for ph, p, r, c in routed]
    out = _document(net, ask, results, alive, method=method, hop_choices=hop_choices, unreachable=unreachable,
                    counts=counts)
    if failures.any and compare_healthy:
        healthy = simulate(fab, kind, size_bytes, algorithm=algorithm, num_ranks=n, routing=routing, seed=seed,
                           stages=stages, shift=shift, max_events=max_events, compare_healthy=False,
                           per_flow=method == "per flow")  # the healthy run by the same method
        out["healthy_time_s"] = healthy["time_s"]
        out["degradation"] = out["time_s"] / healthy["time_s"] if healthy["time_s"] else None
    return out


class _Ask(NamedTuple):
    """The pattern asked for: its kind, algorithm (``auto`` resolved), bytes, ranks, pipeline stages, shift."""

    kind: str
    algorithm: str
    size_bytes: float
    num_ranks: int
    stages: int
    shift: int | None


@dataclass(frozen=True)
class _Net:
    """The fabric as the failures leave it and how flows cross it: live links, each GPU's NIC, link rates."""

    fab: Fabric
    routing: str
    seed: int
    max_events: int
    link_ok: np.ndarray
    nics: np.ndarray
    link_cap: np.ndarray


def _checked(fab: Fabric, kind: str, algorithm: str, num_ranks: int | None, routing: str, stages: int,
             shift: int | None) -> tuple[str, int]:
    """The algorithm (``auto``: ring for the reductions and gathers, else direct) and rank count, after one clear
    error for each option the fabric or the pattern cannot take."""
    if kind not in KINDS:
        raise TopologyError(f"unknown pattern {kind!r}; choose one of {', '.join(KINDS)}")
    if routing not in ("ecmp", "adaptive"):
        raise TopologyError(f"--routing {routing!r} is unknown; choose ecmp or adaptive")
    if algorithm == "auto":
        algorithm = "ring" if kind in ("all-reduce", "all-gather", "reduce-scatter") else "direct"
    n = fab.num_gpus if num_ranks is None else int(num_ranks)
    if not 2 <= n <= fab.num_gpus:
        raise TopologyError(f"--ranks {n} must be between 2 and the fabric's {fab.num_gpus} GPUs")
    if kind == "pipeline" and not 2 <= stages <= n:
        raise TopologyError(f"--stages {stages} is out of range; use 2 <= --stages <= {n} (the ranks simulated)")
    if kind == "permutation" and shift is not None and shift % n == 0:
        raise TopologyError(f"--shift {shift} sends every rank to itself on {n} ranks; use a shift that is not a "
                            f"multiple of {n}, e.g. --shift 1, or drop --shift for a random permutation")
    return algorithm, n


def _degraded(fab: Fabric, failures: Failures, routing: str, seed: int, max_events: int,
              n: int) -> tuple[_Net, set, dict]:
    """The fabric after ``failures``, the ranks (of the first ``n``) already cut off (a dead GPU; a GPU without a
    NIC when the group leaves its scale-up domain), and the failure counts with the failed parts named."""
    link_ok, gpu_dead, counts = apply_failures(fab, failures, seed)
    slow_scale, counts["slow_cables"] = slow_link_scale(fab, failures, seed)
    counts = _name_failed_parts(fab, counts)
    nics = effective_nics(fab, link_ok)
    unreachable = set(np.nonzero(gpu_dead[:n])[0].tolist())
    if fab.domain_size < n or fab.scale_up == "none":
        unreachable |= set(np.nonzero(nics[:n] < 0)[0].tolist())
    net = _Net(fab, routing, seed, max_events, link_ok, nics, fab.link_cap * link_ok * slow_scale)
    return net, unreachable, counts


def _alive(n: int, unreachable: set) -> np.ndarray:
    """The ranks below ``n`` not in ``unreachable``."""
    return np.setdiff1d(np.arange(n), np.fromiter(unreachable, dtype=np.int64, count=len(unreachable)))


def _all_to_all_classes(net: _Net, ask: _Ask, unreachable: set, per_flow: bool, slow_cables: bool):
    """A direct all-to-all on path classes: ([its one phase], live ranks, hop choices), or ``None`` for the
    phase when classes do not model this fabric (or ``per_flow`` asks for flows); then an error when per-flow
    would take too long."""
    fab = net.fab
    alive = _alive(ask.num_ranks, unreachable)
    why = "--per-flow asks for it" if per_flow else "path classes do not model slow cables"
    if not per_flow and alive.size >= 2 and not slow_cables:
        try:
            prob = class_problem(fab, alive, routing=net.routing, seed=net.seed, link_ok=net.link_ok, nics=net.nics,
                                 link_cap=net.link_cap)
            return [_run_classes(fab, prob, ask.size_bytes / alive.size, net.max_events)], alive, prob.hop_choices
        except NotAggregated as e:
            why = f"path classes do not model {e}"
    n = ask.num_ranks
    if n > MAX_ALL_TO_ALL_RANKS:
        raise TopologyError(f"an all-to-all of {n} ranks is {n * (n - 1):,} flows, more than the per-flow "
                            f"simulator finishes in minutes ({why}); use --ranks <= {MAX_ALL_TO_ALL_RANKS} "
                            f"(a subset of the fabric's GPUs)")
    return None, alive, "hashed"


def _route_phases(net: _Net, ask: _Ask, unreachable: set) -> tuple[np.ndarray, list, set]:
    """Live ranks, routed phases ``(phase, paths, resources, capacities)`` and the unreachable ranks: the
    collective's phases are routed over the live ranks; a rank whose flow finds no path (or only dead
    capacity) is dropped and the phases rebuilt, at most four rounds."""
    fab = net.fab
    unreachable = set(unreachable)
    for _ in range(4):
        alive = _alive(ask.num_ranks, unreachable)
        phases = collective_phases(ask.kind, ask.algorithm, alive, fab.domain_size if fab.scale_up != "none" else 1,
                                   ask.size_bytes, seed=net.seed, stages=ask.stages, shift=ask.shift)
        routed, newly = [], set()
        for ph in phases:
            if fab.family == "dragonfly" and net.routing == "adaptive":
                ph = _ugal(fab, ph, net.seed, net.link_ok, net.nics)
                paths, ok = ph.extra.pop("paths"), ph.extra.pop("ok")
            else:
                paths, ok = route(fab, ph.src, ph.dst, seed=net.seed, link_ok=net.link_ok, nics=net.nics)
            res, cap = _resources(fab, paths, net.link_cap, net.routing)
            zero = ((res >= 0) & (cap[np.maximum(res, 0)] <= 0)).any(axis=1)
            bad = ~ok | zero
            newly |= set(ph.src[bad].tolist())
            routed.append((ph, paths, res, cap))
        if not newly:
            break
        unreachable |= newly
    return alive, routed, unreachable


def _check_alive(alive: np.ndarray, n: int, failures: Failures) -> None:
    """An error when fewer than two ranks can reach each other: never a collective that "takes 0 ns"."""
    if int(alive.size) < 2:
        asked = ", ".join(f"--fail-{name} {value}" for name, value in (("links", failures.links),
                          ("switches", failures.switches), ("domains", failures.domains))
                          if str(value).strip() not in ("0", "0%", ""))
        raise TopologyError(f"with {asked or 'these failures'}, {int(alive.size)} of {n} ranks can reach each other; "
                            "a collective needs at least 2: fail fewer parts")


def _document(net: _Net, ask: _Ask, results: list[_PhaseResult], alive: np.ndarray, *, method: str,
              hop_choices: str, unreachable: set, counts: dict) -> dict:
    """The JSON document: time, algbw and busbw (nccl-tests' definitions), the analytic time at the mean hop
    latencies, phases, bottleneck links, failures and the link-utilization histogram."""
    fab, size_bytes, n = net.fab, ask.size_bytes, ask.num_ranks
    time_s = sum(r.time_s for r in results)
    n_alive = int(alive.size)
    dom = fab.domain_size if fab.scale_up != "none" else 1
    nl = int(np.bincount(alive // dom).max()) if n_alive else 1
    l_in = float(np.mean([x for r in results for x in r.lat_in])) if any(r.lat_in for r in results) else 0.0
    l_out = float(np.mean([x for r in results for x in r.lat_out])) if any(r.lat_out for r in results) else 0.0
    return {
        "topology": fab.family,
        "pattern": ask.kind,
        "algorithm": ask.algorithm,
        "routing": net.routing,
        "method": method,
        "hop_choices": hop_choices,
        "seed": net.seed,
        "shift": ask.shift,
        "size_bytes": float(size_bytes),
        "num_ranks": n,
        "num_ranks_simulated": n_alive,
        "unreachable_ranks": sorted(int(x) for x in unreachable),
        "time_s": time_s,
        "algbw_bytes_per_s": size_bytes / time_s if time_s > 0 else 0.0,
        "busbw_bytes_per_s": (float(bus_factor(_bus_kind(ask.kind), n_alive)) * size_bytes / time_s
                              if time_s and n_alive >= 2 else 0.0),
        "analytic_time_s": (analytic_time(fab, ask.kind, ask.algorithm, size_bytes, n_alive, nl, l_in, l_out)
                            if n_alive >= 2 else 0.0),
        "latency_in_s": l_in,
        "latency_out_s": l_out,
        "phases": [{"name": r.name, "time_s": r.time_s} for r in results],
        "bottleneck_links": _bottlenecks(fab, results, net.routing),
        "failures": counts,
        "link_utilization": _utilization_histogram(results),  # issue 19: the simulate --html histogram
    }


def _bus_kind(kind: str) -> str:
    return kind if kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all") else "send-recv"


def _bottlenecks(fab: Fabric, results: list[_PhaseResult], routing: str, top: int = 5) -> list[dict]:
    if not results:
        return []
    worst = max(results, key=lambda r: r.time_s)
    util = worst.utilization
    order = np.argsort(-util)[:top]
    saturated = int((util >= 0.999).sum())
    name = worst.describe or (lambda i, r: _describe(fab, i, r))
    return [{"link": name(int(i), routing), "utilization": float(util[i]), "phase": worst.name,
             "saturated_in_phase": saturated} for i in order if util[i] > 0]


def _utilization_histogram(results: list[_PhaseResult], bins: int = 20) -> dict:
    """Histogram of link utilisation in the slowest phase (the one ``bottleneck_links`` lists): links with any
    load, counted in ``bins`` equal bins of [0, 1] (a link at exactly 1 falls in the last); idle links apart.
    Under adaptive routing the "links" are the routing groups the simulator shares (parallel cables pooled)."""
    if not results:
        return {"phase": None, "edges": [], "counts": [], "links": 0, "idle_links": 0}
    worst = max(results, key=lambda r: r.time_s)
    util = np.clip(np.asarray(worst.utilization, dtype=float), 0.0, 1.0)
    used = util[util > 0]
    counts, edges = np.histogram(used, bins=bins, range=(0.0, 1.0))
    return {"phase": worst.name, "edges": edges.tolist(), "counts": counts.tolist(), "links": int(util.size),
            "idle_links": int(util.size - used.size)}
