"""Goodput of a training job: failure rates x component counts -> MTTI; the plan's memory -> checkpoint
size and times; Daly's interval and expected wall time -> ETTR; the fault domain -> spares and the GPUs a
failure takes out. Vectorized over plans (one model, one cluster, one GPU count), so ``plan --goodput``
ranks a batch at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tierwise.estimate import estimate
from tierwise.goodput.checkpoint import checkpoint_costs
from tierwise.goodput.domain import fault_domain, spares_needed, unit_of
from tierwise.goodput.interval import daly_ettr, daly_interval, first_order_ettr, young_interval
from tierwise.goodput.inventory import component_counts
from tierwise.goodput.rates import ComponentSpec, GoodputError, load_rates
from tierwise.goodput.results import (
    CheckpointCosts,
    ComponentRate,
    FailureModel,
    GoodputEstimate,
    GoodputEvaluation,
    LostTime,
)
from tierwise.goodput.simulate import MAX_EVENTS, MAX_EVENTS_PER_RUN, SimulatedEttr, simulate
from tierwise.hierarchy import TIER_ORDER
from tierwise.limits import check_float, check_int
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.topology.choose import FabricOverrides

__all__ = ["GoodputOptions", "failure_model", "evaluate", "goodput", "goodput_at", "WRITE_MODES"]

WRITE_MODES = ("auto", "async", "sync")
DAY_S = 86400.0
MAX_DAYS = 3650.0
MAX_RUNS = 100_000


@dataclass(frozen=True, kw_only=True)
class GoodputOptions:
    """What the user may set; ``None`` means the tool chooses (and lists it under ``assumed``)."""

    failure_rates: str | None = None
    """A rates file overriding the shipped catalog (:func:`tierwise.goodput.rates.load_rates`)."""
    node_failure_rate: float | None = None
    """All-cause failures per node (host) per day: replaces the per-part rates."""
    checkpoint_interval_s: float | None = None
    """Compute seconds between checkpoints; ``None`` = Daly's optimum."""
    checkpoint_write: str | float = "auto"
    """``auto``/``async`` (two-stage: only the GPU-to-host copy blocks), ``sync`` (the whole write blocks) or
    the blocking seconds."""
    storage_bytes_per_s: float | None = None
    """Aggregate checkpoint storage bandwidth (write and read); ``None`` = the catalog's per-GPU share."""
    restart_s: float | None = None
    """Failure to resumed progress; ``None`` = detection + checkpoint restore + one step."""
    spares: int | None = None
    """Spare units (nodes or racks, as the fault domain says) for the Monte Carlo; ``None`` = always one."""
    days: float = 30.0
    runs: int = 0
    seed: int = 0
    tokens: float | None = None
    fabric: FabricOverrides | None = None
    """The user's fabric overrides (``--topology --fabric --radix --tiers --oversubscription``) for the inventory's
    fabric (:func:`tierwise.topology.choose.choose_fabric`)."""

    def __post_init__(self) -> None:
        e = GoodputError
        if self.node_failure_rate is not None and self.failure_rates is not None:
            raise e("give --failure-rates or --node-failure-rate, not both (the node rate replaces every part's rate)")
        if self.node_failure_rate is not None:
            check_float(self.node_failure_rate, "--node-failure-rate", minimum=0.0, maximum=1e4, error=e,
                        hint=" failures per node per day")
        if self.checkpoint_interval_s is not None:
            check_float(self.checkpoint_interval_s, "--checkpoint-interval", minimum=0.0, min_open=True,
                        maximum=MAX_DAYS * DAY_S, error=e, hint=" seconds")
        if isinstance(self.checkpoint_write, str):
            if self.checkpoint_write not in WRITE_MODES:
                raise e(f"--checkpoint-write {self.checkpoint_write!r}; give auto, async, sync or a time such as 30s")
        else:
            check_float(self.checkpoint_write, "--checkpoint-write", minimum=0.0, maximum=DAY_S, error=e,
                        hint=" seconds")
        if self.storage_bytes_per_s is not None:
            check_float(self.storage_bytes_per_s, "--storage-bandwidth", minimum=0.0, min_open=True, maximum=1e18,
                        error=e, hint=" B/s")
        if self.restart_s is not None:
            check_float(self.restart_s, "--restart-time", minimum=0.0, maximum=MAX_DAYS * DAY_S, error=e,
                        hint=" seconds")
        if self.spares is not None:
            check_int(self.spares, "--spares", minimum=0, maximum=1_000_000, error=e)
        check_float(self.days, "--days", minimum=0.0, min_open=True, maximum=MAX_DAYS, error=e)
        check_int(self.runs, "--runs", minimum=0, maximum=MAX_RUNS, error=e)
        check_int(self.seed, "--seed", minimum=0, maximum=2**63 - 1, error=e)
        if self.tokens is not None:
            check_float(self.tokens, "--tokens", minimum=0.0, min_open=True, maximum=1e18, error=e)


def failure_model(cluster, num_gpus: int, opts: GoodputOptions) -> FailureModel:
    """Components with their counts and rates; the job's interruptions per day and MTTI (s).

    The job is a series system: it stops when any part stops, so its rate is the sum of part rates times
    counts, ``Lambda = sum_i n_i lambda_i`` (independent exponential lifetimes), and ``MTTI = 1 / Lambda``.
    """

    check_int(num_gpus, "--gpus", minimum=1, error=GoodputError)
    rates = load_rates(opts.failure_rates)
    counts, how = component_counts(cluster, num_gpus, rates, opts.fabric)
    assumed: list[str] = []
    if opts.node_failure_rate is not None:
        comps = {"node": ComponentSpec(per="node", kind="hardware", rate_per_day=float(opts.node_failure_rate),
                                       source="--node-failure-rate (all causes, per node per day)")}
    else:
        comps = rates.components
        zero = [k for k, c in comps.items() if c.rate_per_day == 0 and not c.source.startswith("included in")]
        if zero and opts.failure_rates is None:
            assumed.append(f"no independent rate shipped for {', '.join(zero)} (counted 0; each one's source in "
                           "--json by_component says why); "
                           "give them with --failure-rates or use --node-failure-rate")
    rows = []
    for name, c in comps.items():
        n = int(counts[c.per])
        rows.append(ComponentRate(component=name, per=c.per, kind=c.kind, count=n,
                                  rate_per_part_per_day=c.rate_per_day, rate_per_day=n * c.rate_per_day,
                                  source=c.source))
    return FailureModel.of(rows, counts=counts, counted=how, assumed=assumed, rates=rates)


def _interval(ck: CheckpointCosts, mtti: float, step_s, opts: GoodputOptions, n: int) -> tuple[np.ndarray, list[str]]:
    """Compute seconds between checkpoints: Daly's optimum (raised to the drain, rounded to whole steps) or
    the user's, which must be longer than the checkpoint's write."""
    delta, drain = ck.blocking_s, ck.drain_s
    assumed: list[str] = []
    if opts.checkpoint_interval_s is not None:
        tau = np.full(n, float(opts.checkpoint_interval_s))
        floor = np.maximum(delta, drain)
        if np.any(tau <= floor):
            i = int(np.argmax(floor))
            raise GoodputError(f"--checkpoint-interval {tau[i]:g}s is not longer than the checkpoint write "
                               f"({floor[i]:.3g}s); give an interval > {floor[i]:.3g}s or leave it out (auto)")
        return tau, assumed
    if not math.isfinite(mtti):
        return np.full(n, opts.days * DAY_S), ["no failures counted: one checkpoint per run"]
    daly = daly_interval(delta, mtti)
    tau = np.maximum(daly, drain - delta)
    if np.any(drain - delta > daly):
        assumed.append("Daly's interval is shorter than the background drain; the interval is raised to the drain "
                       "time (a checkpoint cannot start before the previous one is on storage)")
    # checkpoints are taken between steps: the nearest whole number of steps, at least one
    return np.maximum(np.rint(tau / step_s), 1.0) * step_s, assumed


def evaluate(model, cluster, num_gpus: int, plans, est, opts: GoodputOptions,
             fm: FailureModel | None = None, *, parameters: Parameters) -> GoodputEvaluation:
    """Arrays over the plans of ``est`` (a :class:`~tierwise.estimate.step.StepEstimates` of ``plans``).

    The checkpoint's size and times come from :func:`tierwise.goodput.checkpoint.checkpoint_costs`, the
    interval ``tau`` from Daly's optimum (or the user), and ``ETTR = daly_ettr(tau, delta, R + drain, M)``
    (:mod:`tierwise.goodput.interval`); the fault domain per plan from :mod:`tierwise.goodput.domain`.
    ``parameters``: the model's (:mod:`tierwise.specs.parameters`), those ``est`` was priced under.
    """

    fm = fm or failure_model(cluster, num_gpus, opts)
    n = len(est)
    ck, assumed = checkpoint_costs(model, cluster, num_gpus, est, opts, fm.rates, parameters=parameters)
    m = fm.mtti_s
    tau, more = _interval(ck, m, est.step_time_s, opts, n)
    delta, drain, restart = ck.blocking_s, ck.drain_s, ck.restart_s
    if math.isfinite(m):
        ettr = np.clip(daly_ettr(tau, delta, restart + drain, m), 0.0, 1.0)
        first = first_order_ettr(tau, delta, restart + drain, m)
        young = young_interval(delta, m)
    else:
        ettr = first = tau / (tau + delta)
        young = np.full(n, math.inf)
    fault_domains, spare = _domains(cluster, plans, est, fm, num_gpus)
    return GoodputEvaluation(checkpoint=ck, checkpoint_interval_s=tau, young_interval_s=young, ettr=ettr,
                             ettr_first_order=first, goodput_tokens_per_s=est.tokens_per_s * ettr,
                             assumed=(*fm.assumed, *assumed, *more), failure_model=fm, fault_domain=fault_domains,
                             spare_gpus_p99=spare)


def _domains(cluster, plans, est, fm: FailureModel, num_gpus: int) -> tuple[list[dict], np.ndarray]:
    """Per plan: scale-up group, the unit one failure excludes, spares at p99 (vectorized: the fault domain
    depends on the plan only through its scale-up group size, so it is computed once per distinct size)."""

    rates = fm.rates
    inside = [TIER_ORDER.index("local"), TIER_ORDER.index("scale_up")]
    ranks = {"tp": plans.tp, "cp": plans.cp, "ep": plans.ep, "pp": plans.pp, "dp": plans.dp * plans.cp}
    group = np.ones(len(est), dtype=np.int64)
    for axis, r in ranks.items():
        on = np.isin(est.axis_tier[axis], inside) & (np.asarray(r) > 1)
        group = group * np.where(on, np.asarray(r, dtype=np.int64), 1)
    group = np.clip(group, 1, cluster.scale_up_domain)
    sizes, index = np.unique(group, return_inverse=True)
    table = []
    for g in sizes:
        dom = fault_domain(cluster, int(g), num_gpus)
        # replacements a spare pool must cover: one per host-level failure, a whole rack's worth for an
        # NVLink-switch failure that takes the rack out (UNHEALTHY)
        demand = 0.0
        for r in fm.components:
            unit, _ = unit_of({"per": r.per, "kind": r.kind}, dom)
            whole_rack = r.per == "nvlink_switch" and unit == "rack"
            if unit is not None:
                demand += r.rate_per_day * (dom["replacements_per_unit"] if whole_rack else 1)
        kind = dom["unit"] if dom["unit"] != "none" else ("rack" if dom["scale_up_domain_gpus"] > dom["gpus_per_host"]
                                                          else "node")
        repair = float(rates.repair_s[kind].value)
        k = spares_needed(demand, repair)
        per_unit = dom["replacements_per_unit"] if kind == "rack" else 1
        units = -(-k // per_unit)
        dom.update({"replacements_per_day": demand, "repair_s": repair, "spare_unit": kind,
                    "spares_p99_units": units, "spare_gpus_p99": units * (dom["scale_up_domain_gpus"]
                                                                         if kind == "rack" else dom["gpus_per_host"])})
        table.append(dom)
    spare = np.array([d["spare_gpus_p99"] for d in table], dtype=float)[index]
    return [table[int(j)] for j in index], spare


def _lost_time(ettr: float, tau: float, delta: float, drain: float, restart: float, per_day: float) -> LostTime:
    """Seconds per day of wall time lost to each cause: the first-order terms (checkpoint stalls
    ``delta / (tau + delta)`` of running time, rework ``(tau + delta) / 2 + drain`` and ``R`` per
    interruption) scaled so that they sum to the exact ``(1 - ETTR) x 86,400`` of Daly's form."""
    raw = {"checkpoint_stalls_s": ettr * DAY_S * delta / tau, "rework_s": per_day * ((tau + delta) / 2 + drain),
           "restart_s": per_day * restart}
    total = sum(raw.values())
    lost = (1 - ettr) * DAY_S
    return LostTime(**{k: v * lost / total if total > 0 else 0.0 for k, v in raw.items()}, total_s=lost)


def goodput(model, cluster, num_gpus: int, plan, opts: GoodputOptions | None = None, *,
            plan_source: str = "given", parameters: Parameters | None = None) -> GoodputEstimate:
    """One plan's goodput (a :class:`~tierwise.specs.plan.Plan`); its ``goodput --json`` document is
    :func:`tierwise.documents.training.goodput_document`.

    >>> import tierwise
    >>> m, c = tierwise.load_model("llama3.1-8b"), tierwise.load_cluster("dgx-h100")
    >>> p = tierwise.plan_from_mapping({"tp": 8, "global_batch_size": 64, "seq_length": 4096}, num_gpus=64)
    >>> g = tierwise.estimate_goodput(m, c, 64, p, tierwise.GoodputOptions(node_failure_rate=0.01))
    >>> round(g.mtti_s / 3600, 1)  # 8 nodes x 0.01 per day: one interruption per 12.5 days
    300.0
    """

    opts = opts or GoodputOptions()
    parameters = parameters if parameters is not None else load_parameters()  # a public entry point
    validate_plan_batch(model, [plan])
    batch = PlanBatch.from_plans([plan])
    est = estimate(model, cluster, batch, parameters=parameters)
    ev = evaluate(model, cluster, num_gpus, batch, est, opts, parameters=parameters)
    return goodput_at(model, cluster, num_gpus, plan, est, ev, opts, plan_source=plan_source)


def goodput_at(model, cluster, num_gpus, plan, est, ev: GoodputEvaluation, opts: GoodputOptions, *, i: int = 0,
               plan_source: str = "given") -> GoodputEstimate:
    """Plan ``i`` of :func:`evaluate`'s arrays as one :class:`GoodputEstimate`: the lost time, the Monte Carlo
    (with ``runs``), the time to train (with ``tokens``), what was assumed and the explanation."""
    fm = ev.failure_model
    ck = ev.checkpoint.at(i)
    dom = ev.fault_domain[i]
    per_day = fm.interruptions_per_day
    tps = float(est.tokens_per_s[i])
    tau, ettr, good = (float(ev.checkpoint_interval_s[i]), float(ev.ettr[i]), float(ev.goodput_tokens_per_s[i]))
    time_to_train = None
    if opts.tokens is not None:
        seconds = opts.tokens / good
        time_to_train = {"tokens": opts.tokens, "seconds": seconds, "days": seconds / DAY_S,
                         "failure_free_days": opts.tokens / tps / DAY_S}
    g = GoodputEstimate(
        model=model.name, cluster=cluster.name, num_gpus=num_gpus, plan=plan, plan_source=plan_source,
        step_time_s=float(est.step_time_s[i]), tokens_per_s=tps, failure_model=fm, checkpoint=ck,
        checkpoint_mode="sync" if opts.checkpoint_write == "sync" else (
            "async" if opts.checkpoint_write in ("auto", "async") else "given"),
        checkpoint_interval_s=tau, young_interval_s=float(ev.young_interval_s[i]),
        interval_source="given" if opts.checkpoint_interval_s is not None else "daly",
        ettr=ettr, ettr_first_order=float(ev.ettr_first_order[i]), goodput_tokens_per_s=good, fault_domain=dom,
        goodput_tokens_per_s_per_provisioned_gpu=good / (num_gpus + dom["spare_gpus_p99"]),
        lost_time_per_day=_lost_time(ettr, tau, ck.blocking_s, ck.drain_s, ck.restart_s, per_day),
        days=opts.days, time_to_train=time_to_train,
        ettr_simulated=_simulated(fm, dom, ck, tau, opts) if opts.runs else None,
        assumed=_assumed(ev.assumed, dom, opts), explanation=())
    return replace(g, explanation=tuple(_explain(g)))


def _assumed(evaluated, dom: dict, opts: GoodputOptions) -> tuple[str, ...]:
    """What :func:`evaluate` assumed, and what the options leave to defaults (spares, tokens)."""
    assumed = list(evaluated)
    if opts.spares is not None and not opts.runs:
        assumed.append(f"--spares {opts.spares} is used by the Monte Carlo only (give --runs); the analytic ETTR "
                       "assumes a spare is always there")
    if opts.spares is None:
        assumed.append(f"a spare is always available at restart (the pool this needs at p99 is "
                       f"{dom['spares_p99_units']} {dom['spare_unit']}s; --spares K makes the Monte Carlo wait for "
                       "repairs)")
    if opts.tokens is None:
        assumed.append("no --tokens: no time-to-train")
    return tuple(assumed)


def _simulated(fm: FailureModel, dom: dict, ck: CheckpointCosts, tau: float, opts: GoodputOptions) -> SimulatedEttr:
    """The seeded Monte Carlo of :mod:`tierwise.goodput.simulate` for one plan, within its size limits."""

    per_run = fm.interruptions_per_day * opts.days
    if per_run > MAX_EVENTS_PER_RUN:
        raise GoodputError(f"--days {opts.days:g} at {fm.interruptions_per_day:.3g} interruptions per day draws "
                           f"about {per_run:,.0f} per run; keep days x interruptions per day under "
                           f"{MAX_EVENTS_PER_RUN:,} for the Monte Carlo (or leave out --runs)")
    if per_run * opts.runs > MAX_EVENTS:
        raise GoodputError(f"--runs {opts.runs} x --days {opts.days:g} draws about {per_run * opts.runs:,.0f} "
                           f"interruptions; keep runs x days x interruptions per day under {MAX_EVENTS:,}")
    comps = fm.components
    needs = np.array([unit_of({"per": r.per, "kind": r.kind}, dom)[0] is not None for r in comps])
    sim = simulate(rate_per_s=np.array([r.rate_per_day for r in comps]) / DAY_S, needs_unit=needs,
                   tau=tau, delta=ck.blocking_s, drain=ck.drain_s,
                   restart=ck.restart_s, span_s=opts.days * DAY_S, runs=opts.runs, seed=opts.seed,
                   spares=_slots(opts.spares, dom), repair_s=dom["repair_s"])
    return replace(sim, seed=opts.seed, spares=opts.spares)


def _slots(spares: int | None, dom: dict) -> int | None:
    """Spare units (nodes or racks) as replacements: a spare rack holds ``floor(D / g)`` lost groups."""
    if spares is None:
        return None
    return spares * (dom["replacements_per_unit"] if dom["spare_unit"] == "rack" else 1)


def _explain(g: GoodputEstimate) -> list[str]:
    """The explanation lines: where the interruptions come from, the interval and its stall, ETTR, the fault
    domain, and what a leaf switch failure does on a rail-optimized fabric."""
    fm = g.failure_model
    lines = []
    top = sorted(fm.components, key=lambda r: -r.rate_per_day)[:3]
    if math.isfinite(fm.mtti_s) and fm.mtti_s:
        lines.append(f"{fm.interruptions_per_day:.3g} interruptions per day (MTTI {fm.mtti_s / 3600:.3g} h); "
                     "most from " + ", ".join(f"{r.component} ({r.share:.0%}, {r.count:,} parts)"
                                              for r in top if r.rate_per_day > 0))
    young = g.young_interval_s if math.isfinite(g.young_interval_s) and g.young_interval_s else math.inf
    lines.append(f"checkpoint every {g.checkpoint_interval_s / 60:.3g} min ({g.interval_source}; Young's "
                 f"first order gives {young / 60:.3g} min), "
                 f"stalling {g.checkpoint.blocking_s:.3g} s each ({g.checkpoint_mode})")
    lines.append(f"ETTR {g.ettr:.3f}: goodput {g.goodput_tokens_per_s:,.0f} of {g.tokens_per_s:,.0f} "
                 "tokens/s")
    lines.extend(g.fault_domain["why"])
    counts = fm.counts
    if counts.get("leaf_switch"):
        per_leaf = -(-counts["nic"] // counts["leaf_switch"])
        lines.append(f"a leaf switch failure cuts one NIC rail of up to {min(per_leaf, counts['host'])} hosts "
                     "(rail-optimized: each leaf holds one NIC of each host it serves); the job restarts with the "
                     "traffic re-routed, and those hosts are not excluded (a modelling choice)")
    return lines
