"""The inverse bandwidth question: what interconnect does this job need?

For one plan (the planner's, or one the user gives) and each parallel axis (TP, CP, EP, PP, DP) that has a
degree above one, this module names the tier the axis's group crosses (:func:`tierwise.hierarchy.group_span`,
read from :attr:`~tierwise.estimate.step.StepEstimates.axis_tier`) and solves for the per-GPU, one-way
bandwidth of that tier at which the axis's exposed time is

* ``hidden``: at most :data:`HIDDEN_SHARE` of the step (an axis priced as exposed by design, PP send/recv or
  TP without overlap, is never fully hidden; its floor at unlimited bandwidth is its latency term),
* ``5%`` and ``20%`` of the step.

Method: the step model is monotone in a tier's bandwidth (every collective's time is ``alpha + bytes / B``,
:mod:`tierwise.collectives.model`), so each threshold is found by bisection on ``log(k)`` where the tier's
one-way bandwidth is scaled by ``k`` (:func:`scale_tier`) and the same plan is re-estimated with
:func:`tierwise.estimate.step.estimate` (a batch of one plan; about 4 ms a call). Scaling a tier scales every
axis that crosses it, so the step itself changes with ``k``; the share is ``axis exposed / step`` at that
``k``. The plan is held fixed: a different bandwidth might make the planner choose another plan.

Rates are **per GPU, one way** (as the catalog states them, ``docs/architecture.md``); the group's aggregate
beside each is ``rate x group size`` (every member injecting at that rate at once). Latency is solved the same
way: the tier latency at which the axis reaches 5% and 20% of the step (:func:`scale_tier` scales the tier's
alpha).

``window`` answers the seeds' arithmetic directly (seed 000: "each all-reduce operation must transfer
approximately 2B (N-1)/N bytes ... 280 GB ... Moving 280 GB in 100 ms requires ... 2.8 TB/s"): the bytes a
GPU sends in the plan's DP gradient reduction per step (``axis_bytes['dp']`` of the estimator: a ring
all-reduce sends ``2 (N-1)/N x gradient bytes``, Patarasuk and Yuan, JPDC 2009; a reduce-scatter plus
all-gather under ZeRO the same total) divided by the window. That per-GPU rate is what nccl-tests calls the
bus bandwidth of the all-reduce (``busbw = algbw x 2 (n-1)/n``, nccl-tests doc/PERFORMANCE.md); the seeds'
2.8 TB/s is that per-GPU figure (280 GB leave each GPU), and the aggregate over the group is ``x N``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tierwise.design.designs import RESTRICTED_SPACE
from tierwise.design.trend import GENERATIONS, generation_trend
from tierwise.errors import PlanError
from tierwise.estimate.step import estimate
from tierwise.hierarchy import TIER_ORDER
from tierwise.planner import search
from tierwise.planner.space import Constraints
from tierwise.specs.cluster import Cluster
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import Plan, PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping

__all__ = ["job_plan", "HIDDEN_SHARE", "TARGETS", "AXES", "scale_tier", "tier_bytes_per_s", "inverse_bandwidth",
           "bandwidth_for_step", "window_bandwidth", "interconnect_bound_generation", "AxisNeed"]

HIDDEN_SHARE = 0.01
"""An axis counts as hidden when its exposed time is at most 1% of the step (a named threshold: exposure never
reaches exactly zero while a collective has a latency term or a last bucket)."""
TARGETS = (("hidden", HIDDEN_SHARE), ("5%", 0.05), ("20%", 0.20))
AXES = ("tp", "cp", "ep", "pp", "dp")
_LOG_LO, _LOG_HI = math.log(1e-4), math.log(1e4)
"""Bandwidth factors searched: 1/10,000 to 10,000 times the cluster's."""
_ITERS = 22
"""Bisection steps on log(k) over a ratio of 1e8: the factor to within 0.1%."""


def _degree(plan: Plan, axis: str) -> int:
    return int(getattr(plan, axis))


def tier_bytes_per_s(cluster: Cluster, tier: str) -> float:
    """The tier's one-way bandwidth per GPU as the catalog states it (scale-out: the GPU's share of its host's
    NICs, before any oversubscription of upper levels)."""
    if tier == "scale_up":
        return cluster.scale_up_bytes_per_s
    if tier == "host":
        return cluster.host_bytes_per_s
    if tier == "scale_out":
        return cluster.scale_out_bytes_per_s
    raise PlanError(f"tier {tier!r} has no bandwidth; use scale_up, host or scale_out")


def scale_tier(cluster: Cluster, tier: str, bandwidth: float = 1.0, latency: float = 1.0) -> Cluster:
    """``cluster`` with one tier's one-way bandwidth times ``bandwidth`` and its latency times ``latency``.

    scale_up scales the switched and the point-to-point NVLink rates together; scale_out scales the NIC line
    rate (upper levels keep their oversubscription ratios); a fitted tier (``tierwise calibrate``) is dropped
    for the scaled tier, since its fitted bandwidth describes the unscaled link.
    """
    kw: dict[str, Any] = {}
    if tier == "scale_up":
        kw = dict(scale_up_bytes_per_s=cluster.scale_up_bytes_per_s * bandwidth,
                  scale_up_p2p_bytes_per_s=cluster.scale_up_p2p_bytes_per_s * bandwidth,
                  scale_up_latency_s=cluster.scale_up_latency_s * latency)
    elif tier == "host":
        kw = dict(host_bytes_per_s=cluster.host_bytes_per_s * bandwidth,
                  host_latency_s=cluster.host_latency_s * latency)
    elif tier == "scale_out":
        kw = dict(nic_bytes_per_s=cluster.nic_bytes_per_s * bandwidth,
                  scale_out_latency_s=cluster.scale_out_latency_s * latency)
    else:
        raise PlanError(f"tier {tier!r} cannot be scaled; use scale_up, host or scale_out")
    fitted = {k: v for k, v in cluster.fitted.items() if k != tier}
    return replace(cluster, fitted=fitted, **kw)


def job_plan(model, cluster: Cluster, num_gpus: int, global_batch: int, seq: int, *, precision: str = "bf16",
             zero: int | None = None, grad_reduce_dtype: str | None = None, parameters: Parameters | None = None,
             **degrees: int | None) -> tuple[Plan, str]:
    """The plan to answer for, and where it came from.

    With ``tp``, ``pp`` and ``dp`` all given the plan is taken as given (``cp``, ``ep``, ``vpp``,
    ``micro_batch_size`` default to 1; it need not fit memory: ``--window`` asks only for its bytes). Otherwise
    the planner's best plan in the restricted space of ``design`` (:data:`RESTRICTED_SPACE`) with the given
    degrees fixed; :class:`PlanError` when no plan fits memory. ``parameters``: the planner's (None, this
    being ``bandwidth``'s entry point: :func:`load_parameters`).
    """
    given = {k: v for k, v in degrees.items() if v is not None}
    if all(k in given for k in ("tp", "pp", "dp")):
        data: dict[str, Any] = {**given, "global_batch_size": global_batch, "seq_length": seq, "precision": precision}
        if zero is not None:
            data["zero_stage"] = zero
        if grad_reduce_dtype is not None:
            data["grad_reduce_dtype"] = grad_reduce_dtype
        plan = plan_from_mapping(data, num_gpus=num_gpus, origin="the plan flags", num_layers=model.num_layers)
        validate_plan_batch(model, [plan])
        return plan, "given"
    c = Constraints(zero_stages=(zero,) if zero is not None else (1, 3), precision=(precision,), max_vpp=4,
                    max_micro_batch_size=2, hsdp=False, ep_comm_overlap=False, **given)
    parameters = parameters if parameters is not None else load_parameters()
    r = search(model, cluster, num_gpus, global_batch, seq, constraints=c, top=1, parameters=parameters)
    if not len(r.plans["tp"]):
        raise PlanError(f"no plan of {model.name} fits memory on {num_gpus} GPUs of {cluster.name} with these flags; "
                        "fix --tp/--pp/--dp to ask about a plan anyway, or add GPUs")
    plan = r.batch().plan(0)
    if grad_reduce_dtype is not None:
        plan = plan.replace(grad_reduce_dtype=grad_reduce_dtype)
    return plan, f"planner's best ({RESTRICTED_SPACE})"


@dataclass
class _Probe:
    """Estimates of one plan with one tier scaled, memoized by factor (each bisection step is one call)."""

    model: Any
    cluster: Cluster
    batch: PlanBatch
    tier: str
    parameters: Parameters
    what: str = "bandwidth"

    def __post_init__(self):
        self._memo: dict[float, Any] = {}

    @property
    def calls(self) -> int:
        """Estimator calls made (one per distinct factor)."""
        return len(self._memo)

    def at(self, k: float):
        if k not in self._memo:
            kw = {self.what: k}
            self._memo[k] = estimate(self.model, scale_tier(self.cluster, self.tier, **kw), self.batch,
                                     parameters=self.parameters)
        return self._memo[k]

    def share(self, axis: str, k: float) -> float:
        """The axis's exposed time over the step it would give with the other axes held at the cluster's
        figures: ``x(k) / (step(1) - x(1) + x(k))`` (monotone in ``x``, so bisection applies)."""
        x = float(self.at(k).axis_exposed_s[axis][0])
        one = self.at(1.0)
        return x / (float(one.step_time_s[0]) - float(one.axis_exposed_s[axis][0]) + x)


def _bisect(f, target: float, increasing: bool) -> tuple[str, float]:
    """The smallest factor ``k`` (log-bisection over 1e-4..1e4) at which ``f(k)`` meets ``target`` (``f <=
    target`` for a decreasing ``f``, ``>=`` for an increasing one): ``("ok", k)``; ``("at_min", 1e-4)`` when even
    the lowest factor meets it; ``("never", 1e4)`` when the highest does not."""
    def meets(k: float) -> bool:
        v = f(k)
        return v >= target if increasing else v <= target

    lo, hi = _LOG_LO, _LOG_HI
    if meets(math.exp(lo)):
        return "at_min", math.exp(lo)
    if not meets(math.exp(hi)):
        return "never", math.exp(hi)
    for _ in range(_ITERS):
        mid = 0.5 * (lo + hi)
        if meets(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return "ok", math.exp(hi)


@dataclass(frozen=True)
class AxisNeed:
    """One axis's answer (see the module docstring); bandwidths in bytes/s one way per GPU."""

    axis: str
    degree: int
    tier: str
    tier_bytes_per_s: float
    bytes_per_gpu: float
    exposed_s: float
    share: float
    floor_share: float
    """The axis's share at 10,000x the tier's bandwidth: what latency (or exposure by design) leaves."""
    needs: dict
    latency: dict

    def as_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "degree": self.degree, "tier": self.tier,
                "tier_gbytes_per_s_per_gpu": self.tier_bytes_per_s / 1e9, "bytes_per_gpu_per_step": self.bytes_per_gpu,
                "exposed_s": self.exposed_s, "share_of_step": self.share,
                "floor_share_at_unlimited_bandwidth": self.floor_share, "bandwidth": self.needs,
                "latency": self.latency}


def _need(status: str, k: float, base_bw: float, degree: int) -> dict[str, Any]:
    bw = base_bw * k
    out: dict[str, Any] = {"status": status, "factor": k}
    if status == "never":
        out.update(gbytes_per_s_per_gpu=None, group_aggregate_tbytes_per_s=None)
    else:
        out.update(gbytes_per_s_per_gpu=bw / 1e9, gbits_per_s_per_gpu=bw * 8 / 1e9,
                   group_aggregate_tbytes_per_s=bw * degree / 1e12)
    return out


def _axis(model, cluster, batch, plan, est, axis, probes, parameters: Parameters) -> AxisNeed | None:
    degree = _degree(plan, axis)
    code = int(est.axis_tier[axis][0])
    tier = TIER_ORDER[code]
    if degree <= 1 or tier == "local":
        return None
    probe = probes.setdefault(tier, _Probe(model, cluster, batch, tier, parameters))
    base_bw = tier_bytes_per_s(cluster, tier)
    needs = {}
    for label, target in TARGETS:
        status, k = _bisect(lambda k: probe.share(axis, k), target, increasing=False)
        needs[label] = {"share": target, **_need(status, k, base_bw, degree)}
    lat_probe = probes.setdefault(("lat", tier), _Probe(model, cluster, batch, tier, parameters, what="latency"))
    base_lat = getattr(cluster, f"{tier}_latency_s")
    latency: dict[str, Any] = {"tier_latency_us": base_lat * 1e6}
    for label, target in TARGETS[1:]:
        status, k = _bisect(lambda k: lat_probe.share(axis, k), target, increasing=True)
        latency[label] = {"status": status, "factor": k,
                          "latency_us": None if status == "never" else base_lat * k * 1e6}
    return AxisNeed(axis=axis, degree=degree, tier=tier, tier_bytes_per_s=base_bw,
                    bytes_per_gpu=float(est.axis_bytes[axis][0]), exposed_s=float(est.axis_exposed_s[axis][0]),
                    share=float(est.axis_exposed_s[axis][0] / est.step_time_s[0]),
                    floor_share=probe.share(axis, math.exp(_LOG_HI)), needs=needs, latency=latency)


def window_bandwidth(dp_bytes_per_gpu: float, window_s: float, dp: int) -> dict[str, Any]:
    """The seeds' arithmetic: the one-way rate per GPU that moves its DP gradient-reduction bytes in
    ``window_s`` (module docstring), and that rate summed over the ``dp`` GPUs of the group."""
    if not window_s > 0:
        raise PlanError(f"--window {window_s!r} s must be positive (e.g. 100ms)")
    per_gpu = dp_bytes_per_gpu / window_s
    return {"window_s": window_s, "bytes_per_gpu": dp_bytes_per_gpu, "dp": dp,
            "tbytes_per_s_per_gpu": per_gpu / 1e12, "gbits_per_s_per_gpu": per_gpu * 8 / 1e9,
            "group_aggregate_tbytes_per_s": per_gpu * dp / 1e12,
            "formula": "bytes a GPU sends in the DP reduction per step / window (= nccl-tests bus bandwidth)"}


def bandwidth_for_step(model, cluster: Cluster, plan: Plan, target_step_s: float, *,
                       parameters: Parameters) -> dict[str, Any]:
    """The factor on every tier's bandwidth at once (scale-up, host and scale-out together) at which the plan's
    step reaches ``target_step_s``. Raises :class:`PlanError` when unlimited bandwidth does not reach it
    (the job is compute-bound there)."""
    batch = PlanBatch.from_plans([plan])

    def step(k: float) -> float:
        c = cluster
        for tier in ("scale_up", "host", "scale_out"):
            c = scale_tier(c, tier, bandwidth=k)
        return float(estimate(model, c, batch, parameters=parameters).step_time_s[0])

    status, k = _bisect(step, target_step_s, increasing=False)
    if status == "never":
        raise PlanError(f"--target-step {target_step_s:g} s is out of reach: even 10,000x every tier's bandwidth "
                        f"gives {step(math.exp(_LOG_HI)):.4g} s (compute-bound); ask for a longer step or more GPUs")
    return {"target_step_s": target_step_s, "status": status, "factor": k,
            "scale_up_gbytes_per_s_per_gpu": cluster.scale_up_bytes_per_s * k / 1e9,
            "scale_out_gbytes_per_s_per_gpu": cluster.scale_out_bytes_per_s * k / 1e9,
            "scale_out_gbits_per_s_per_nic": cluster.nic_bytes_per_s * k * 8 / 1e9}


def inverse_bandwidth(model, cluster: Cluster, plan: Plan, *, window_s: float | None = None,
                      target_step_s: float | None = None, parameters: Parameters | None = None) -> dict[str, Any]:
    """The ``bandwidth --json`` document for one plan (module docstring), priced under ``parameters`` (None,
    this being ``bandwidth``'s entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    batch = PlanBatch.from_plans([plan])
    est = estimate(model, cluster, batch, parameters=parameters)
    probes: dict = {}
    axes = [a for a in (_axis(model, cluster, batch, plan, est, axis, probes, parameters) for axis in AXES) if a is not None]
    step = float(est.step_time_s[0])
    doc: dict[str, Any] = {
        "model": model.name, "cluster": cluster.name, "num_gpus": plan.num_gpus,
        "plan": {k: getattr(plan, k) for k in ("tp", "pp", "cp", "dp", "ep", "vpp", "micro_batch_size",
                                               "zero_stage", "precision", "grad_reduce_dtype", "global_batch_size",
                                               "seq_length")},
        "fits": bool(est.memory["fits"][0]) if "fits" in est.memory else None,
        "step_time_s": step, "compute_s": float(est.compute_s[0]), "exposed_comm_s": float(est.exposed_comm_s[0]),
        "tiers": {t: {"gbytes_per_s_per_gpu_one_way": tier_bytes_per_s(cluster, t) / 1e9,
                      "latency_us": getattr(cluster, f"{t}_latency_s") * 1e6}
                  for t in ("scale_up", "host", "scale_out") if tier_bytes_per_s(cluster, t) > 0},
        "axes": [a.as_dict() for a in axes],
        "hidden_share": HIDDEN_SHARE,
        "estimator_calls": sum(p.calls for p in probes.values()) + 1,
        "notes": ["rates are one-way per GPU (catalog convention); the group aggregate is rate x group size",
                  "the plan is held fixed while a tier's bandwidth (or latency) is scaled; an axis's share is its "
                  "own: exposed x(k) / (step(1) - x(1) + x(k)), the other axes at the cluster's figures",
                  f"hidden: exposed <= {HIDDEN_SHARE:.0%} of the step; 'never': not reached at 10,000x the tier's "
                  "bandwidth (latency, or exposed by design); 'at_min': met even at 1/10,000 of it; latency 'at_min': the "
                  "bandwidth term alone already exceeds the share"],
    }
    if window_s is not None:
        doc["window"] = window_bandwidth(float(est.axis_bytes["dp"][0]), window_s, int(plan.dp))
    if target_step_s is not None:
        doc["target_step"] = bandwidth_for_step(model, cluster, plan, target_step_s, parameters=parameters)
    return doc


def interconnect_bound_generation(model, num_gpus: int, *, global_batch: int = 2048, seq: int = 8192,
                                  bound_share: float = 0.10, clusters=GENERATIONS,
                                  parameters: Parameters | None = None) -> dict[str, Any]:
    """Across generations (:func:`tierwise.design.trend.generation_trend`, each with its own best plan), the
    first at which the job's exposed communication reaches ``bound_share`` of the step (interconnect-bound),
    with each generation's own scale-up domain and with the domain held at 8 GPUs (the seeds' "a cluster that
    is compute-bound today can be interconnect-bound two generations later ... because the ratio moved")."""
    doc = generation_trend(model, num_gpus, global_batch=global_batch, seq=seq, clusters=clusters,
                           parameters=parameters)
    rows = []
    own_first = fixed_first = None
    for r in doc["generations"]:
        if not r.get("fits"):
            rows.append({"cluster": r["cluster"], "fits": False})
            continue
        fixed = r["comm_share"] if r["scale_up_domain"] == 8 else r["other_domain"].get("comm_share")
        rows.append({"cluster": r["cluster"], "fits": True, "scale_up_domain": r["scale_up_domain"],
                     "flops_per_scale_out_byte": r["flops_per_scale_out_byte"], "comm_share": r["comm_share"],
                     "comm_share_8gpu_domain": fixed})
        if own_first is None and r["comm_share"] >= bound_share:
            own_first = r["cluster"]
        if fixed_first is None and fixed is not None and fixed >= bound_share:
            fixed_first = r["cluster"]
    return {"bound_share": bound_share, "generations": rows, "first_interconnect_bound": own_first,
            "first_interconnect_bound_8gpu_domain": fixed_first,
            "definition": f"interconnect-bound: exposed communication >= {bound_share:.0%} of the step "
                          "(each generation's best plan)"}

