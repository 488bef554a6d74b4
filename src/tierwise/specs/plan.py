"""Parallel plans: one validated :class:`Plan` from a mapping, and :class:`PlanBatch`, a struct of arrays.

The estimator works on a :class:`PlanBatch` (ARCHITECTURE.md: "one model, vectorized"); a single plan is a
batch of one. Plan keys and defaults (issue 2 "Contracts"):

``tp pp cp`` (1), ``dp`` (num_gpus / (tp pp cp)), ``ep`` (1), ``etp`` (tp), ``vpp`` (1),
``micro_batch_size`` (1), ``global_batch_size`` and ``seq_length`` (required), ``sequence_parallel``
(true when tp > 1), ``recompute`` (none), ``zero_stage`` (1), ``dp_shard`` (dp), ``reshard_after_forward``
(true), ``precision`` (bf16), ``tp_comm_overlap`` (false), ``overlap_grad_reduce`` and
``overlap_param_gather`` (true), ``schedule`` (1f1b; interleaved when vpp > 1), ``order`` (tp-cp-dp-pp),
``first_stage_layers`` / ``last_stage_layers`` (even split). Every default applied is listed in ``assumed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from tierwise.errors import PlanError, SpecError
from tierwise.specs._mapping import check_keys, get_bool, get_int, require_mapping

__all__ = ["Plan", "PlanBatch", "plan_from_mapping", "validate_plan_batch", "RECOMPUTE", "PRECISION", "ORDERS",
           "SCHEDULES"]

RECOMPUTE = ("none", "selective", "full")
PRECISION = ("bf16", "fp8")
SCHEDULES = ("1f1b", "interleaved")
ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp", "tp-pp-cp-dp", "dp-tp-cp-pp")
"""Supported placement orders, innermost axis first (Megatron-Core's default first)."""

_KEYS = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "seq_length",
         "sequence_parallel", "recompute", "zero_stage", "dp_shard", "reshard_after_forward", "precision",
         "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather", "schedule", "order",
         "first_stage_layers", "last_stage_layers")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One parallel plan (degrees, batch, memory-saving and overlap switches)."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    micro_batch_size: int = 1
    global_batch_size: int = 1
    seq_length: int = 2048
    sequence_parallel: bool = False
    recompute: str = "none"
    zero_stage: int = 1
    dp_shard: int = 1
    reshard_after_forward: bool = True
    precision: str = "bf16"
    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    schedule: str = "1f1b"
    order: str = "tp-cp-dp-pp"
    first_stage_layers: int = 0
    """Layers on the first pipeline stage (0 = even split)."""
    last_stage_layers: int = 0
    assumed: tuple[str, ...] = ()

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def num_microbatches(self) -> int:
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "assumed"}


def _choice(data: Mapping[str, Any], key: str, choices: Sequence[str], default: str, origin: str) -> str:
    value = str(data.get(key, default)).lower()
    if value not in choices:
        raise SpecError(f"{key}={data.get(key)!r} in {origin}; choose one of {', '.join(choices)}")
    return value


def plan_from_mapping(data: Mapping[str, Any], *, num_gpus: int, origin: str = "plan") -> Plan:
    """Validate the plan's own keys and fill defaults (model-dependent checks: :func:`validate_plan_batch`)."""
    data = require_mapping(data, origin)
    check_keys(data, _KEYS, origin, required=("global_batch_size", "seq_length"))
    assumed: list[str] = []

    def opt_int(key: str, default: int, minimum: int = 1) -> int:
        if key not in data:
            assumed.append(f"{key}={default}")
        return get_int(data, key, origin, default=default, minimum=minimum)

    tp, pp, cp = opt_int("tp", 1), opt_int("pp", 1), opt_int("cp", 1)
    model_parallel = tp * pp * cp
    if "dp" in data:
        dp = get_int(data, "dp", origin)
        if dp * model_parallel != num_gpus:
            raise PlanError(
                f"tp x pp x cp x dp = {tp} x {pp} x {cp} x {dp} = {dp * model_parallel} but num_gpus={num_gpus}; "
                f"the degrees must multiply to num_gpus (or drop dp and it is derived)"
            )
    else:
        if num_gpus % model_parallel:
            raise PlanError(
                f"num_gpus={num_gpus} is not divisible by tp x pp x cp = {tp} x {pp} x {cp} = {model_parallel}; "
                "choose degrees whose product divides the GPU count"
            )
        dp = num_gpus // model_parallel
        assumed.append(f"dp={dp} (num_gpus / (tp x pp x cp))")
    ep = opt_int("ep", 1)
    etp = opt_int("etp", tp)
    vpp = opt_int("vpp", 1)
    mbs = opt_int("micro_batch_size", 1)
    gbs = get_int(data, "global_batch_size", origin)
    seq = get_int(data, "seq_length", origin)
    if "sequence_parallel" not in data:
        assumed.append(f"sequence_parallel={tp > 1}")
    sp = get_bool(data, "sequence_parallel", origin, default=tp > 1)
    for key, default in (("recompute", "none"), ("precision", "bf16"), ("order", "tp-cp-dp-pp")):
        if key not in data:
            assumed.append(f"{key}={default}")
    recompute = _choice(data, "recompute", RECOMPUTE, "none", origin)
    precision = _choice(data, "precision", PRECISION, "bf16", origin)
    order = _choice(data, "order", ORDERS, "tp-cp-dp-pp", origin)
    zero = opt_int("zero_stage", 1, minimum=0)
    if zero > 3:
        raise SpecError(f"zero_stage={zero} in {origin}; use 0, 1, 2 or 3")
    dp_shard = opt_int("dp_shard", dp)
    default_schedule = "interleaved" if vpp > 1 else "1f1b"
    if "schedule" not in data:
        assumed.append(f"schedule={default_schedule}")
    schedule = _choice(data, "schedule", SCHEDULES, default_schedule, origin)
    bools = {}
    for key, default in (("reshard_after_forward", True), ("tp_comm_overlap", False),
                         ("overlap_grad_reduce", True), ("overlap_param_gather", True)):
        if key not in data:
            assumed.append(f"{key}={str(default).lower()}")
        bools[key] = get_bool(data, key, origin, default=default)
    first = get_int(data, "first_stage_layers", origin, default=0, minimum=0)
    last = get_int(data, "last_stage_layers", origin, default=0, minimum=0)
    return Plan(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, etp=etp, vpp=vpp, micro_batch_size=mbs, global_batch_size=gbs,
                seq_length=seq, sequence_parallel=sp, recompute=recompute, zero_stage=zero, dp_shard=dp_shard,
                precision=precision, schedule=schedule, order=order, first_stage_layers=first,
                last_stage_layers=last, assumed=tuple(assumed), **bools)


_INT_FIELDS = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "seq_length",
               "zero_stage", "dp_shard", "first_stage_layers", "last_stage_layers")
_BOOL_FIELDS = ("sequence_parallel", "reshard_after_forward", "tp_comm_overlap", "overlap_grad_reduce",
                "overlap_param_gather")
_CODE_FIELDS = {"recompute": RECOMPUTE, "precision": PRECISION, "schedule": SCHEDULES, "order": ORDERS}


@dataclass
class PlanBatch:
    """Plans as a struct of numpy arrays (one entry per plan). Strings are stored as codes:
    ``recompute`` indexes :data:`RECOMPUTE`, ``precision`` :data:`PRECISION`, ``schedule`` :data:`SCHEDULES`,
    ``order`` :data:`ORDERS`."""

    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vpp: np.ndarray
    micro_batch_size: np.ndarray
    global_batch_size: np.ndarray
    seq_length: np.ndarray
    zero_stage: np.ndarray
    dp_shard: np.ndarray
    first_stage_layers: np.ndarray
    last_stage_layers: np.ndarray
    sequence_parallel: np.ndarray
    reshard_after_forward: np.ndarray
    tp_comm_overlap: np.ndarray
    overlap_grad_reduce: np.ndarray
    overlap_param_gather: np.ndarray
    recompute: np.ndarray
    precision: np.ndarray
    schedule: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_plans(cls, plans: Sequence[Plan]) -> PlanBatch:
        cols: dict[str, np.ndarray] = {}
        for name in _INT_FIELDS:
            cols[name] = np.array([getattr(p, name) for p in plans], dtype=np.int64)
        for name in _BOOL_FIELDS:
            cols[name] = np.array([getattr(p, name) for p in plans], dtype=bool)
        for name, choices in _CODE_FIELDS.items():
            cols[name] = np.array([choices.index(getattr(p, name)) for p in plans], dtype=np.int8)
        return cls(**cols)

    @classmethod
    def from_arrays(cls, **arrays: Any) -> PlanBatch:
        """Build from arrays (or scalars, broadcast); missing fields get the plan defaults.

        Unlike :func:`plan_from_mapping` this applies no derived defaults: pass ``etp``, ``dp_shard`` and
        ``sequence_parallel`` explicitly when they should follow tp or dp.
        """
        defaults = Plan()
        n = max((np.size(v) for v in arrays.values()), default=1)
        cols = {}
        for f in fields(cls):
            value = arrays.get(f.name, getattr(defaults, f.name) if f.name not in _CODE_FIELDS
                               else _CODE_FIELDS[f.name].index(getattr(defaults, f.name)))
            dtype = bool if f.name in _BOOL_FIELDS else (np.int8 if f.name in _CODE_FIELDS else np.int64)
            cols[f.name] = np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()
        unknown = set(arrays) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown plan fields {sorted(unknown)}")
        return cls(**cols)

    def select(self, mask_or_index) -> PlanBatch:
        return PlanBatch(**{f.name: getattr(self, f.name)[mask_or_index] for f in fields(self)})

    def plan(self, i: int) -> Plan:
        """The i-th plan as a :class:`Plan`."""
        kw: dict[str, Any] = {}
        for name in _INT_FIELDS:
            kw[name] = int(getattr(self, name)[i])
        for name in _BOOL_FIELDS:
            kw[name] = bool(getattr(self, name)[i])
        for name, choices in _CODE_FIELDS.items():
            kw[name] = choices[int(getattr(self, name)[i])]
        return Plan(**kw)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def validate_plan_batch(model, plans: Sequence[Plan]) -> None:
    """Model-dependent checks with one-line messages naming the value and a fix (raises :class:`PlanError`)."""
    for plan in plans:
        _validate_one(model, plan)


def _validate_one(model, plan: Plan) -> None:
    heads, kv = model.num_attention_heads, model.num_kv_heads
    if heads % plan.tp:
        ok = [d for d in _divisors(heads) if kv % d == 0 or d % kv == 0][:12]
        raise PlanError(f"tp={plan.tp} does not divide num_attention_heads={heads}; try tp in {{{', '.join(map(str, ok))}}}")
    if kv % plan.tp and plan.tp % kv:
        raise PlanError(
            f"tp={plan.tp} and num_kv_heads={kv}: one must divide the other (kv heads are split or replicated "
            f"across tp ranks); try tp in {{{', '.join(str(d) for d in _divisors(heads) if kv % d == 0 or d % kv == 0)}}}"
        )
    if plan.pp > model.num_layers:
        raise PlanError(f"pp={plan.pp} is larger than num_layers={model.num_layers}; use pp <= {model.num_layers}")
    stages_layers = plan.pp * plan.vpp
    if plan.first_stage_layers or plan.last_stage_layers:
        rest = model.num_layers - plan.first_stage_layers - plan.last_stage_layers
        middle = plan.pp - (1 if plan.first_stage_layers else 0) - (1 if plan.last_stage_layers else 0)
        if rest < 0 or (middle > 0 and rest % middle) or (middle == 0 and rest != 0):
            raise PlanError(
                f"first_stage_layers={plan.first_stage_layers}, last_stage_layers={plan.last_stage_layers} leave "
                f"{rest} layers for {middle} middle stages; they must divide evenly"
            )
    elif model.num_layers % stages_layers:
        raise PlanError(
            f"num_layers={model.num_layers} is not divisible by pp x vpp = {plan.pp} x {plan.vpp}; choose pp x vpp "
            f"dividing {model.num_layers} or set first_stage_layers/last_stage_layers"
        )
    if plan.vpp > 1 and plan.pp == 1:
        raise PlanError(f"vpp={plan.vpp} needs pp > 1 (interleaving splits each pipeline stage); set vpp: 1")
    if plan.seq_length % plan.cp or (plan.cp > 1 and plan.seq_length % (2 * plan.cp)):
        raise PlanError(f"seq_length={plan.seq_length} must be divisible by 2 x cp = {2 * plan.cp} for context parallelism")
    if plan.sequence_parallel and plan.tp > 1 and (plan.seq_length // plan.cp) % plan.tp:
        raise PlanError(f"sequence parallelism needs seq_length / cp = {plan.seq_length // plan.cp} divisible by tp={plan.tp}")
    if model.moe is not None:
        experts = model.moe.num_experts
        if experts % plan.ep:
            raise PlanError(f"ep={plan.ep} does not divide num_experts={experts}; try ep in {{{', '.join(map(str, _divisors(experts)))}}}")
        moe_ranks = plan.tp * plan.cp * plan.dp
        if moe_ranks % (plan.etp * plan.ep):
            raise PlanError(
                f"etp x ep = {plan.etp} x {plan.ep} does not divide tp x cp x dp = {moe_ranks} (MoE layers lay "
                "etp x ep x edp over the same ranks); choose ep dividing tp x cp x dp / etp"
            )
    elif plan.ep > 1:
        raise PlanError(f"ep={plan.ep} but {model.name} has no experts; set ep: 1")
    per_step = plan.micro_batch_size * plan.dp
    if plan.global_batch_size % per_step:
        raise PlanError(
            f"global_batch_size={plan.global_batch_size} is not divisible by micro_batch_size x dp = "
            f"{plan.micro_batch_size} x {plan.dp} = {per_step}; use a multiple of {per_step}"
        )
    if plan.vpp > 1 and plan.num_microbatches % plan.pp:
        raise PlanError(
            f"the interleaved schedule needs the number of micro-batches ({plan.num_microbatches}) to be a multiple "
            f"of pp={plan.pp}; change global_batch_size or micro_batch_size"
        )
    if plan.dp % plan.dp_shard:
        raise PlanError(f"dp_shard={plan.dp_shard} must divide dp={plan.dp} (HSDP shards within replicas)")
    if plan.dp_shard != plan.dp and plan.zero_stage == 0:
        raise PlanError("dp_shard only applies with zero_stage >= 1; remove dp_shard or raise zero_stage")
