"""Parallel plans: one validated :class:`Plan` from a mapping, and :class:`PlanBatch`, a struct of arrays.

The estimator works on a :class:`PlanBatch` (ARCHITECTURE.md: "one model, vectorized"); a single plan is a
batch of one. Plan keys and defaults (issue 2 "Contracts"):

``tp pp cp`` (1), ``dp`` (num_gpus / (tp pp cp)), ``ep`` (1), ``etp`` (tp), ``vpp`` (1),
``micro_batch_size`` (1), ``global_batch_size`` and ``seq_length`` (required), ``sequence_parallel``
(true when tp > 1), ``recompute`` (none), ``zero_stage`` (1), ``dp_shard`` (dp), ``reshard_after_forward``
(true), ``precision`` (bf16), ``tp_comm_overlap`` (false), ``ep_comm_overlap`` (false), ``fused_elementwise`` (true),
``fused_cross_entropy`` (false), ``overlap_grad_reduce`` and
``overlap_param_gather`` (true), ``schedule`` (1f1b; interleaved when vpp > 1), ``order`` (tp-cp-dp-pp),
``first_stage_layers`` / ``last_stage_layers`` (even split), ``zero3_gather`` (flat). Every default applied is
listed in ``assumed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

import numpy as np

from tierwise.errors import PlanError, SpecError
from tierwise.files import short_repr
from tierwise.limits import MAX_BATCH, MAX_GPUS, MAX_LAYERS, MAX_SEQ
from tierwise.specs._mapping import check_keys, get_bool, get_int, require_mapping

__all__ = ["Plan", "PlanBatch", "plan_from_mapping", "MEGATRON_ALIASES", "LAYERS_PER_CHUNK", "validate_plan_batch",
           "valid_plan_mask", "ep_overlap_allowed", "RECOMPUTE", "Recompute", "PRECISION", "ORDERS", "SCHEDULES",
           "ZERO3_GATHER"]

RECOMPUTE = ("none", "selective", "full")


class Recompute(IntEnum):
    """``PlanBatch.recompute`` codes (indices into :data:`RECOMPUTE`)."""

    NONE = 0
    SELECTIVE = 1
    FULL = 2


PRECISION = ("bf16", "fp8")
SCHEDULES = ("1f1b", "interleaved")
ZERO3_GATHER = ("flat", "per-parameter", "tensor-list")
"""How ZeRO-3 moves each layer's parameters and gradients, by implementation:

* ``flat``: PyTorch FSDP1's ``FlatParameter`` (default). One ``all_gather_into_tensor`` straight into the
  unit's flat buffer, the parameters are views of it; the backward concatenates the views' gradients, casts
  them to the reduce dtype and pre-divides them before the reduce-scatter.
* ``per-parameter``: FSDP2 (``fully_shard``, torchtitan). The all-gather lands in a staging buffer that is
  copied out into each parameter; the gradients are copied (and cast) into the reduce-scatter input; NCCL
  averages, so there is no divide pass.
* ``tensor-list``: DeepSpeed ZeRO-3 of 2021. One list-form ``torch.distributed`` collective per parameter
  tensor, which copies each rank's chunk separately (eager ops on the CPU thread).

The estimator counts the extra HBM passes of each (``estimate.step._shard_copy_bytes``)."""
ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp", "tp-pp-cp-dp", "dp-tp-cp-pp")
"""Supported placement orders, innermost axis first (Megatron-Core's default first)."""

_KEYS = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "seq_length",
         "sequence_parallel", "recompute", "zero_stage", "dp_shard", "reshard_after_forward", "precision",
         "tp_comm_overlap", "ep_comm_overlap", "fused_elementwise", "fused_cross_entropy", "overlap_grad_reduce", "overlap_param_gather", "schedule", "order",
         "first_stage_layers", "last_stage_layers", "zero3_gather")


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
    ep_comm_overlap: bool = False
    """Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-comm``): the expert all-to-all of one
    micro-batch runs behind the compute of the adjacent one."""
    fused_elementwise: bool = True
    """Elementwise work runs in fused kernels (Megatron/Transformer Engine, torch.compile); false: eager PyTorch,
    one kernel per op (RMSNorm, SwiGLU, RoPE each several passes over HBM)."""
    fused_cross_entropy: bool = False
    """The loss runs as one fused cross-entropy kernel (Megatron-Core ``cross_entropy_loss_fusion``, Transformer
    Engine, Liger); false (Megatron-Core's default, PyTorch's ``F.cross_entropy``, Megatron's
    ``vocab_parallel_cross_entropy``): an fp32 copy of the logits and separate max / exp / sum / divide passes
    over them, forward and backward."""
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    schedule: str = "1f1b"
    order: str = "tp-cp-dp-pp"
    first_stage_layers: int = 0
    """Layers on the first pipeline stage (0 = even split)."""
    last_stage_layers: int = 0
    zero3_gather: str = "flat"
    """See :data:`ZERO3_GATHER`."""
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
    raw = data.get(key, default)
    if raw is None and "none" in choices:  # `recompute: null` (Megatron's recompute_granularity: null) is none
        raw = "none"
    value = raw.lower() if isinstance(raw, str) else None
    if value not in choices:
        raise SpecError(f"{key}={short_repr(raw)} in {origin}; choose one of {', '.join(choices)}")
    return value


MEGATRON_ALIASES = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "recompute_granularity": "recompute",
}
"""Megatron-LM / NeMo long names accepted in a plan mapping for the short keys (same meaning, same values)."""
LAYERS_PER_CHUNK = "num_layers_per_virtual_pipeline_stage"
"""Megatron's layers per virtual pipeline chunk: ``vpp = num_layers / (pp x layers per chunk)``."""


def _resolve_aliases(data: Mapping[str, Any], origin: str, num_layers: int | None) -> dict[str, Any]:
    """The mapping with Megatron/NeMo long names turned into the short keys; a long name given with its short
    name and a different value is an error, as is a layers-per-chunk that does not split the model evenly."""
    out = dict(data)
    for long, short in MEGATRON_ALIASES.items():
        if long not in out:
            continue
        value = out.pop(long)
        if short in out:
            same = (str(out[short]).lower() == str(value).lower() if short == "recompute"
                    else out[short] == value and type(out[short]) is type(value))
            if not same:
                raise SpecError(f"{short}={short_repr(out[short])} and its Megatron name {long}="
                                f"{short_repr(value)} disagree in {origin}; give only one of them")
        else:
            out[short] = value
    if LAYERS_PER_CHUNK in out:
        per_chunk = get_int(out, LAYERS_PER_CHUNK, origin)
        out.pop(LAYERS_PER_CHUNK)
        if num_layers is None:
            raise SpecError(f"{LAYERS_PER_CHUNK}={per_chunk} in {origin} needs the model's num_layers to give vpp; "
                            "use vpp instead")
        pp = get_int(out, "pp", origin, default=1)
        if num_layers % (pp * per_chunk):
            raise PlanError(f"{LAYERS_PER_CHUNK}={per_chunk} with pp={pp} in {origin}: num_layers={num_layers} is "
                            f"not divisible by pp x {per_chunk} = {pp * per_chunk}; choose layers per chunk "
                            f"dividing num_layers / pp (or give vpp)")
        vpp = num_layers // (pp * per_chunk)
        if "vpp" in out and out["vpp"] != vpp:
            raise SpecError(f"vpp={short_repr(out['vpp'])} and {LAYERS_PER_CHUNK}={per_chunk} (vpp = num_layers / "
                            f"(pp x layers per chunk) = {num_layers} / ({pp} x {per_chunk}) = {vpp}) disagree in "
                            f"{origin}; give only one of them")
        out["vpp"] = vpp
    return out


def plan_from_mapping(data: Mapping[str, Any], *, num_gpus: int, origin: str = "plan",
                      num_layers: int | None = None) -> Plan:
    """Validate the plan's own keys and fill defaults (model-dependent checks: :func:`validate_plan_batch`).

    Megatron/NeMo long names (:data:`MEGATRON_ALIASES`, :data:`LAYERS_PER_CHUNK`) are accepted for the short
    keys; ``num_layers`` (the model's) is needed to turn layers per virtual stage into ``vpp``.
    """
    data = require_mapping(data, origin)
    check_keys(data, (*_KEYS, *MEGATRON_ALIASES, LAYERS_PER_CHUNK), origin)
    data = _resolve_aliases(data, origin, num_layers)
    check_keys(data, _KEYS, origin, required=("global_batch_size", "seq_length"))
    assumed: list[str] = []

    def opt_int(key: str, default: int, minimum: int = 1, maximum: int = MAX_GPUS) -> int:
        if key not in data:
            assumed.append(f"{key}={default}")
        return get_int(data, key, origin, default=default, minimum=minimum, maximum=maximum)

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
    vpp = opt_int("vpp", 1, maximum=MAX_LAYERS)
    mbs = opt_int("micro_batch_size", 1, maximum=MAX_BATCH)
    gbs = get_int(data, "global_batch_size", origin, maximum=MAX_BATCH)
    seq = get_int(data, "seq_length", origin, maximum=MAX_SEQ)
    if "sequence_parallel" not in data:
        assumed.append(f"sequence_parallel={tp > 1}")
    sp = get_bool(data, "sequence_parallel", origin, default=tp > 1)
    for key, default in (("recompute", "none"), ("precision", "bf16"), ("order", "tp-cp-dp-pp"),
                         ("zero3_gather", "flat")):
        if key not in data:
            assumed.append(f"{key}={default}")
    recompute = _choice(data, "recompute", RECOMPUTE, "none", origin)
    precision = _choice(data, "precision", PRECISION, "bf16", origin)
    order = _choice(data, "order", ORDERS, "tp-cp-dp-pp", origin)
    zero3_gather = _choice(data, "zero3_gather", ZERO3_GATHER, "flat", origin)
    zero = opt_int("zero_stage", 1, minimum=0, maximum=3)
    dp_shard = opt_int("dp_shard", dp)
    default_schedule = "interleaved" if vpp > 1 else "1f1b"
    if "schedule" not in data:
        assumed.append(f"schedule={default_schedule}")
    schedule = _choice(data, "schedule", SCHEDULES, default_schedule, origin)
    bools = {}
    for key, default in (("reshard_after_forward", True), ("tp_comm_overlap", False), ("ep_comm_overlap", False),
                         ("fused_elementwise", True), ("fused_cross_entropy", False),
                         ("overlap_grad_reduce", True), ("overlap_param_gather", True)):
        if key not in data:
            assumed.append(f"{key}={str(default).lower()}")
        bools[key] = get_bool(data, key, origin, default=default)
    first = get_int(data, "first_stage_layers", origin, default=0, minimum=0, maximum=MAX_LAYERS)
    last = get_int(data, "last_stage_layers", origin, default=0, minimum=0, maximum=MAX_LAYERS)
    return Plan(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, etp=etp, vpp=vpp, micro_batch_size=mbs, global_batch_size=gbs,
                seq_length=seq, sequence_parallel=sp, recompute=recompute, zero_stage=zero, dp_shard=dp_shard,
                precision=precision, schedule=schedule, order=order, first_stage_layers=first,
                last_stage_layers=last, zero3_gather=zero3_gather, assumed=tuple(assumed), **bools)


_INT_FIELDS = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "seq_length",
               "zero_stage", "dp_shard", "first_stage_layers", "last_stage_layers")
_BOOL_FIELDS = ("sequence_parallel", "reshard_after_forward", "tp_comm_overlap", "ep_comm_overlap", "fused_elementwise",
                "fused_cross_entropy",
                "overlap_grad_reduce", "overlap_param_gather")
_CODE_FIELDS = {"recompute": RECOMPUTE, "precision": PRECISION, "schedule": SCHEDULES, "order": ORDERS,
                "zero3_gather": ZERO3_GATHER}


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
    ep_comm_overlap: np.ndarray
    fused_elementwise: np.ndarray
    fused_cross_entropy: np.ndarray
    overlap_grad_reduce: np.ndarray
    overlap_param_gather: np.ndarray
    recompute: np.ndarray
    precision: np.ndarray
    schedule: np.ndarray
    order: np.ndarray
    zero3_gather: np.ndarray

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


def _tp_choices(model) -> str:
    heads, kv = model.num_attention_heads, model.num_kv_heads
    return ", ".join(str(d) for d in _divisors(heads) if kv % d == 0 or d % kv == 0)


# --------------------------------------------------------------------------------------------------
# model-dependent rules: each is written once, as a vectorized test over a PlanBatch (the planner's
# mask) paired with the one-line message for a single plan (validate_plan_batch)


def _stage_split_bad(model, b: PlanBatch) -> np.ndarray:
    uneven = (b.first_stage_layers > 0) | (b.last_stage_layers > 0)
    rest = model.num_layers - b.first_stage_layers - b.last_stage_layers
    middle = b.pp - (b.first_stage_layers > 0) - (b.last_stage_layers > 0)
    bad_uneven = (rest < 0) | ((middle > 0) & (rest % np.maximum(middle, 1) != 0)) | ((middle == 0) & (rest != 0))
    return np.where(uneven, bad_uneven, model.num_layers % (b.pp * b.vpp) != 0)


def _stage_split_message(model, plan: Plan) -> str:
    if plan.first_stage_layers or plan.last_stage_layers:
        rest = model.num_layers - plan.first_stage_layers - plan.last_stage_layers
        middle = plan.pp - (1 if plan.first_stage_layers else 0) - (1 if plan.last_stage_layers else 0)
        return (f"first_stage_layers={plan.first_stage_layers}, last_stage_layers={plan.last_stage_layers} leave "
                f"{rest} layers for {middle} middle stages; they must divide evenly")
    return (f"num_layers={model.num_layers} is not divisible by pp x vpp = {plan.pp} x {plan.vpp}; choose pp x vpp "
            f"dividing {model.num_layers} or set first_stage_layers/last_stage_layers")


def _experts(model) -> int:
    return model.moe.num_experts if model.moe is not None else 1


def _microbatches(b: PlanBatch) -> np.ndarray:
    return b.global_batch_size // (b.micro_batch_size * b.dp)


_EP_OVERLAP_RULES: tuple[tuple[Any, Any], ...] = (
    (lambda m, b: b.ep_comm_overlap & (b.ep == 1),
     lambda m, p: "ep_comm_overlap overlaps the expert all-to-all, which needs ep > 1; set ep > 1 or "
                  "ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (b.recompute == RECOMPUTE.index("full")),
     lambda m, p: "ep_comm_overlap (combined 1F1B) does not work with full recompute (Megatron-Bridge's EP "
                  "overlap guide); use recompute: selective or none, or ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (b.pp > 1) & (b.vpp == 1),
     lambda m, p: f"ep_comm_overlap with pp={p.pp} needs the interleaved schedule (vpp > 1), as Megatron-Core "
                  "requires; set vpp or ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (_microbatches(b) < 2),
     lambda m, p: f"ep_comm_overlap pairs adjacent micro-batches; this plan has {p.num_microbatches}; raise "
                  "global_batch_size or lower micro_batch_size, or set ep_comm_overlap: false"),
)
"""When Megatron-Core's combined 1F1B (``ep_comm_overlap``) can run; part of :data:`_RULES`, and what the
planner offers EP overlap by (:func:`ep_overlap_allowed`)."""


_RULES: tuple[tuple[Any, Any], ...] = (
    (lambda m, b: m.num_attention_heads % b.tp != 0,
     lambda m, p: f"tp={p.tp} does not divide num_attention_heads={m.num_attention_heads}; "
                  f"try tp in {{{', '.join(_tp_choices(m).split(', ')[:12])}}}"),
    (lambda m, b: (m.num_kv_heads % b.tp != 0) & (b.tp % m.num_kv_heads != 0),
     lambda m, p: f"tp={p.tp} and num_kv_heads={m.num_kv_heads}: one must divide the other (kv heads are split or "
                  f"replicated across tp ranks); try tp in {{{_tp_choices(m)}}}"),
    (lambda m, b: b.pp > m.num_layers,
     lambda m, p: f"pp={p.pp} is larger than num_layers={m.num_layers}; use pp <= {m.num_layers}"),
    (_stage_split_bad, _stage_split_message),
    (lambda m, b: (b.vpp > 1) & (b.pp == 1),
     lambda m, p: f"vpp={p.vpp} needs pp > 1 (interleaving splits each pipeline stage); set vpp: 1"),
    (lambda m, b: (b.seq_length % b.cp != 0) | ((b.cp > 1) & (b.seq_length % (2 * b.cp) != 0)),
     lambda m, p: f"seq_length={p.seq_length} must be divisible by 2 x cp = {2 * p.cp} for context parallelism"),
    (lambda m, b: b.sequence_parallel & (b.tp > 1) & ((b.seq_length // b.cp) % b.tp != 0),
     lambda m, p: f"sequence parallelism needs seq_length / cp = {p.seq_length // p.cp} divisible by tp={p.tp}"),
    (lambda m, b: (_experts(m) % b.ep != 0) if m.moe is not None else np.zeros(len(b), bool),
     lambda m, p: f"ep={p.ep} does not divide num_experts={_experts(m)}; "
                  f"try ep in {{{', '.join(map(str, _divisors(_experts(m))))}}}"),
    (lambda m, b: ((b.tp * b.cp * b.dp) % (b.etp * b.ep) != 0) if m.moe is not None else np.zeros(len(b), bool),
     lambda m, p: f"etp x ep = {p.etp} x {p.ep} does not divide tp x cp x dp = {p.tp * p.cp * p.dp} (MoE layers lay "
                  "etp x ep x edp over the same ranks); choose ep dividing tp x cp x dp / etp"),
    (lambda m, b: (b.ep > 1) if m.moe is None else np.zeros(len(b), bool),
     lambda m, p: f"ep={p.ep} but {m.name} has no experts; set ep: 1"),
    (lambda m, b: b.global_batch_size % (b.micro_batch_size * b.dp) != 0,
     lambda m, p: f"global_batch_size={p.global_batch_size} is not divisible by micro_batch_size x dp = "
                  f"{p.micro_batch_size} x {p.dp} = {p.micro_batch_size * p.dp}; "
                  f"use a multiple of {p.micro_batch_size * p.dp}"),
    (lambda m, b: (b.vpp > 1) & (_microbatches(b) % b.pp != 0),
     lambda m, p: f"the interleaved schedule needs the number of micro-batches ({p.num_microbatches}) to be a "
                  f"multiple of pp={p.pp}; change global_batch_size or micro_batch_size"),
    *_EP_OVERLAP_RULES,
    (lambda m, b: (b.zero3_gather != ZERO3_GATHER.index("flat")) & (b.zero_stage != 3),
     lambda m, p: f"zero3_gather={p.zero3_gather!r} describes ZeRO-3 parameter gathers but zero_stage={p.zero_stage}; "
                  "set zero_stage: 3 or drop zero3_gather"),
    (lambda m, b: b.dp % b.dp_shard != 0,
     lambda m, p: f"dp_shard={p.dp_shard} must divide dp={p.dp} (HSDP shards within replicas)"),
    (lambda m, b: (b.dp_shard != b.dp) & (b.zero_stage == 0),
     lambda m, p: "dp_shard only applies with zero_stage >= 1; remove dp_shard or raise zero_stage"),
)
"""(vectorized violation test, message for one plan), in the order a single plan is checked."""


def ep_overlap_allowed(plans: PlanBatch) -> np.ndarray:
    """True where the plan could switch ``ep_comm_overlap`` on (:data:`_EP_OVERLAP_RULES`)."""
    on = PlanBatch(**{f.name: getattr(plans, f.name) for f in fields(plans)})
    on.ep_comm_overlap = np.ones(len(plans), dtype=bool)
    ok = np.ones(len(plans), dtype=bool)
    for violated, _ in _EP_OVERLAP_RULES:
        ok &= ~np.asarray(violated(None, on), dtype=bool)
    return ok


def valid_plan_mask(model, plans: PlanBatch) -> np.ndarray:
    """Vectorized :func:`validate_plan_batch`: True where a plan passes every model-dependent rule.

    Degrees are assumed positive (the planner and :func:`plan_from_mapping` only build positive ones).
    """
    ok = np.ones(len(plans), dtype=bool)
    for violated, _ in _RULES:
        ok &= ~np.asarray(violated(model, plans), dtype=bool)
    return ok


def validate_plan_batch(model, plans: Sequence[Plan]) -> None:
    """Model-dependent checks with one-line messages naming the value and a fix (raises :class:`PlanError`)."""
    for plan in plans:
        _validate_one(model, plan)


def _validate_one(model, plan: Plan) -> None:
    batch = PlanBatch.from_plans([plan])
    for violated, message in _RULES:
        if bool(np.asarray(violated(model, batch))[0]):
            raise PlanError(message(model, plan))
