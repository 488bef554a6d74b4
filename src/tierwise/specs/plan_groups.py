"""The groups of a parallel plan (issue 27, "plan/ grouped"): :class:`Degrees`, :class:`BatchShape`,
:class:`Memory`, :class:`Software` and :class:`Layout`, after torchtitan's ``ParallelDims`` (a record holding
only the degrees, ``torchtitan/distributed/parallel_dims.py``).

Each plan field is declared once, here, with its default, its docstring and its kind: ``int``, ``bool``, or a
string stored as a code (its index into the choices given by :func:`code`). :class:`~tierwise.specs.plan.Plan`
holds one record of each group; :class:`~tierwise.specs.plan.PlanBatch`'s columns, their dtypes and the
int / bool / code tables (:data:`INT_FIELDS`, :data:`BOOL_FIELDS`, :data:`CODE_FIELDS`) are generated from
these declarations. Where each group is consumed: docs/architecture.md, "The grouped plan".
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from enum import IntEnum
from typing import Any

from tierwise.specs.framework import (
    ATTENTION_KERNELS,
    GRAD_REDUCE_DTYPES,
    MOE_DISPATCHERS,
    MOE_GROUPED_GEMMS,
    ZERO2_SYNC,
)

__all__ = ["Degrees", "BatchShape", "Memory", "Software", "Layout", "GROUPS", "FLAT_GROUP", "INT_FIELDS",
           "BOOL_FIELDS", "CODE_FIELDS", "field_kind", "code", "RECOMPUTE", "RECOMPUTE_COST_ORDER", "Recompute",
           "PRECISION", "SCHEDULES", "DUAL_SCHEDULES", "ZERO3_GATHER", "ORDERS"]

RECOMPUTE = ("none", "selective", "full", "deepseek")
"""Activation recompute / caching choices. ``deepseek``: DeepSeek-V3's recipe (arXiv:2412.19437 sec. 3.2.3
"Recomputation of RMSNorm and MLA Up-Projection", sec. 3.3.4 "Low-Precision Storage"): RMSNorm outputs and the
MLA up-projections are recomputed in the backward (their inputs, the layer input and the compressed latents,
are kept), the MoE input (the dispatched tokens), the SwiGLU input and the input of the linear after attention
are cached in FP8 under an FP8 plan, and the SwiGLU output is recomputed (:mod:`tierwise.workload.memory`)."""
RECOMPUTE_COST_ORDER = ("none", "selective", "deepseek", "full")
"""Recompute choices cheapest first: the order the estimate infers an unstated ``recompute`` in."""


class Recompute(IntEnum):
    """``PlanBatch.recompute`` codes (indices into :data:`RECOMPUTE`)."""

    NONE = 0
    SELECTIVE = 1
    FULL = 2
    DEEPSEEK = 3


PRECISION = ("bf16", "fp8")
SCHEDULES = ("1f1b", "interleaved", "dualpipe", "dualpipev")
"""Pipeline schedules. ``1f1b`` and ``interleaved`` (Megatron-Core, ``vpp`` chunks); ``dualpipe`` (DeepSeek-V3
report, arXiv:2412.19437 sec. 3.2.1: micro-batches fed from both ends, each rank holds stages ``i`` and
``pp - 1 - i``, so two copies of the parameters, and runs a forward and a backward chunk as one overlapped
pair) and ``dualpipev`` (DualPipe README, "DualPipeV": the V-shaped cut-in-half variant, ``2 pp`` stages on
``pp`` ranks, one copy of the parameters). Priced in :mod:`tierwise.parallel.pp`."""
DUAL_SCHEDULES = (SCHEDULES.index("dualpipe"), SCHEDULES.index("dualpipev"))
ZERO3_GATHER = ("flat", "per-parameter", "tensor-list", "zero-copy")
"""How ZeRO-3 moves each layer's parameters and gradients, by implementation:

* ``flat``: PyTorch FSDP1's ``FlatParameter`` (default). One ``all_gather_into_tensor`` straight into the
  unit's flat buffer, the parameters are views of it; the backward concatenates the views' gradients, casts
  them to the reduce dtype and pre-divides them before the reduce-scatter.
* ``per-parameter``: FSDP2 (``fully_shard``, torchtitan). The all-gather lands in a staging buffer that is
  copied out into each parameter; the gradients are copied (and cast) into the reduce-scatter input; NCCL
  averages, so there is no divide pass.
* ``tensor-list``: DeepSpeed ZeRO-3 of 2021. One list-form ``torch.distributed`` collective per parameter
  tensor, which copies each rank's chunk separately (eager ops on the CPU thread). DeepSpeed's default
  ``stage3_max_live_parameters`` (1e9 elements) is taken: a weight gathered behind a live matrix at least that
  large is not prefetched (``parallel.dp.deepspeed_blocked_gather_fraction``).
* ``zero-copy``: Megatron-FSDP (``--use-megatron-fsdp``). Parameters and main gradients live in the
  communication buffers themselves (``ParamAndGradBuffer``: "Zero copy communication is achieved by
  reorganizing the storage of parameters and main grad", megatron/core/distributed/fsdp/src/README.md), so
  the gathers and reduce-scatters move no bytes outside the collectives.

The estimator counts the extra HBM passes of each (``parallel.dp.shard_copy_bytes``)."""
ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp", "tp-pp-cp-dp", "dp-tp-cp-pp")
"""Supported placement orders, innermost axis first (Megatron-Core's default first)."""


def code(default: str, choices: tuple[str, ...]) -> Any:
    """A string field with a fixed set of ``choices``; a :class:`~tierwise.specs.plan.PlanBatch` stores its
    index into them (an ``int8`` code)."""
    return field(default=default, metadata={"choices": choices})


@dataclass(frozen=True, kw_only=True)
class Degrees:
    """The parallel degrees, and nothing else (torchtitan ``ParallelDims``): what collective-group and
    hierarchy placement code needs (:mod:`tierwise.hierarchy`, :mod:`tierwise.parallel`)."""

    tp: int = 1
    """Tensor-parallel degree."""
    pp: int = 1
    """Pipeline-parallel degree (physical stages)."""
    cp: int = 1
    """Context-parallel degree."""
    dp: int = 1
    """Data-parallel degree (replicas of the dense weights per ``cp`` slice)."""
    ep: int = 1
    """Expert-parallel degree."""
    etp: int = 1
    """Expert tensor-parallel degree (``tp`` unless stated)."""
    vpp: int = 1
    """Virtual pipeline stages (chunks) per pipeline rank."""
    dp_shard: int = 1
    """HSDP shard group within ``dp`` (``dp``: fully sharded)."""

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp


@dataclass(frozen=True, kw_only=True)
class BatchShape:
    """The batch of one step."""

    micro_batch_size: int = 1
    """Sequences per micro-batch."""
    global_batch_size: int = 1
    """Sequences per optimizer step."""
    seq_length: int = 2048
    """Tokens per sequence."""


@dataclass(frozen=True, kw_only=True)
class Memory:
    """Memory-saving switches: what is kept, recomputed, sharded or offloaded."""

    recompute: str = code("none", RECOMPUTE)
    """Activation recompute (:data:`RECOMPUTE`)."""
    zero_stage: int = 1
    """ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters sharded over ``dp_shard``."""
    reshard_after_forward: bool = True
    """ZeRO-3 / FSDP frees the gathered parameters after the forward and gathers them again for the backward."""
    activation_offload_layers: int = 0
    """Layers whose activations go to host memory after their forward and come back for their backward
    (Megatron-Core ``cpu_offloading_num_layers``, 0 to num_layers - 1; no PP, no recompute:
    ``TransformerConfig.__post_init__``); priced by :mod:`tierwise.parallel.offload`."""


@dataclass(frozen=True, kw_only=True)
class Software:
    """How the framework runs the step: precision, overlap, fused kernels, communication and MoE switches."""

    precision: str = code("bf16", PRECISION)
    """Matmul precision (:data:`PRECISION`)."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism (true by default when tp > 1)."""
    tp_comm_overlap: bool = False
    """TP collectives overlapped with the GEMMs (Megatron-Core / Transformer Engine ``tp_comm_overlap``)."""
    ep_comm_overlap: bool = False
    """Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-comm``): the expert all-to-all of one
    micro-batch runs behind the compute of the adjacent one."""
    pp_scatter_gather: bool = False
    """Megatron-LM 2021-22 ``--scatter-gather-tensors-in-pipeline`` (on by default there; Narayanan et al. SC 2021
    section 4.1): without sequence parallelism each TP rank sends 1/tp of the (replicated) activation to the
    next pipeline stage, which all-gathers it over its TP group. Megatron-Core and the other frameworks send
    the whole tensor (false)."""
    moe_force_balance: bool = False
    """Every expert runs its mean load: the router is forced to spread tokens evenly (Megatron-Core
    ``--moe-router-force-load-balancing``, "for benchmark only"; NeMo Automodel's fake balanced gate), or token
    dropping pads every expert to a capacity factor of 1 (Megatron-Core ``moe_expert_capacity_factor`` 1.0 with
    ``moe_pad_expert_input_to_capacity``: NeMo's ``MegatronTokenDropCallback`` defaults); false: the trained
    router's dropless load, whose busiest rank the others wait for (``moe_load_imbalance``)."""
    fused_elementwise: bool = True
    """Elementwise work runs in fused kernels (Megatron/Transformer Engine, torch.compile); false: eager PyTorch,
    one kernel per op (RMSNorm, SwiGLU, RoPE each several passes over HBM)."""
    fused_cross_entropy: bool = False
    """The loss runs as one fused cross-entropy kernel (Megatron-Core ``cross_entropy_loss_fusion``, Transformer
    Engine, Liger); false (Megatron-Core's default, PyTorch's ``F.cross_entropy``, Megatron's
    ``vocab_parallel_cross_entropy``): an fp32 copy of the logits and separate max / exp / sum / divide passes
    over them, forward and backward."""
    overlap_grad_reduce: bool = True
    """Gradient reduction overlapped with the backward (Megatron-Core ``overlap_grad_reduce``)."""
    overlap_param_gather: bool = True
    """Parameter gathers overlapped with the forward (Megatron-Core ``overlap_param_gather``)."""
    zero3_gather: str = code("flat", ZERO3_GATHER)
    """See :data:`ZERO3_GATHER`."""
    grad_reduce_dtype: str = code("fp32", GRAD_REDUCE_DTYPES)
    """The dtype gradients are reduced in (:data:`tierwise.specs.framework.GRAD_REDUCE_DTYPES`)."""
    zero2_sync: str = code("per-step", ZERO2_SYNC)
    """What ZeRO-2 does under gradient accumulation (:data:`tierwise.specs.framework.ZERO2_SYNC`)."""
    attention_kernel: str = code("auto", ATTENTION_KERNELS)
    """Attention kernel family (:data:`tierwise.specs.framework.ATTENTION_KERNELS`); ``auto``: the
    accelerator generation's default, resolved by the estimator. The plan file's ``torch_version`` is read
    into this (``sdpa`` under that release)."""
    moe_dispatcher: str = code("alltoall", MOE_DISPATCHERS)
    """MoE token dispatcher (:data:`tierwise.specs.framework.MOE_DISPATCHERS`): the kernels per MoE layer."""
    moe_node_limit: int = 0
    """Node-limited routing: each token's experts lie on at most this many scale-up domains of the EP group
    (DeepSeek-V3 report sec. 3.2.2, M = 4); 0 = the model's ``moe.topk_group`` when its ``n_group`` groups map
    onto the domains (:func:`tierwise.parallel.ep.node_limit`)."""
    moe_grouped_gemm: str = code("per-expert", MOE_GROUPED_GEMMS)
    """How the experts' GEMMs are launched (:data:`tierwise.specs.framework.MOE_GROUPED_GEMMS`): the host
    launches per local expert."""


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Where the layers and ranks go: pipeline schedule, placement order and the stage layout
    (:func:`tierwise.specs.plan.stage_layout`)."""

    schedule: str = code("1f1b", SCHEDULES)
    """Pipeline schedule (:data:`SCHEDULES`)."""
    order: str = code("tp-cp-dp-pp", ORDERS)
    """Placement order of the axes over the ranks, innermost first (:data:`ORDERS`)."""
    first_stage_layers: int = 0
    """Layers on the first pipeline stage (0 = even split)."""
    last_stage_layers: int = 0
    """Layers on the last pipeline stage (0 = even split)."""
    middle_stage_layers: int = 0
    """Layers of the fullest middle stage (0 = derived; set from an explicit ``pipeline_layout``)."""
    layout_explicit: bool = False
    """First / last / middle stage layers are taken as given (an explicit ``pipeline_layout``)."""
    embedding_in_split: bool = False
    """Megatron-Core ``account_for_embedding_in_pipeline_split``: the embedding counts as a layer."""
    loss_in_split: bool = False
    """Megatron-Core ``account_for_loss_in_pipeline_split``: the loss counts as a layer."""


GROUPS: dict[str, type] = {"degrees": Degrees, "batch": BatchShape, "memory": Memory, "software": Software,
                           "layout": Layout}
"""The plan's groups by attribute name (``plan.degrees``, ``plan.batch``, ...)."""
FLAT_GROUP: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}
"""Each flat plan key and the group that declares it."""


def field_kind(f: Field) -> Any:
    """``int``, ``bool``, or the tuple of choices of a code field (:func:`code`)."""
    if "choices" in f.metadata:
        return f.metadata["choices"]
    kind = {"int": int, "bool": bool}.get(f.type) if isinstance(f.type, str) else f.type
    if kind not in (int, bool):
        raise TypeError(f"plan field {f.name} is {f.type}: declare it int, bool or code(default, choices)")
    return kind


_KINDS = {f.name: field_kind(f) for cls in GROUPS.values() for f in fields(cls)}
INT_FIELDS = tuple(name for name, kind in _KINDS.items() if kind is int)
BOOL_FIELDS = tuple(name for name, kind in _KINDS.items() if kind is bool)
CODE_FIELDS: dict[str, tuple[str, ...]] = {name: kind for name, kind in _KINDS.items() if isinstance(kind, tuple)}
"""Code fields and their choices: a :class:`~tierwise.specs.plan.PlanBatch` stores the index."""
