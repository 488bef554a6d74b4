"""The plan space: which layouts exist for a model on ``num_gpus`` accelerators, in three levels.

A plan is split into three groups of axes, because the search bounds each group differently
(see :mod:`tierwise.planner.search`):

1. **structure** ``tp pp cp dp ep etp vpp micro_batch_size`` (and the pipeline's stage split): decides the
   work per GPU and the size of every parallel group;
2. **switches** ``recompute zero_stage sequence_parallel precision``: decide memory and compute (where the
   space searches activation offload, ``recompute: none`` on pp 1 means none with the fewest offloaded layers
   that fit, resolved per plan by :mod:`tierwise.planner.offload`);
3. **refinements** ``order tp_comm_overlap ep_comm_overlap dp_shard``: move traffic between tiers
   (placement order, HSDP shard size) or hide it (TP overlap, EP overlap); they change neither the compute
   of a stage nor, except ``dp_shard`` and ``ep_comm_overlap`` (which only add), the memory. TP overlap is
   offered only where it exists: with sequence parallelism and a TP group inside one scale-up domain (see
   :func:`_overlap_eligible`); EP overlap (combined 1F1B) where Megatron-Core runs it (see
   :func:`ep_overlap_eligible`).

Every candidate passes the model-dependent rules of :func:`tierwise.specs.plan.valid_plan_mask` (the same
rules that ``tierwise estimate`` enforces on one plan: heads, kv heads, layers, experts, batch); the
planner adds only choices of its own:

* degrees divide ``num_gpus`` (``tp x pp x cp x dp = num_gpus``), ``pp <= num_layers``;
* context parallelism keeps at least ``min_cp_tokens`` (1,024) tokens per rank unless ``cp`` is fixed;
* any ``pp`` and ``vpp`` (at least one layer per virtual stage): the stage layout is
  :func:`tierwise.specs.plan.stage_layout`'s (Megatron-Core's embedding/loss accounting when
  ``num_layers + 2`` divides ``pp x vpp``, the layout Meta used for Llama 3 405B, 126 layers on 16 stages:
  "we reduce one Transformer layer each from the first and the last stages", arXiv:2407.21783 section
  3.3.2; else the most even split), and the estimator prices the fullest stage, so the search prefers even
  splits by cost, not by rule;
* MoE: ``etp`` is 1 or ``tp`` (Megatron-Core's two common choices); dense models have ``etp = tp``;
* a plan with no data-parallel group at all (``dp x cp = 1`` and one expert-data-parallel replica) keeps
  only its lowest allowed ZeRO stage: the stages differ only in how they shard over that group;
* placement orders (:data:`~tierwise.specs.plan.ORDERS`) that put every axis at the same stride are one
  plan; HSDP shard sizes are the largest shard group inside a scale-up domain and inside each scale-out
  level (plus plain ZeRO over all of ``dp``).

Tables are plain ``dict[str, numpy.ndarray]`` (one entry per plan) that become a
:class:`~tierwise.specs.plan.PlanBatch` with :func:`to_batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.errors import PlanError
from tierwise.files import short_repr
from tierwise.hierarchy import group_span
from tierwise.planner.offload import offload_searched
from tierwise.specs.framework import (
    ATTENTION_KERNELS,
    EP_OVERLAP_FRAMEWORKS,
    GRAD_REDUCE_DTYPES,
    MOE_DISPATCHERS,
    MOE_GROUPED_GEMMS,
    TP_OVERLAP_FRAMEWORKS,
    ZERO2_SYNC,
    check_framework,
    framework_defaults,
)
from tierwise.specs.plan import (
    ORDERS,
    PRECISION,
    RECOMPUTE,
    SCHEDULES,
    ZERO3_GATHER,
    Plan,
    PlanBatch,
    ep_overlap_allowed,
    valid_plan_mask,
    validate_plan_batch,
)

__all__ = ["Constraints", "Space", "build_space", "check_constraints", "to_batch", "expand_switches",
           "expand_refinements", "STRUCTURE", "SWITCHES", "REFINEMENTS", "order_strides", "ep_overlap_eligible",
           "NoLayoutError"]

STRUCTURE = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "first_stage_layers",
             "last_stage_layers")
SWITCHES = ("recompute", "zero_stage", "sequence_parallel", "precision")
REFINEMENTS = ("order", "tp_comm_overlap", "ep_comm_overlap", "dp_shard")

Table = dict[str, np.ndarray]


class NoLayoutError(PlanError):
    """No tp x pp x cp x dp layout of exactly ``num_gpus`` GPUs passes the model's and the batch's rules (the
    planner then tries fewer GPUs, :mod:`tierwise.planner.gpus`)."""


@dataclass(frozen=True, kw_only=True)
class Constraints:
    """What the user fixes or bounds (``None``: free). Lists restrict a switch to the values given."""

    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    ep: int | None = None
    dp: int | None = None
    vpp: int | None = None
    micro_batch_size: int | None = None
    max_tp: int | None = None
    max_pp: int | None = None
    max_cp: int | None = None
    max_ep: int | None = None
    min_ep: int = 1
    """Smallest expert-parallel degree (used to ask what expert parallelism would trade)."""
    max_vpp: int = 8
    max_micro_batch_size: int = 8
    recompute: tuple[str, ...] = RECOMPUTE[:3]
    """none, selective and full (DeepSeek-V3's ``deepseek`` recipe only when asked for)."""
    schedule: str | None = None
    """A pipeline schedule every plan runs (:data:`~tierwise.specs.plan.SCHEDULES`); None: 1F1B, interleaved
    when vpp > 1. DualPipe / DualPipeV and 1F1B keep vpp 1, interleaved vpp > 1."""
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    precision: tuple[str, ...] | None = None
    """``None``: the model's training precision (``ModelSpec.training_precision``); a tuple: those precisions."""
    orders: tuple[str, ...] = ORDERS
    tp_comm_overlap: bool = True
    """Search TP comm+GEMM overlap where it exists (off is always searched too)."""
    ep_comm_overlap: bool = True
    """Search EP all-to-all overlap (combined 1F1B) where it exists (off is always searched too)."""
    hsdp: bool = True
    activation_offload: bool = True
    """Search activation offload to the host (Megatron-Core ``cpu_offloading_num_layers``): a ``recompute: none``
    plan with pp 1 that does not fit takes the fewest offloaded layers that fit (:mod:`tierwise.planner.offload`).
    Searched only where the framework runs it (:data:`~tierwise.specs.framework.OFFLOAD_FRAMEWORKS`, or none
    named) and the cluster gives a host-link bandwidth; false: never (the answer before offload was searched)."""
    fused_cross_entropy: bool = False
    """True: score every plan with a fused cross-entropy kernel (plan ``fused_cross_entropy``); a property of
    the user's software, not searched."""
    moe_force_balance: bool | None = None
    """True: score MoE plans with every expert at its mean load (forced-balanced routing, or a capacity factor of
    1 with padding: plan ``moe_force_balance``); false: a trained router's dropless load (``moe_load_imbalance``
    on ep > 1). A property of the user's training setup, not searched; ``None``: the framework's default, else
    false."""
    zero3_gather: str | None = None
    """How ZeRO-3 plans are implemented (:data:`~tierwise.specs.plan.ZERO3_GATHER`: FSDP1 ``flat``, FSDP2
    ``per-parameter``, DeepSpeed-2021 ``tensor-list``); a property of the user's software, not searched;
    ``None``: the framework's default, else ``flat``."""
    fused_elementwise: bool | None = None
    """False: score every plan as eager PyTorch (``fused_elementwise`` false: extra HBM passes for RMSNorm,
    SwiGLU and rotary embedding); a property of the user's software, not searched; ``None``: the framework's
    default, else fused."""
    framework: str | None = None
    """The training framework (:data:`~tierwise.specs.framework.FRAMEWORKS`) whose defaults every plan takes for
    the software switches the search does not choose (attention kernel, gradient-reduce dtype, ZeRO-2
    semantics, MoE dispatcher and expert-GEMM launches, and the three fields above when ``None``), and which
    limits the overlaps searched to those it runs (:data:`~tierwise.specs.framework.TP_OVERLAP_FRAMEWORKS`,
    :data:`~tierwise.specs.framework.EP_OVERLAP_FRAMEWORKS`); ``None``: tierwise's plan defaults."""
    min_cp_tokens: int = 1024
    """Smallest sequence chunk per context-parallel rank when cp is not fixed."""
    inside_scale_up: tuple[str, ...] = ()
    """Axes (``tp``, ``cp``, ``ep``) whose group must fit one scale-up domain (used to ask "what does crossing
    buy")."""


@dataclass(frozen=True)
class Space:
    """The structures of a plan space, with what the switches and refinements may take."""

    num_gpus: int
    global_batch_size: int
    seq_length: int
    structure: Table
    recompute: tuple[int, ...]
    """Allowed recompute codes (index into RECOMPUTE)."""
    zero_stages: tuple[int, ...]
    precision: tuple[int, ...]
    orders: tuple[int, ...]
    tp_comm_overlap: tuple[bool, ...]
    ep_comm_overlap: tuple[bool, ...]
    hsdp: bool
    scale_up_domain: int
    scale_out_domains: tuple[int, ...]
    cluster: object = None
    zero3_gather: int = 0
    """Code (index into ZERO3_GATHER) that ZeRO-3 rows take."""
    grad_reduce_dtype: tuple[int, int] = (0, 0)
    """Codes (index into GRAD_REDUCE_DTYPES) that rows of a 16-bit and of an FP8 precision take (NeMo's
    performance scripts reduce FP8 runs' gradients in bf16)."""
    framework: str = ""
    assumed: tuple[str, ...] = ()
    """The framework defaults every plan of the space takes, each with its reason (``plan`` lists them)."""
    precision_note: str = ""
    """Which precision the search took when none was asked for (the model's training precision)."""
    offload: bool = False
    """Whether ``recompute: none`` rows with pp 1 resolve their fewest offloaded layers that fit
    (:func:`tierwise.planner.offload.fewest_offload`)."""

    def __len__(self) -> int:
        return len(self.structure["tp"])


def _divisors(n: int) -> list[int]:
    """Divisors of ``n >= 1`` in increasing order: trial division up to sqrt(n), each hit d giving the pair
    (d, n // d), so O(sqrt n) steps (n = 131,072 GPUs: 362 steps, not 131,072)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _cross(table: Table, name: str, values) -> Table:
    """Every row of ``table`` once per value of ``values`` (a new column ``name``)."""
    values = np.asarray(values)
    n = len(next(iter(table.values()))) if table else 1
    out = {k: np.repeat(v, len(values)) for k, v in table.items()}
    out[name] = np.tile(values, n)
    return out


def _take(table: Table, mask_or_index) -> Table:
    return {k: v[mask_or_index] for k, v in table.items()}


def to_batch(table: Table, global_batch_size: int, seq_length: int) -> PlanBatch:
    """A :class:`PlanBatch` from a table; fields the table lacks take the plan defaults (``dp_shard = dp``)."""
    cols = {k: v for k, v in table.items() if not k.startswith("_")}
    cols.setdefault("dp_shard", table["dp"])
    cols.setdefault("etp", table["tp"])
    if "vpp" in table:
        cols.setdefault("schedule", np.where(table["vpp"] > 1, SCHEDULES.index("interleaved"), 0).astype(np.int8))
    return PlanBatch.from_arrays(global_batch_size=global_batch_size, seq_length=seq_length, **cols)


def _add_schedule(table: Table, schedule: str | None) -> Table:
    """Rows of a stated schedule (``Constraints.schedule``) with its code; the vpp it needs (1 but interleaved)."""
    if schedule is None:
        return table
    if schedule not in SCHEDULES:
        raise PlanError(f"schedule {schedule[:40]!r} is not one of {', '.join(SCHEDULES)}")
    interleaved = schedule == "interleaved"
    table = _take(table, (table["vpp"] > 1) if interleaved else (table["vpp"] == 1))
    table["schedule"] = np.full(len(table["tp"]), SCHEDULES.index(schedule), dtype=np.int8)
    return table


def stage_split(num_layers: int, pp: int) -> tuple[int, int]:
    """(first, last) stage layers; (0, 0) for the even split. Uneven: the first and last stages hold fewer.

    With ``pp`` stages of which ``pp - 2`` middle ones hold ``m`` layers each, the first and last hold
    ``r = L - (pp - 2) m`` together; ``m`` is the smallest value ``>= ceil(L / pp)`` leaving each end stage at
    least one layer (Llama 3 405B: L 126, pp 16 -> m 8, ends 7 + 7).

    >>> stage_split(126, 16), stage_split(95, 2), stage_split(80, 8)
    ((7, 7), (48, 47), (0, 0))
    """
    if num_layers % pp == 0:
        return 0, 0
    if pp == 2:
        return num_layers - num_layers // 2, num_layers // 2
    m = -(-num_layers // pp)
    while num_layers - (pp - 2) * m >= 2:
        rest = num_layers - (pp - 2) * m
        first, last = rest - rest // 2, rest // 2
        if first <= m:
            return first, last
        m += 1
    return -1, -1


def _degree_candidates(n: int, fixed: int | None, limit: int | None, cap: int) -> list[int]:
    if fixed is not None:
        return [fixed]
    top = min(cap, limit) if limit is not None else cap
    return [d for d in _divisors(n) if d <= top]


def _check_fixed(model, num_gpus: int, seq_length: int, c: Constraints) -> None:
    """One clear line for a fixed degree that no plan can have (the rules' own messages where they apply)."""
    if num_gpus < 1:
        raise PlanError(f"num_gpus={num_gpus}; give a positive number of GPUs (--gpus)")
    for name in ("tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch_size"):
        value = getattr(c, name)
        if value is not None and value < 1:
            raise PlanError(f"{name}={value}; degrees are positive integers")
    ep = c.ep or 1  # the probe gives ep its own ranks so only the model's rules can fail
    probe = Plan.of(tp=c.tp or 1, cp=c.cp or 1, ep=ep, etp=1, dp=ep, dp_shard=ep, global_batch_size=ep,
                 seq_length=seq_length)
    validate_plan_batch(model, [probe])  # heads, kv heads, sequence / 2cp, experts
    if c.pp is not None and c.pp > model.num_layers:
        validate_plan_batch(model, [Plan.of(pp=c.pp, seq_length=seq_length)])
    fixed = {k: getattr(c, k) for k in ("tp", "pp", "cp", "dp") if getattr(c, k) is not None}
    product = int(np.prod(list(fixed.values()))) if fixed else 1
    if num_gpus % product or ("dp" in fixed and len(fixed) == 4 and product != num_gpus):
        shown = " x ".join(f"{k} {v}" for k, v in fixed.items())
        raise PlanError(f"{shown} = {product} does not divide num_gpus={num_gpus}; choose degrees whose product "
                        f"divides the GPU count")


def _structures(model, num_gpus: int, seq_length: int, c: Constraints) -> Table:
    """(tp, pp, cp) with dp = num_gpus / (tp pp cp), before batch and model rules."""
    tps = _degree_candidates(num_gpus, c.tp, c.max_tp, model.num_attention_heads)
    pps = _degree_candidates(num_gpus, c.pp, c.max_pp, model.num_layers)
    cps = _degree_candidates(num_gpus, c.cp, c.max_cp, num_gpus)
    if c.cp is None:
        cps = [x for x in cps if seq_length // x >= c.min_cp_tokens or x == 1]
    table: Table = {"tp": np.asarray(tps, dtype=np.int64)}
    table = _cross(table, "pp", np.asarray(pps, dtype=np.int64))
    table = _cross(table, "cp", np.asarray(cps, dtype=np.int64))
    prod = table["tp"] * table["pp"] * table["cp"]
    table = _take(table, num_gpus % prod == 0)
    table["dp"] = num_gpus // (table["tp"] * table["pp"] * table["cp"])
    if c.dp is not None:
        table = _take(table, table["dp"] == c.dp)
    return table


def _add_stage_split(model, table: Table) -> Table:
    """Stage layouts are left to :func:`tierwise.specs.plan.stage_layout` (Megatron-Core's rules, else the most
    even split): every pp is allowed, and the estimator prices each plan's fullest stage, so an uneven split
    costs what its slowest stage costs."""
    table["first_stage_layers"] = np.zeros(len(table["pp"]), dtype=np.int64)
    table["last_stage_layers"] = np.zeros(len(table["pp"]), dtype=np.int64)
    return table


def _add_vpp(model, table: Table, global_batch_size: int, c: Constraints) -> Table:
    vpps = [c.vpp] if c.vpp is not None else list(range(1, c.max_vpp + 1))
    table = _cross(table, "vpp", np.asarray(vpps, dtype=np.int64))
    v, pp = table["vpp"], table["pp"]
    # every virtual stage holds at least one layer; the layers need not divide pp x vpp (stage_layout)
    m = global_batch_size // (table["micro_batch_size"] * table["dp"])
    ok = (v == 1) | ((pp > 1) & (pp * v <= model.num_layers) & (m % pp == 0))
    return _take(table, ok)


def _add_experts(model, table: Table, c: Constraints) -> Table:
    if model.moe is None:
        table["ep"] = np.ones(len(table["tp"]), dtype=np.int64)
        table["etp"] = table["tp"].copy()
        return table
    eps = [e for e in _degree_candidates(model.moe.num_experts, c.ep, c.max_ep, model.moe.num_experts)
           if e >= c.min_ep]
    table = _cross(table, "ep", np.asarray(eps, dtype=np.int64))
    table = _cross(table, "_etp_is_tp", np.array([False, True]))
    table["etp"] = np.where(table["_etp_is_tp"], table["tp"], 1)
    keep = ~(table["_etp_is_tp"] & (table["tp"] == 1))
    del table["_etp_is_tp"]
    return _take(table, keep)


def _inside(table: Table, axes: tuple[str, ...], domain: int) -> Table:
    keep = np.ones(len(table["tp"]), dtype=bool)
    if "tp" in axes:
        keep &= table["tp"] <= domain
    if "cp" in axes:  # the CP group's ranks sit tp apart (a CP ring of tp x cp consecutive GPUs)
        keep &= table["tp"] * table["cp"] <= domain
    if "ep" in axes:
        keep &= table["ep"] * table["etp"] <= domain
    return _take(table, keep)


def _empty_reason(model, num_gpus: int, gbs: int, seq: int, c: Constraints, before_batch: Table) -> str:
    if len(before_batch["tp"]) == 0:
        return (f"no tp x pp x cp within the bounds divides num_gpus={num_gpus} (tp <= "
                f"{c.max_tp or model.num_attention_heads}, pp <= {c.max_pp or model.num_layers}); "
                "relax the fixed degrees or change --gpus")
    model_parallel = before_batch["tp"] * before_batch["pp"] * before_batch["cp"]
    min_dp = int(num_gpus // model_parallel.max())
    if gbs < min_dp or not np.any(gbs % before_batch["dp"] == 0):
        return (f"global_batch_size={gbs} is too small for {num_gpus} GPUs: the layouts within the bounds "
                f"leave at least dp={min_dp} data-parallel replicas and each needs a whole number of sequences "
                f"(micro_batch_size x dp must divide the batch); use a global batch that is a multiple of "
                f"{min_dp}, or fewer GPUs")
    return ("no layout satisfies the model's rules (heads, kv heads, layers, experts, batch) within the bounds; "
            "relax the fixed degrees or --max-* options")


def build_space(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int,
                constraints: Constraints | None = None) -> Space:
    """Every valid structure for ``model`` on ``num_gpus`` GPUs, and the allowed switches and refinements.

    Raises :class:`PlanError` with one line when the input admits no plan (a fixed degree the model
    forbids, zero GPUs, a batch too small for the GPU count).
    """
    c = constraints or Constraints()
    if global_batch_size < 1 or seq_length < 1:
        raise PlanError(f"global_batch_size={global_batch_size}, seq_length={seq_length}; both must be positive")
    _check_fixed(model, num_gpus, seq_length, c)
    table = _structures(model, num_gpus, seq_length, c)
    before_batch = dict(table)
    mbs = [c.micro_batch_size] if c.micro_batch_size is not None else list(range(1, c.max_micro_batch_size + 1))
    table = _cross(table, "micro_batch_size", np.asarray(mbs, dtype=np.int64))
    table = _take(table, global_batch_size % (table["micro_batch_size"] * table["dp"]) == 0)
    table = _add_stage_split(model, table)
    table = _add_vpp(model, table, global_batch_size, c)
    table = _add_experts(model, table, c)
    table = _add_schedule(table, c.schedule)
    sw = _software(model, cluster, c)
    n = len(table["tp"])
    table["fused_elementwise"] = np.full(n, sw.fused_elementwise)
    table["fused_cross_entropy"] = np.full(n, c.fused_cross_entropy)
    table["moe_force_balance"] = np.full(n, sw.moe_force_balance)
    for key, code in sw.codes.items():
        table[key] = np.full(n, code, dtype=np.int8)
    if c.inside_scale_up:
        table = _inside(table, c.inside_scale_up, cluster.scale_up_domain)
    if len(table["tp"]):
        table = _take(table, valid_plan_mask(model, to_batch(table, global_batch_size, seq_length)))
    if len(table["tp"]) == 0:
        raise NoLayoutError(_empty_reason(model, num_gpus, global_batch_size, seq_length, c, before_batch))
    precisions, precision_note = _precisions(model, cluster, c)
    offload, offload_note = offload_searched(model, cluster, c.recompute, c.activation_offload, sw.framework)
    return Space(
        num_gpus=num_gpus, global_batch_size=global_batch_size, seq_length=seq_length, structure=table,
        recompute=tuple(RECOMPUTE.index(r) for r in c.recompute), zero_stages=tuple(sorted(c.zero_stages)),
        precision=tuple(PRECISION.index(p) for p in precisions), orders=tuple(ORDERS.index(o) for o in c.orders),
        tp_comm_overlap=(False, True) if c.tp_comm_overlap and sw.tp_overlap else (False,),
        ep_comm_overlap=(False, True) if c.ep_comm_overlap and sw.ep_overlap else (False,), hsdp=c.hsdp,
        scale_up_domain=cluster.scale_up_domain,
        scale_out_domains=tuple(lv.domain_size for lv in cluster.scale_out_levels), cluster=cluster,
        zero3_gather=_zero3_code(sw.zero3_gather), grad_reduce_dtype=sw.grad_reduce_dtype,
        framework=sw.framework, assumed=(*sw.assumed, *([offload_note] if offload_note else [])),
        precision_note=precision_note, offload=offload,
    )


def _precisions(model, cluster, c: Constraints) -> tuple[tuple[str, ...], str]:
    """The precisions the search may take, and a note saying which default was taken.

    Asked for (``--precision``): those, each one the accelerator has a peak for. Not asked: the model's
    training precision only (:attr:`~tierwise.specs.model.ModelSpec.training_precision`; bf16 for the Llama
    family), so a bf16 question is answered in bf16 and its MFU compares with published bf16 MFU; bf16 when the
    accelerator has no peak for the training precision (every catalog part has bf16)."""
    have = cluster.accelerator.peak_dense_flops_per_s
    if c.precision is not None:
        for p in c.precision:
            cluster.accelerator.peak_flops_per_s(p)  # raises for a precision the accelerator lacks
        return tuple(c.precision), ""
    own = model.training_precision
    chosen = own if own in have else "bf16"
    others = [p for p in PRECISION if p in have and p != chosen]
    why = ("the model's training precision" if chosen == own else
           f"the model trains in {own}, which {cluster.accelerator.name} has no peak for")
    hint = f"; --precision {','.join([chosen, *others])} searches {', '.join(others)} too" if others else ""
    return (chosen,), f"precision {chosen}: {why}{hint}"


@dataclass(frozen=True)
class _Software:
    """The software switches every plan of a space takes (:func:`_software`)."""

    framework: str
    fused_elementwise: bool
    zero3_gather: str
    moe_force_balance: bool
    codes: dict[str, int]
    """Plan code fields set for every row (attention kernel, ZeRO-2 semantics, MoE dispatcher and GEMMs)."""
    grad_reduce_dtype: tuple[int, int]
    tp_overlap: bool
    ep_overlap: bool
    assumed: tuple[str, ...]


def _software(model, cluster, c: Constraints) -> _Software:
    """The constraints' software switches, each left ``None`` taken from ``c.framework``'s defaults
    (:func:`tierwise.specs.framework.framework_defaults` for the cluster's accelerator generation; the same
    table ``tierwise estimate`` fills a scenario's unstated switches from), else tierwise's plan defaults.
    What the framework sets is listed, with its reason, in :attr:`Space.assumed`."""

    if c.framework is None:
        dual = model.moe is not None and str(c.schedule).startswith("dualpipe")
        return _Software(framework="", fused_elementwise=True if c.fused_elementwise is None else c.fused_elementwise,
                         zero3_gather=c.zero3_gather or "flat", moe_force_balance=bool(c.moe_force_balance),
                         codes={"moe_dispatcher": MOE_DISPATCHERS.index("deepep")} if dual else {},
                         grad_reduce_dtype=(0, 0), tp_overlap=True, ep_overlap=True,
                         assumed=("moe_dispatcher=deepep (schedule dualpipe: DeepSeek-V3's stack, sec. 3.2.2)",)
                         if dual else ())
    fw = check_framework(c.framework, "--framework")
    moe = model.moe is not None
    generation = cluster.accelerator.generation
    d16 = framework_defaults(fw, generation=generation, moe=moe, precision="bf16")
    d8 = framework_defaults(fw, generation=generation, moe=moe, precision="fp8")
    assumed: list[str] = []

    def take(key: str, given, fallback):
        if given is not None:
            return given
        if key not in d16:
            return fallback
        value, why = d16[key]
        assumed.append(f"{key}={str(value).lower()} ({why})")
        return value

    fused = take("fused_elementwise", c.fused_elementwise, True)
    zero3 = take("zero3_gather", c.zero3_gather, "flat")
    balance = take("moe_force_balance", c.moe_force_balance, False) if moe else bool(c.moe_force_balance)
    codes: dict[str, int] = {}
    for key, choices in (("attention_kernel", ATTENTION_KERNELS), ("zero2_sync", ZERO2_SYNC),
                         ("moe_dispatcher", MOE_DISPATCHERS), ("moe_grouped_gemm", MOE_GROUPED_GEMMS)):
        if key == "moe_dispatcher" and moe and str(c.schedule).startswith("dualpipe"):
            # DualPipe comes with DeepSeek's stack, whose dispatcher is DeepEP (as plan_from_mapping assumes)
            codes[key] = MOE_DISPATCHERS.index("deepep")
            assumed.append("moe_dispatcher=deepep (schedule dualpipe: DeepSeek-V3's stack, sec. 3.2.2)")
        elif key in d16:
            codes[key] = choices.index(take(key, None, None))
    g16, g8 = d16["grad_reduce_dtype"], d8["grad_reduce_dtype"]
    if g16[0] == g8[0]:
        assumed.append(f"grad_reduce_dtype={g16[0]} ({g16[1]})")
    else:
        assumed.append(f"grad_reduce_dtype={g16[0]}, {g8[0]} for FP8 plans ({g16[1]}; {g8[1]})")
    tp_overlap, ep_overlap = fw in TP_OVERLAP_FRAMEWORKS, fw in EP_OVERLAP_FRAMEWORKS
    if not tp_overlap:
        assumed.append(f"tp_comm_overlap not searched ({fw} has no TP communication overlap)")
    if moe and not ep_overlap:
        assumed.append(f"ep_comm_overlap not searched (combined 1F1B is Megatron-Core's; {fw} does not run it)")
    return _Software(framework=fw, fused_elementwise=bool(fused), zero3_gather=str(zero3),
                     moe_force_balance=bool(balance), codes=codes,
                     grad_reduce_dtype=(GRAD_REDUCE_DTYPES.index(g16[0]), GRAD_REDUCE_DTYPES.index(g8[0])),
                     tp_overlap=tp_overlap, ep_overlap=ep_overlap, assumed=tuple(assumed))


def check_constraints(model, cluster, c: Constraints) -> None:
    """The constraints' switches that do not depend on the GPU count (framework, ZeRO-3 gather), checked once:
    a bad one is a :class:`PlanError` before a search at several counts (``scale``) reports it at none."""
    _zero3_code(_software(model, cluster, c).zero3_gather)


def _zero3_code(name: str) -> int:
    if name not in ZERO3_GATHER:
        raise PlanError(f"--zero3-gather {short_repr(name, 40)} is unknown; choose one of {', '.join(ZERO3_GATHER)}")
    return ZERO3_GATHER.index(name)


def _has_dp_group(table: Table) -> np.ndarray:
    edp = table["tp"] * table["cp"] * table["dp"] // (table["etp"] * table["ep"])
    return (table["dp"] * table["cp"] > 1) | (edp > 1)


def expand_switches(space: Space, model, structure: Table, *, recompute=None, zero_stages=None,
                    precision=None, sequence_parallel=None) -> Table:
    """Each structure row crossed with the switch values (all allowed ones unless narrowed), rule-checked.

    ``sequence_parallel="on-if-valid"`` sets it per row instead of crossing (on wherever tp > 1 allows it).
    The column ``_struct`` holds the structure row's index, so results can be grouped back.
    """
    table = dict(structure)
    table["_struct"] = np.arange(len(structure["tp"]))
    table = _cross(table, "recompute", np.asarray(recompute or space.recompute, dtype=np.int8))
    table = _cross(table, "zero_stage", np.asarray(zero_stages or space.zero_stages, dtype=np.int64))
    table = _cross(table, "precision", np.asarray(precision or space.precision, dtype=np.int8))
    if sequence_parallel == "on-if-valid":
        table["sequence_parallel"] = (table["tp"] > 1) & ((space.seq_length // table["cp"]) % table["tp"] == 0)
    else:
        sps = sequence_parallel if sequence_parallel is not None else (False, True)
        table = _cross(table, "sequence_parallel", np.asarray(sps, dtype=bool))
    keep = ~table["sequence_parallel"] | (table["tp"] > 1)
    lowest = min(zero_stages or space.zero_stages)
    keep &= _has_dp_group(table) | (table["zero_stage"] == lowest)
    table = _take(table, keep)
    sp_ok = ~table["sequence_parallel"] | ((space.seq_length // table["cp"]) % table["tp"] == 0)
    table = _take(table, sp_ok)
    table["order"] = np.full(len(table["tp"]), space.orders[0], dtype=np.int8)  # the default refinement
    if space.offload:  # resolved per plan by the evaluator (planner/offload.py)
        table["activation_offload_layers"] = np.zeros(len(table["tp"]), dtype=np.int64)
    table["zero3_gather"] = np.where(table["zero_stage"] == 3, space.zero3_gather, 0).astype(np.int8)
    if space.grad_reduce_dtype != (0, 0):
        b16, b8 = space.grad_reduce_dtype
        table["grad_reduce_dtype"] = np.where(table["precision"] == PRECISION.index("fp8"), b8, b16).astype(np.int8)
    return table


def order_strides(table: Table) -> dict[str, np.ndarray]:
    """Stride of each axis's group under each row's placement order: the product of the degrees placed
    inside it (hierarchy.py's placement convention, innermost axis first)."""
    n = len(table["tp"])
    strides = {a: np.ones(n, dtype=np.int64) for a in ("tp", "cp", "dp", "pp")}
    for code, order in enumerate(ORDERS):
        rows = table["order"] == code
        acc = np.ones(int(rows.sum()), dtype=np.int64)
        for axis in order.split("-"):
            strides[axis][rows] = acc
            acc = acc * table[axis][rows]
    return strides


def _hsdp_sizes(space: Space, dp: int, inner: int) -> list[int]:
    """Shard sizes below dp: the largest shard group (``s x tp x cp`` GPUs) inside each domain size."""
    sizes = set()
    for domain in (space.scale_up_domain, *space.scale_out_domains):
        fits = [s for s in _divisors(dp) if 2 <= s < dp and s * inner <= domain]
        if fits:
            sizes.add(max(fits))
    return sorted(sizes)


def _add_dp_shard(space: Space, table: Table) -> Table:
    table["dp_shard"] = table["dp"].copy()
    if not space.hsdp:
        return table
    extra_rows, extra_shard = [], []
    cache: dict[tuple[int, int], list[int]] = {}
    eligible = np.nonzero((table["zero_stage"] >= 1) & (table["dp"] > 1))[0]
    for i in eligible:
        key = (int(table["dp"][i]), int(table["tp"][i] * table["cp"][i]))
        if key not in cache:
            cache[key] = _hsdp_sizes(space, *key)
        for s in cache[key]:
            extra_rows.append(i)
            extra_shard.append(s)
    if not extra_rows:
        return table
    extra = _take(table, np.asarray(extra_rows, dtype=np.int64))
    extra["dp_shard"] = np.asarray(extra_shard, dtype=np.int64)
    return {k: np.concatenate([table[k], extra[k]]) for k in table}


def _distinct_orders(space: Space, table: Table) -> Table:
    """Rows crossed with the allowed orders, keeping one order per distinct stride pattern (first wins)."""
    table = dict(table)
    table["_row"] = np.arange(len(table["tp"]))
    table = _cross(table, "order", np.asarray(space.orders, dtype=np.int8))
    strides = order_strides(table)
    key = np.stack([table["_row"], strides["tp"], strides["cp"], strides["dp"], strides["pp"]], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    out = _take(table, np.sort(first))
    del out["_row"]
    return out


def _overlap_eligible(space: Space, table: Table, sequence_parallel) -> np.ndarray:
    """Rows whose TP communication can overlap its GEMMs: Transformer Engine's comm+GEMM overlap (the
    Userbuffers backend behind Megatron's ``--tp-comm-overlap``) needs sequence parallelism, since it
    overlaps only all-gather and reduce-scatter (TransformerEngine issue #746; Megatron asserts it), and
    a TP group inside one node's NVLink domain, since it uses CUDA IPC / multicast handles
    (TransformerEngine issue #1071: "only possible with single-node tensor-parallelism")."""

    tier = group_span(space.cluster, table["tp"], order_strides(table)["tp"]).tier
    return (table["tp"] > 1) & np.asarray(sequence_parallel, dtype=bool) & (tier == 1)


def ep_overlap_eligible(table: Table, global_batch_size: int, seq_length: int) -> np.ndarray:
    """Rows whose expert all-to-all can run as Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-
    comm``), by the plan rules themselves (:func:`tierwise.specs.plan.ep_overlap_allowed`: ep > 1, no full
    recompute, interleaving when pp > 1, at least two micro-batches). A table without a ``recompute`` column
    (structures) is taken at no recompute, its most permissive switch."""
    return ep_overlap_allowed(to_batch(table, global_batch_size, seq_length))


def expand_refinements(space: Space, units: Table) -> Table:
    """Each unit (structure + switches) crossed with placement orders (deduplicated by stride), TP overlap
    (where :func:`_overlap_eligible`), EP overlap (where :func:`ep_overlap_eligible`) and HSDP shard sizes.
    Column ``_unit`` holds the unit's row index."""
    table = dict(units)
    table["_unit"] = np.arange(len(units["tp"]))
    table = _distinct_orders(space, table)
    table = _cross(table, "tp_comm_overlap", np.array([False, True]))
    eligible = _overlap_eligible(space, table, table["sequence_parallel"]) & (True in space.tp_comm_overlap)
    table = _take(table, eligible | ~table["tp_comm_overlap"])
    table = _cross(table, "ep_comm_overlap", np.array([False, True]))
    eligible = ep_overlap_eligible(table, space.global_batch_size, space.seq_length) & (True in space.ep_comm_overlap)
    table = _take(table, eligible | ~table["ep_comm_overlap"])
    return _add_dp_shard(space, table)


def space_size(space: Space, model) -> int:
    """Plans in the full space (every structure x switch x refinement), counted without enumerating it:
    per structure and distinct order, recompute x precision x (ZeRO stages with their HSDP shard sizes) x
    (sequence parallelism off + on where valid, times the TP-overlap choices where eligible)."""
    s = space.structure
    n = len(s["tp"])
    rows = _distinct_orders(space, {k: s[k] for k in ("tp", "cp", "dp", "pp")} | {"_s": np.arange(n)})
    struct = rows["_s"]
    sp_ok = (s["tp"] > 1) & ((space.seq_length // s["cp"]) % s["tp"] == 0)
    overlap = np.where(_overlap_eligible(space, rows, True), len(space.tp_comm_overlap), 1)
    sp_terms = 1 + sp_ok[struct] * overlap
    # EP overlap doubles the recompute choices other than full where the structure allows it
    not_full = sum(1 for r in space.recompute if r != RECOMPUTE.index("full"))
    ep_ok = ep_overlap_eligible(s, space.global_batch_size, space.seq_length)
    rc_terms = len(space.recompute) + ep_ok * not_full * (len(space.ep_comm_overlap) - 1)
    shards = np.ones(n, dtype=np.int64)
    if space.hsdp:
        cache: dict[tuple[int, int], int] = {}
        for i in np.nonzero(s["dp"] > 1)[0]:
            key = (int(s["dp"][i]), int(s["tp"][i] * s["cp"][i]))
            if key not in cache:
                cache[key] = len(_hsdp_sizes(space, *key))
            shards[i] += cache[key]
    has_dp = _has_dp_group(s)
    per_zero = np.zeros(n, dtype=np.int64)
    for z in space.zero_stages:
        per_zero += np.where(z >= 1, shards, 1) * (has_dp | (z == space.zero_stages[0]))
    return int(np.sum(rc_terms[struct] * len(space.precision) * per_zero[struct] * sp_terms))
