"""Traffic as records: every communication one training step makes, per axis, for a batch of plans.

:func:`layer_traffic` lists, for a :class:`~tierwise.specs.plan.PlanBatch` (numpy struct of arrays), the
collectives and transfers of the tensor-, expert- and context-parallel axes (per layer) and of the
pipeline (per micro-batch) as :class:`Traffic` records: the kind, the bytes of one call (nccl-tests size,
:mod:`tierwise.collectives.volumes`), the group geometry (``size`` ranks at ``stride``: which ranks it
spans, :mod:`tierwise.hierarchy`), how many calls per layer or per micro-batch in each phase, and what the
schedule lets it hide behind. The estimator (:mod:`tierwise.estimate.step`) only *prices* these records on
the tiers their groups cross (:mod:`tierwise.collectives`) and applies overlap; it computes no volume itself.
Data-parallel traffic (gradient reduction, ZeRO gathers) depends on the slowest pipeline stage's
parameters, which the estimator's stage composition yields; it stays in ``estimate/step.py:_data_parallel``.

Counts per layer, one micro-batch, hidden size ``h``, ``T`` tokens per rank (``b s / cp``), bf16 (2 bytes):

* **TP** (Megatron-LM; Shoeybi et al. 2019 section 3; Korthikanti et al. 2022 section 4.2.2, Fig. 5): each of
  the attention and MLP blocks has one ``g`` and one ``g-bar``. Without sequence parallelism that is an
  all-reduce of the ``2 T h``-byte activations forward (``g-bar``) and one backward (``g``): 2 + 2 per
  layer. With sequence parallelism ``g`` is an all-gather forward and a reduce-scatter backward, ``g-bar``
  the reverse: **2 all-gathers + 2 reduce-scatters per layer forward**, 2 + 2 backward, each over the full
  ``2 T h`` buffer ("the same communication volume" as the all-reduces). Full recompute reruns the forward:
  2 + 2 (or 2 all-reduces) more.
* **TP in a MoE layer** (``tp_moe``, per MoE layer; Megatron-Core MoE with sequence parallelism, which it
  requires with TP): the attention block keeps its pair of the TP records, but the MLP block's pair runs over
  the expert-TP group instead: the token dispatcher's TP group is the expert-TP group
  (``token_dispatcher.py``: ``tp_group = expt_tp``), so it all-gathers the ``etp`` ranks' sequence shards
  (``2 T h etp / tp`` bytes) before the experts and reduce-scatters them after, 1 + 1 forward and backward
  (and under full recompute); with ``etp = 1`` none: each rank dispatches its own shard. The estimator
  prices a MoE layer's TP as the ``tp`` records less the MLP's pair (half the SP records) plus these.
* **EP** (GShard, Lepikhin et al. 2021 section 2.2; Megatron-Core MoE): a dispatch and a combine all-to-all
  of ``top_k x T' x h x 2`` bytes per MoE layer forward (``T' = T / tp`` with SP), the same two backward, two
  more under full recompute; DeepEP under an FP8 plan dispatches in FP8 and combines in BF16 (``x 3/4`` on
  average: :func:`_a2a_width`).
* **CP** (ring attention, Liu et al. 2023; Megatron-Core context parallelism): ``cp - 1`` passes of the
  rank's K/V chunk (``2 T x kv_channels x 2 / min(tp, kv heads)`` bytes) around the ring forward, twice the
  data backward (``2 (cp - 1)`` passes: K/V and their gradients); each pass is every rank sending to its
  neighbour at once (``pattern = "ring"``: paced by the ring's slowest hop).
* **PP** (Narayanan et al. 2021 section 2.2): one send/recv of the micro-batch's activations
  (``2 T h / tp`` bytes with SP, scattered over the TP ranks; also without SP under Megatron-LM 2021-22's
  ``--scatter-gather-tensors-in-pipeline``, plan ``pp_scatter_gather``, Narayanan et al. SC 2021 section 4.1,
  whose receiver all-gathers it over NVLink: priced in estimate/step.py) forward and one of their gradients backward,
  per model chunk (``2 v`` per micro-batch; ``pattern = "chain"``: each stage boundary on its own tier).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tierwise.specs.framework import MOE_DISPATCHERS
from tierwise.specs.model import ModelSpec
from tierwise.specs.plan import ORDERS, PRECISION, PlanBatch, Recompute
from tierwise.workload.flops import ModelShape

__all__ = ["Traffic", "layer_traffic", "forward_traffic", "axis_strides", "PHASES"]

PHASES = ("forward", "backward", "recompute")


@dataclass(frozen=True)
class Traffic:
    """One kind of communication of one axis, for every plan of a batch (arrays of one shape ``N``)."""

    axis: str
    """``tp``, ``ep``, ``cp`` or ``pp``."""
    kind: str
    """Collective kind (:data:`tierwise.collectives.volumes` names): ``all-gather``, ``reduce-scatter``,
    ``all-reduce``, ``all-to-all`` or ``send-recv``."""
    bytes: np.ndarray
    """Bytes of one call (nccl-tests size: the whole buffer; for a send/recv the message)."""
    size: np.ndarray
    """Ranks in the group."""
    stride: np.ndarray
    """Rank distance between neighbouring members of the group."""
    counts: dict[str, np.ndarray]
    """Calls per ``per`` in each phase (``forward``, ``backward``, ``recompute``)."""
    per: str
    """``layer`` (every layer), ``moe_layer`` (layers with experts) or ``microbatch``."""
    pattern: str = "collective"
    """``collective`` (priced by the collective model on the group's span), ``ring`` (simultaneous
    neighbour transfers: the slowest hop sets the pace) or ``chain`` (a pipeline: each boundary on its tier)."""
    hides_behind: str = "nothing"
    """What the schedule may overlap it with (the estimator's overlap switches decide whether it does)."""

    @property
    def calls(self) -> np.ndarray:
        """Calls per ``per`` in all phases together."""
        return sum(self.counts.values())


def axis_strides(plans: PlanBatch) -> dict[str, np.ndarray]:
    """Stride of each axis's group for the plans' placement orders (innermost axis stride 1): rank ``r`` runs
    on GPU ``r`` and the axes are laid out innermost first (:mod:`tierwise.hierarchy`)."""
    strides = {a: np.ones(len(plans), dtype=np.int64) for a in ("tp", "cp", "dp", "pp")}
    for code, order in enumerate(ORDERS):
        mask = plans.order == code
        if not np.any(mask):
            continue
        acc = np.ones(int(mask.sum()), dtype=np.int64)
        for axis in order.split("-"):
            strides[axis][mask] = acc
            acc = acc * getattr(plans, axis)[mask]
    return strides


def layer_traffic(model: ModelSpec, shape: ModelShape, plans: PlanBatch,
                  strides: dict[str, np.ndarray] | None = None) -> dict[str, list[Traffic]]:
    """The TP, EP, CP and PP records of ``plans`` (module docstring), by axis.

    >>> from tierwise.specs.model import load_model
    >>> from tierwise.specs.plan_mapping import plan_from_mapping
    >>> from tierwise.workload.flops import model_shape
    >>> m = load_model("llama3.1-70b")
    >>> p = PlanBatch.from_plans([plan_from_mapping({"tp": 8, "global_batch_size": 8, "seq_length": 4096}, num_gpus=8)])
    >>> tp = layer_traffic(m, model_shape(m), p)["tp"]
    >>> [(r.kind, int(r.counts["forward"][0]), int(r.counts["backward"][0])) for r in tp if r.calls[0] > 0]
    [('all-gather', 2, 2), ('reduce-scatter', 2, 2)]
    """
    strides = axis_strides(plans) if strides is None else strides
    n = len(plans)
    tp, cp = plans.tp.astype(float), plans.cp.astype(float)
    tokens = plans.micro_batch_size.astype(float) * plans.seq_length.astype(float) / cp
    sp = plans.sequence_parallel & (plans.tp > 1)
    full = plans.recompute == Recompute.FULL
    act_bytes = 2.0 * tokens * model.hidden_size
    zero = np.zeros(n)

    def phases(fwd, bwd, recompute_like_forward=True):
        fwd = np.broadcast_to(np.asarray(fwd, dtype=float), (n,))
        bwd = np.broadcast_to(np.asarray(bwd, dtype=float), (n,))
        return {"forward": fwd, "backward": bwd,
                "recompute": np.where(full, fwd, 0.0) if recompute_like_forward else zero}

    on = plans.tp > 1
    with_sp, without_sp = np.where(on & sp, 2.0, 0.0), np.where(on & ~sp, 2.0, 0.0)
    tp_size, tp_stride = plans.tp, strides["tp"]
    out = {
        "tp": [
            Traffic(axis="tp", kind="all-gather", bytes=act_bytes, size=tp_size, stride=tp_stride,
                    counts=phases(with_sp, with_sp), per="layer", hides_behind="layer_gemms"),
            Traffic(axis="tp", kind="reduce-scatter", bytes=act_bytes, size=tp_size, stride=tp_stride,
                    counts=phases(with_sp, with_sp), per="layer", hides_behind="layer_gemms"),
            Traffic(axis="tp", kind="all-reduce", bytes=act_bytes, size=tp_size, stride=tp_stride,
                    counts=phases(without_sp, without_sp), per="layer", hides_behind="layer_gemms"),
        ],
    }
    if model.moe is not None:
        out["tp_moe"], out["ep"] = _moe_traffic(model, plans, phases, act_bytes=act_bytes, tokens=tokens, sp=sp,
                                                tp_stride=tp_stride)
    else:
        out["ep"], out["tp_moe"] = [], []
    kv_split = np.minimum(tp, model.num_kv_heads if model.mla is None else tp)
    kv_chunk = 2.0 * tokens * shape.kv_bytes_channels / kv_split
    passes = np.where(plans.cp > 1, cp - 1, 0.0)
    out["cp"] = [Traffic(axis="cp", kind="send-recv", bytes=kv_chunk, size=plans.cp, stride=strides["cp"],
                         counts=phases(passes, 2 * passes, recompute_like_forward=False), per="layer",
                         pattern="ring", hides_behind="attention")]
    chunks = np.where(plans.pp > 1, plans.vpp.astype(float), 0.0)
    # with SP the activations are already scattered over the TP ranks; Megatron-LM 2021-22's scatter/gather
    # (plan pp_scatter_gather) sends 1/tp of the replicated activation without SP too
    seq_shard = np.where(sp | (plans.pp_scatter_gather & on), tp, 1.0)
    out["pp"] = [Traffic(axis="pp", kind="send-recv", bytes=act_bytes / seq_shard, size=plans.pp,
                         stride=strides["pp"], counts=phases(chunks, chunks, recompute_like_forward=False),
                         per="microbatch", pattern="chain")]
    return out


def _moe_traffic(model: ModelSpec, plans: PlanBatch, phases: Callable[..., dict], *, act_bytes: np.ndarray,
                 tokens: np.ndarray, sp: np.ndarray, tp_stride: np.ndarray) -> tuple[list[Traffic], list[Traffic]]:
    """(``tp_moe``, ``ep``) records of a MoE model in :func:`layer_traffic`: the expert-TP all-gather and
    reduce-scatter pair under SP, and the EP dispatch and combine all-to-alls."""
    tp = plans.tp.astype(float)
    etp = plans.etp.astype(float)
    moe_pair = np.where(sp & (plans.etp > 1), 1.0, 0.0)
    tp_moe = [
        Traffic(axis="tp", kind=kind, bytes=act_bytes * etp / tp, size=plans.etp, stride=tp_stride,
                counts=phases(moe_pair, moe_pair), per="moe_layer", hides_behind="layer_gemms")
        for kind in ("all-gather", "reduce-scatter")]
    a2a = np.where(sp, tokens / tp, tokens) * model.moe.top_k * model.hidden_size * 2.0 * _a2a_width(plans)
    calls = np.where(plans.ep > 1, 2.0, 0.0)
    # the expert groups: ep ranks at stride etp (experts fold into the tp x cp x dp ranks: etp x ep x edp)
    ep = [Traffic(axis="ep", kind="all-to-all", bytes=a2a, size=plans.ep, stride=plans.etp.astype(np.int64),
                  counts=phases(calls, calls), per="moe_layer", hides_behind="adjacent_microbatch")]
    return tp_moe, ep


def _a2a_width(plans) -> np.ndarray:
    """Mean bytes per element of the EP all-to-alls over 2 (bf16): 3/4 for DeepEP under an FP8 plan, 1 otherwise.

    DeepSeek-V3 report (arXiv:2412.19437) sec. 3.3.4 "Low-Precision Communication": the activations before the
    MoE up-projections are quantized to FP8 before the dispatch, the activation gradients before the
    down-projections likewise, and "for both the forward and backward combine components, we retain them in
    BF16"; DeepEP README: "dispatch in FP8, combine in BF16". So one all-to-all of each dispatch / combine pair
    moves 1 byte per element and the other 2 (the per-128-element FP8 scales are ~3% more, not counted)."""
    raw = getattr(plans, "moe_dispatcher", None)
    if raw is None:
        return np.ones(len(plans))
    fp8 = np.asarray(plans.precision) == PRECISION.index("fp8")
    return np.where((np.asarray(raw) == MOE_DISPATCHERS.index("deepep")) & fp8, 0.75, 1.0)


def forward_traffic(model: ModelSpec, tp, ep, tokens, *, fp8_dispatch: bool) -> dict[str, list[Traffic]]:
    """The TP and EP records of one inference forward pass (a serving prefill or decode step) over ``tokens``
    tokens of one attention group, for arrays of ``tp`` / ``ep`` degrees: :func:`layer_traffic`'s forward records
    of a plan without sequence parallelism (engines run TP without it) and without a backward.

    * **TP**: the ``2 T h``-byte activations all-reduced after the attention and after the MLP (or the MoE
      combine): 2 per layer (Megatron-LM, Shoeybi et al. 2019 section 3), over ``tp`` consecutive ranks.
    * **EP** with the experts folded into the TP ranks (``ep <= tp``, the vLLM / TensorRT-LLM layout): a dispatch
      all-to-all of ``top_k T h`` elements, in FP8 (1 byte) under FP8/FP4 weights (``fp8_dispatch``: the engines'
      FP8 dispatch, DeepEP README "dispatch in FP8, combine in BF16") else BF16, and a combine in BF16, per MoE
      layer (GShard, Lepikhin et al. 2021 section 2.2), over ``ep`` consecutive ranks. EP wider than TP (attention
      data-parallel) runs DeepEP's kernels, priced by :func:`tierwise.parallel.deepep.deepep_time`, not here.
    """
    tp = np.asarray(tp, dtype=np.int64)
    ep = np.asarray(ep, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=float)
    tp, ep, tokens = np.broadcast_arrays(tp, ep, tokens)
    zero, one = np.zeros(tp.shape), np.ones(tp.shape, dtype=np.int64)
    h = float(model.hidden_size)

    def forward(calls):
        return {"forward": np.asarray(calls, dtype=float) + zero, "backward": zero, "recompute": zero}

    out = {"tp": [Traffic(axis="tp", kind="all-reduce", bytes=2.0 * tokens * h, size=tp, stride=one,
                          counts=forward(np.where(tp > 1, 2.0, 0.0)), per="layer", hides_behind="layer_gemms")],
           "ep": []}
    if model.moe is not None:
        folded = np.where(ep <= tp, ep, 1)
        calls = forward(np.where(folded > 1, 1.0, 0.0))
        k = float(model.moe.top_k)
        out["ep"] = [Traffic(axis="ep", kind="all-to-all", bytes=tokens * k * h * width, size=folded, stride=one,
                             counts=calls, per="moe_layer", hides_behind="adjacent_microbatch")
                     for width in ((1.0 if fp8_dispatch else 2.0), 2.0)]  # dispatch, combine
    return out
