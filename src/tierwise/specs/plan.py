"""Parallel plans: :class:`Plan` (one, validated from a mapping by
:func:`tierwise.specs.plan_mapping.plan_from_mapping`) and :class:`PlanBatch`, a struct of arrays.

The estimator works on a :class:`PlanBatch` (ARCHITECTURE.md: "one model, vectorized"); a single plan is a
batch of one. A :class:`Plan` holds five groups (:mod:`tierwise.specs.plan_groups`: degrees, batch, memory,
software, layout) and reads flat (``plan.tp``); :class:`PlanBatch`'s columns are generated from the groups.
Plan keys and defaults (issue 2 "Contracts"):

``tp pp cp`` (1), ``dp`` (num_gpus / (tp pp cp)), ``ep`` (1), ``etp`` (tp), ``vpp`` (1),
``micro_batch_size`` (1), ``global_batch_size`` and ``seq_length`` (required), ``sequence_parallel``
(true when tp > 1), ``recompute`` (none), ``zero_stage`` (1), ``dp_shard`` (dp), ``reshard_after_forward``
(true), ``precision`` (bf16), ``tp_comm_overlap`` (false), ``ep_comm_overlap`` (false), ``fused_elementwise`` (true),
``fused_cross_entropy`` (false), ``overlap_grad_reduce`` and
``overlap_param_gather`` (true), ``schedule`` (1f1b; interleaved when vpp > 1), ``order`` (tp-cp-dp-pp),
``first_stage_layers`` / ``last_stage_layers`` (derived: :func:`stage_layout`), ``zero3_gather`` (flat),
``grad_reduce_dtype`` (fp32), ``zero2_sync`` (per-step), ``attention_kernel`` (by framework and accelerator),
``moe_dispatcher`` (alltoall; listed under ``assumed`` for MoE models only), ``moe_grouped_gemm`` (per-expert;
MoE models only), ``moe_force_balance`` (false; listed for MoE models only).
A ``framework`` (:mod:`tierwise.specs.framework`) changes the defaults of the switches to that framework's.
Every default applied is listed in ``assumed``.

Pipeline stage layout (:func:`stage_layout`, Megatron-Core ``transformer_block.get_num_layers_to_build`` and
``pipeline_parallel_layer_layout.py``), in order of precedence: an explicit ``pipeline_layout`` (layers per
virtual stage in model order, virtual stage ``i`` on pipeline rank ``i mod pp``, or per physical stage);
``first_stage_layers`` / ``last_stage_layers`` (Megatron's ``decoder_first_pipeline_num_layers`` /
``decoder_last_pipeline_num_layers``: the other stages share the rest); Megatron-Core's embedding / loss
accounting (``account_for_embedding_in_pipeline_split``, ``account_for_loss_in_pipeline_split``: each counts
as a layer, so the first and last stages carry one fewer), stated, or chosen when ``num_layers`` does not
divide ``pp x vpp`` but ``num_layers + 2`` does; else the even split, or the most even one. Never refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from tierwise.errors import PlanError
from tierwise.files import describe_type
from tierwise.specs.plan_groups import (
    BOOL_FIELDS,
    CODE_FIELDS,
    DUAL_SCHEDULES,
    FLAT_GROUP,
    GROUPS,
    ORDERS,
    PRECISION,
    RECOMPUTE,
    RECOMPUTE_COST_ORDER,
    SCHEDULES,
    ZERO3_GATHER,
    BatchShape,
    Degrees,
    Layout,
    Memory,
    Recompute,
    Software,
)

__all__ = ["Plan", "PlanBatch", "Degrees", "BatchShape", "Memory", "Software", "Layout", "validate_plan_batch",
           "valid_plan_mask", "ep_overlap_allowed", "RECOMPUTE", "RECOMPUTE_COST_ORDER", "Recompute", "PRECISION", "ORDERS", "SCHEDULES",
           "ZERO3_GATHER", "stage_layout", "layout_note", "LAYOUT_RULES", "DUAL_SCHEDULES", "is_dualpipe"]

_KEYS = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "seq_length",
         "sequence_parallel", "recompute", "zero_stage", "dp_shard", "reshard_after_forward", "precision",
         "tp_comm_overlap", "ep_comm_overlap", "fused_elementwise", "fused_cross_entropy", "overlap_grad_reduce", "overlap_param_gather", "schedule", "order",
         "first_stage_layers", "last_stage_layers", "zero3_gather", "pipeline_layout",
         "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "grad_reduce_dtype",
         "zero2_sync", "attention_kernel", "moe_dispatcher", "moe_grouped_gemm", "moe_force_balance",
         "pp_scatter_gather", "moe_node_limit", "torch_version", "activation_offload_layers")
"""The plan file's keys, in the order its error messages list them (the file format, not the fields: the file's
``pipeline_layout``, ``account_for_*`` and ``torch_version`` become :class:`Layout` / :class:`Software` fields)."""

_DOCUMENT_ORDER = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size",
                   "seq_length", "sequence_parallel", "recompute", "zero_stage", "dp_shard", "reshard_after_forward",
                   "precision", "tp_comm_overlap", "ep_comm_overlap", "pp_scatter_gather", "moe_force_balance",
                   "fused_elementwise", "fused_cross_entropy", "overlap_grad_reduce", "overlap_param_gather",
                   "schedule", "order", "first_stage_layers", "last_stage_layers", "middle_stage_layers",
                   "layout_explicit", "embedding_in_split", "loss_in_split", "zero3_gather", "grad_reduce_dtype",
                   "zero2_sync", "attention_kernel", "moe_dispatcher", "moe_node_limit", "moe_grouped_gemm",
                   "activation_offload_layers")
"""The key order of :meth:`Plan.as_dict` (the ``plan`` of every JSON document, which predates the groups and
must not change); ``tests/specs/test_plan_groups.py`` checks it names every flat field once."""

_TOP = ("framework", "assumed", "inferred")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One parallel plan: five groups (:mod:`tierwise.specs.plan_groups`) and where its defaults came from.

    Build one with :meth:`of` (flat keys) or :func:`~tierwise.specs.plan_mapping.plan_from_mapping` (a
    validated mapping), change one with :meth:`replace`. Every group field also reads as a flat, read-only
    attribute (``plan.tp`` is ``plan.degrees.tp``, ``plan.recompute`` is ``plan.memory.recompute``)."""

    degrees: Degrees = field(default_factory=Degrees)
    batch: BatchShape = field(default_factory=BatchShape)
    memory: Memory = field(default_factory=Memory)
    software: Software = field(default_factory=Software)
    layout: Layout = field(default_factory=Layout)
    framework: str = ""
    """The framework whose defaults filled unstated switches ("" = tierwise's own defaults)."""
    assumed: tuple[str, ...] = ()
    inferred: tuple[str, ...] = ()
    """Keys the user did not state that the estimate chooses (``recompute``: the cheapest that fits memory,
    :func:`tierwise.estimate.scenario.infer_settings`)."""

    @property
    def num_gpus(self) -> int:
        return self.degrees.num_gpus

    @property
    def num_microbatches(self) -> int:
        return self.batch.global_batch_size // (self.batch.micro_batch_size * self.degrees.dp)

    @classmethod
    def of(cls, **flat: Any) -> Plan:
        """A plan from flat keys (``Plan.of(tp=8, pp=2, recompute="full")``), unvalidated: user input goes
        through :func:`~tierwise.specs.plan_mapping.plan_from_mapping`. A group record may be given whole
        (``degrees=Degrees(...)``); flat keys of that group then change it. An unknown key is a TypeError."""
        top, parts = _route(flat, "Plan.of")
        for group, cls_ in GROUPS.items():
            base = top.get(group)
            top[group] = (cls_(**parts.get(group, {})) if base is None
                          else dataclasses.replace(base, **parts[group]) if group in parts else base)
        return cls(**top)

    def replace(self, **flat: Any) -> Plan:
        """This plan with the given flat keys changed (``plan.replace(recompute="none")``); group records
        and ``framework`` / ``assumed`` / ``inferred`` may be given too. An unknown key is a TypeError."""
        top, parts = _route(flat, "Plan.replace")
        for group, changes in parts.items():
            top[group] = dataclasses.replace(top.get(group, getattr(self, group)), **changes)
        return dataclasses.replace(self, **top)

    def as_dict(self) -> dict[str, Any]:
        """The flat plan of a JSON document: every field, then ``framework`` (``activation_offload_layers``
        only when on)."""
        out = {name: getattr(self, name) for name in _DOCUMENT_ORDER}
        out["framework"] = self.framework
        if not self.activation_offload_layers:  # an off switch: documents of plans without offload are unchanged
            del out["activation_offload_layers"]
        return out


def _route(flat: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(top-level fields and whole groups, {group: its flat keys}); an unknown key is a TypeError naming it."""
    top: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        group = FLAT_GROUP.get(key)
        if group is not None:
            parts.setdefault(group, {})[key] = value
        elif key in _TOP or key in GROUPS:
            top[key] = value
        else:
            raise TypeError(f"{where}: unknown plan field {key!r}; the fields are {', '.join(FLAT_GROUP)} "
                            f"(or a whole group: {', '.join(GROUPS)}; or {', '.join(_TOP)})")
    return top, parts


def _flat_alias(group: str, name: str) -> property:
    return property(attrgetter(f"{group}.{name}"), doc=f"``{group}.{name}`` (read-only; change with "
                                                       f":meth:`Plan.replace`).")


for _name, _group in FLAT_GROUP.items():
    setattr(Plan, _name, _flat_alias(_group, _name))


class _PlanBatchMethods:
    """The methods of :class:`PlanBatch` (whose columns are generated from the plan groups)."""

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_plans(cls, plans: Sequence[Plan]) -> PlanBatch:
        """A batch of the given plans (each a :class:`Plan`, e.g. from :func:`~tierwise.specs.plan_mapping.plan_from_mapping`)."""
        if not isinstance(plans, list | tuple):
            raise PlanError(f"PlanBatch.from_plans takes a list of plans, not {describe_type(plans)}; e.g. "
                            "PlanBatch.from_plans([tierwise.plan_from_mapping({...}, num_gpus=N)])")
        bad = next((i for i, p in enumerate(plans) if not isinstance(p, Plan)), None)
        if bad is not None:
            raise PlanError(f"PlanBatch.from_plans: item {bad} is {describe_type(plans[bad])}, not a plan; make each "
                            "with tierwise.plan_from_mapping({...}, num_gpus=N)")
        cols: dict[str, np.ndarray] = {}
        for group in GROUPS:
            records = [getattr(p, group) for p in plans]
            for f in fields(GROUPS[group]):
                values = [getattr(r, f.name) for r in records]
                choices = CODE_FIELDS.get(f.name)
                cols[f.name] = (np.array([choices.index(v) for v in values], dtype=np.int8) if choices
                                else np.array(values, dtype=_DTYPES[f.name]))
        return cls(**cols)

    @classmethod
    def from_arrays(cls, **arrays: Any) -> PlanBatch:
        """Build from arrays (or scalars, broadcast); missing fields get the plan defaults.

        Unlike :func:`~tierwise.specs.plan_mapping.plan_from_mapping` this applies no derived defaults: pass ``etp``, ``dp_shard`` and
        ``sequence_parallel`` explicitly when they should follow tp or dp.
        """
        n = max((np.size(v) for v in arrays.values()), default=1)
        cols = {}
        for name, dtype in _DTYPES.items():
            value = arrays.get(name, _DEFAULT_CODES[name])
            cols[name] = np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()
        unknown = set(arrays) - set(_DTYPES)
        if unknown:
            raise TypeError(f"unknown plan fields {sorted(unknown)}")
        return cls(**cols)

    def select(self, mask_or_index) -> PlanBatch:
        return type(self)(**{name: getattr(self, name)[mask_or_index] for name in _DTYPES})

    def plan(self, i: int) -> Plan:
        """The i-th plan as a :class:`Plan`."""
        groups = {}
        for group, cls_, columns in _UNPACK:
            kw: dict[str, Any] = {}
            for name, convert in columns:
                value = getattr(self, name)[i]
                kw[name] = convert[int(value)] if isinstance(convert, tuple) else convert(value)
            groups[group] = cls_(**kw)
        return Plan(**groups)


_DTYPES: dict[str, type] = {f.name: (np.int8 if f.name in CODE_FIELDS else bool if f.name in BOOL_FIELDS else np.int64)
                            for cls_ in GROUPS.values() for f in fields(cls_)}
"""Each column and its dtype, group by group (``int`` columns are int64, codes int8)."""
_DEFAULT_CODES: dict[str, Any] = {name: CODE_FIELDS[name].index(value) if name in CODE_FIELDS else value
                                  for name, value in
                                  ((f.name, f.default) for cls_ in GROUPS.values() for f in fields(cls_))}

_UNPACK = tuple((group, cls_, tuple((f.name, CODE_FIELDS.get(f.name) or (bool if f.name in BOOL_FIELDS else int))
                                    for f in fields(cls_))) for group, cls_ in GROUPS.items())
"""Per group: its record type and each field's converter from a column entry (a code field: its choices)."""

PlanBatch = make_dataclass("PlanBatch", [(name, np.ndarray) for name in _DTYPES], bases=(_PlanBatchMethods,),
                           namespace={"__module__": __name__, "__doc__": (
                               "Plans as a struct of numpy arrays (one entry per plan), one column per plan field "
                               "(:data:`~tierwise.specs.plan_groups.FLAT_GROUP`), generated from the groups. Strings "
                               "are stored as codes: ``recompute`` indexes :data:`RECOMPUTE`, ``precision`` "
                               ":data:`PRECISION`, ``schedule`` :data:`SCHEDULES`, ``order`` :data:`ORDERS`, each "
                               "code field its choices (:data:`~tierwise.specs.plan_groups.CODE_FIELDS`).")})


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tp_choices(model) -> str:
    heads, kv = model.num_attention_heads, model.num_kv_heads
    return ", ".join(str(d) for d in _divisors(heads) if kv % d == 0 or d % kv == 0)


# --------------------------------------------------------------------------------------------------
# model-dependent rules: each is written once, as a vectorized test over a PlanBatch (the planner's
# mask) paired with the one-line message for a single plan (validate_plan_batch)


LAYOUT_RULES = ("single", "explicit", "first/last", "embedding/loss", "even", "most-even")
"""How :func:`stage_layout` chose a plan's stages (codes are indices)."""


def stage_layout(num_layers: int, b: PlanBatch):
    """(first, last, fullest middle) physical stage layers and the rule used (index into :data:`LAYOUT_RULES`)
    for every plan of ``b``, vectorized. Megatron-Core ``transformer_block.get_num_layers_to_build``:

    1. ``layout_explicit``: the counts of an explicit ``pipeline_layout`` (``pipeline_parallel_layer_layout.py``).
    2. ``first_stage_layers`` / ``last_stage_layers`` (``num_layers_in_first/last_pipeline_stage``): the other
       stages share the rest; Megatron asserts they divide it, here the most even share (ceil) is priced.
    3. ``embedding_in_split`` / ``loss_in_split`` stated, or neither stated and ``L % (pp vpp) != 0`` but
       ``(L + 2) % (pp vpp) == 0``: the embedding and the loss each count as a layer, every stage holds
       ``(L + e + l) / pp`` and the first (last) builds one layer fewer.
    4. ``L % (pp vpp) == 0``: ``L / pp`` on every stage (the even split).
    5. Otherwise the most even split: ``L = q pp + r``; the ``r`` stages with ``q + 1`` layers are middle
       ones where there are enough (the first stage next, the last, which carries the loss, last of all).
       Not a Megatron rule (Megatron refuses), torchtitan's ``pipeline_parallel_layers_per_stage`` style.

    >>> b = PlanBatch.from_arrays(pp=[7, 4, 4, 1], vpp=[1, 4, 1, 1])
    >>> [tuple(int(x[i]) for x in stage_layout(96, b)) for i in range(3)]  # 96 layers on 7 stages
    [(13, 13, 14, 3), (24, 24, 24, 4), (24, 24, 24, 4)]
    >>> [tuple(int(x[i]) for x in stage_layout(62, b)) for i in range(2)]  # 62 on 7; 62 on 4 x 4 virtual
    [(9, 8, 9, 5), (15, 15, 16, 3)]
    """
    L = num_layers
    pp = b.pp.astype(np.int64)
    chunks = pp * b.vpp
    nf, nl = b.first_stage_layers > 0, b.last_stage_layers > 0
    if not (np.any(L % chunks) or nf.any() or nl.any() or b.layout_explicit.any() or b.embedding_in_split.any()
            or b.loss_in_split.any()):
        # every plan splits evenly (the planner's usual batch): rules 0 and 4 only, a fifth of the work
        per = L // pp
        return per, per, np.where(pp <= 2, 0, per), np.where(pp == 1, 0, 4)
    left = np.maximum(pp - nf - nl, 1)
    rest = L - np.where(nf, b.first_stage_layers, 0) - np.where(nl, b.last_stage_layers, 0)
    share = -(-np.maximum(rest, 0) // left)
    fl_first = np.where(nf, b.first_stage_layers, share)
    fl_last = np.where(nl, b.last_stage_layers, share)
    stated_el = b.embedding_in_split | b.loss_in_split
    auto_el = ~stated_el & (L % chunks != 0) & ((L + 2) % chunks == 0)
    e = np.where(auto_el, 1, b.embedding_in_split.astype(np.int64))
    l_ = np.where(auto_el, 1, b.loss_in_split.astype(np.int64))
    per = -(-(L + e + l_) // pp)
    q, r = L // pp, L % pp
    even_first = np.where(r > np.maximum(pp - 2, 0), q + 1, q)
    even_last = np.where((r > pp - 1) | ((pp == 2) & (r > 1)), q + 1, q)
    mid_even = -(-L // pp)
    rule = np.select([pp == 1, b.layout_explicit, nf | nl, stated_el | auto_el, L % chunks == 0],
                     [0, 1, 2, 3, 4], 5)
    first = np.select([pp == 1, b.layout_explicit, nf | nl, stated_el | auto_el],
                      [L, b.first_stage_layers, fl_first, per - e], even_first)
    last = np.select([pp == 1, b.layout_explicit, nf | nl, stated_el | auto_el],
                     [L, b.last_stage_layers, fl_last, per - l_], even_last)
    mid = np.select([pp <= 2, b.layout_explicit, nf | nl, stated_el | auto_el], [0, b.middle_stage_layers, share, per],
                    mid_even)
    return first, last, mid, rule


def layout_note(num_layers: int, plan: Plan) -> str:
    """The ``assumed`` line naming the stage layout of one plan and the rule that chose it."""
    first, last, mid, rule = (int(x[0]) for x in stage_layout(num_layers, PlanBatch.from_plans([plan])))
    stages = f"{first}/{mid}/{last}" if plan.pp > 2 else f"{first}/{last}"
    what = "first/middle (fullest)/last" if plan.pp > 2 else "first/last"
    why = {
        1: "the explicit pipeline_layout",
        2: "first_stage_layers/last_stage_layers given (Megatron decoder_first/last_pipeline_num_layers), the "
           "other stages share the rest",
        3: "Megatron-Core account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split"
           + (" (stated)" if plan.embedding_in_split or plan.loss_in_split else
              f": num_layers={num_layers} does not divide pp x vpp = {plan.pp * plan.vpp} but num_layers + 2 does")
           + ", the embedding and loss each count as a layer",
        4: "the even split",
        5: f"the most even split: num_layers={num_layers} and num_layers + 2 do not divide pp x vpp = "
           f"{plan.pp * plan.vpp}",
    }[rule]
    return f"pipeline stages {stages} layers ({what}): {why}; the slowest stage is priced"


def _stage_split_bad(model, b: PlanBatch) -> np.ndarray:
    nf, nl = b.first_stage_layers > 0, b.last_stage_layers > 0
    rest = model.num_layers - np.where(nf, b.first_stage_layers, 0) - np.where(nl, b.last_stage_layers, 0)
    left = b.pp - nf - nl
    given = (nf | nl) & ~b.layout_explicit
    return given & ((rest < 0) | ((left <= 0) & (rest != 0)) | (b.pp == 1))


def _stage_split_message(model, plan: Plan) -> str:
    rest = model.num_layers - plan.first_stage_layers - plan.last_stage_layers
    return (f"first_stage_layers={plan.first_stage_layers}, last_stage_layers={plan.last_stage_layers} with "
            f"pp={plan.pp} leave {rest} of num_layers={model.num_layers} for the other stages; the stages must "
            "hold every layer exactly once")


def _experts(model) -> int:
    return model.moe.num_experts if model.moe is not None else 1


def _microbatches(b: PlanBatch) -> np.ndarray:
    return b.global_batch_size // (b.micro_batch_size * b.dp)


def is_dualpipe(plans) -> np.ndarray:
    """Where each plan runs DualPipe or DualPipeV (bool array; a batch without ``schedule``: nowhere)."""
    raw = getattr(plans, "schedule", None)
    if raw is None:
        return np.zeros(len(plans), dtype=bool)
    return np.isin(np.asarray(raw), DUAL_SCHEDULES)


_EP_OVERLAP_RULES: tuple[tuple[Any, Any], ...] = (
    (lambda m, b: b.ep_comm_overlap & (b.ep == 1),
     lambda m, p: "ep_comm_overlap overlaps the expert all-to-all, which needs ep > 1; set ep > 1 or "
                  "ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (b.recompute == RECOMPUTE.index("full")),
     lambda m, p: "ep_comm_overlap (combined 1F1B) does not work with full recompute (Megatron-Bridge's EP "
                  "overlap guide); use recompute: selective or none, or ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (b.pp > 1) & (b.vpp == 1) & ~is_dualpipe(b),
     lambda m, p: f"ep_comm_overlap with pp={p.pp} needs the interleaved schedule (vpp > 1), as Megatron-Core "
                  "requires, or schedule: dualpipe / dualpipev; set vpp or ep_comm_overlap: false"),
    (lambda m, b: b.ep_comm_overlap & (_microbatches(b) < 2),
     lambda m, p: f"ep_comm_overlap pairs adjacent micro-batches; this plan has {p.num_microbatches}; raise "
                  "global_batch_size or lower micro_batch_size, or set ep_comm_overlap: false"),
)
"""When Megatron-Core's combined 1F1B (``ep_comm_overlap``) can run; part of :data:`_RULES`, and what the
planner offers EP overlap by (:func:`ep_overlap_allowed`)."""


_DUAL_RULES: tuple[tuple[Any, Any], ...] = (
    (lambda m, b: (b.schedule == SCHEDULES.index("dualpipe")) & (b.pp % 2 != 0),
     lambda m, p: f"schedule dualpipe needs an even pp (its two directions pair rank i with rank pp - 1 - i), "
                  f"got pp={p.pp}; use an even pp or schedule: dualpipev"),
    (lambda m, b: is_dualpipe(b) & (b.pp < 2),
     lambda m, p: f"schedule {p.schedule} is a pipeline schedule and needs pp >= 2, got pp={p.pp}; set pp or "
                  "schedule: 1f1b"),
    (lambda m, b: is_dualpipe(b) & (b.vpp > 1),
     lambda m, p: f"schedule {p.schedule} places its own chunks (two per rank); vpp={p.vpp} must be 1"),
    (lambda m, b: is_dualpipe(b) & (b.pp >= 2) & ((_microbatches(b) < 2 * b.pp) | (_microbatches(b) % 2 != 0)),
     lambda m, p: f"schedule {p.schedule} needs an even number of micro-batches of at least 2 x pp = {2 * p.pp} "
                  f"(DualPipe dualpipe.py step(): num_chunks % 2 == 0 and num_chunks >= num_ranks * 2), this "
                  f"plan has {p.num_microbatches}; change global_batch_size or micro_batch_size"),
)
"""When DualPipe / DualPipeV can run (deepseek-ai/DualPipe dualpipe.py ``step``: ``num_ranks % 2 == 0``,
``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``; DualPipeV is taken to need the same micro-batches)."""


_OFFLOAD_RULES: tuple[tuple[Any, Any], ...] = (
    (lambda m, b: b.activation_offload_layers >= m.num_layers,
     lambda m, p: f"activation_offload_layers={p.activation_offload_layers} must be below num_layers={m.num_layers} "
                  f"(Megatron-Core cpu_offloading_num_layers: 0 to num_layers - 1); use at most {m.num_layers - 1}"),
    (lambda m, b: (b.activation_offload_layers > 0) & (b.pp > 1),
     lambda m, p: f"activation_offload_layers with pp={p.pp}: Megatron-Core has no pipeline parallelism with CPU "
                  "offloading; set pp: 1 or activation_offload_layers: 0"),
    (lambda m, b: (b.activation_offload_layers > 0) & (b.recompute != RECOMPUTE.index("none")),
     lambda m, p: f"activation_offload_layers with recompute={p.recompute}: Megatron-Core's CPU offloading does not "
                  "work with activation recompute; set recompute: none or activation_offload_layers: 0"),
)
"""When Megatron-Core's activation CPU offloading can run (``TransformerConfig.__post_init__``)."""


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
    # Megatron-Core schedules.py forward_backward_pipelining_with_interleaving: microbatch_group_size_per_vp_stage
    # N must lie in [PP, M] and M % N be 0 or >= PP ("The number of contiguous micro-batches in a virtual pipeline
    # stage should range in [PP, M]"); N defaults to PP but is settable, and N = M always passes, so the rule a
    # plan must meet is M >= PP (a multiple of PP only for the default N)
    (lambda m, b: (b.vpp > 1) & (_microbatches(b) < b.pp),
     lambda m, p: f"the interleaved schedule needs at least pp={p.pp} micro-batches, this plan has "
                  f"{p.num_microbatches} (Megatron-Core: microbatch_group_size_per_vp_stage in [pp, micro-batches]); "
                  "raise global_batch_size or lower micro_batch_size"),
    *_DUAL_RULES,
    *_OFFLOAD_RULES,
    *_EP_OVERLAP_RULES,
    (lambda m, b: (b.zero3_gather != ZERO3_GATHER.index("flat")) & (b.zero_stage < 2),
     lambda m, p: f"zero3_gather={p.zero3_gather!r} describes FSDP / ZeRO parameter gathers but "
                  f"zero_stage={p.zero_stage}; set zero_stage: 3 (or 2), or drop zero3_gather"),
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

    Degrees are assumed positive (the planner and :func:`~tierwise.specs.plan_mapping.plan_from_mapping` only build positive ones).
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
