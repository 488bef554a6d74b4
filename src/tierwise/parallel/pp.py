"""Pipeline parallelism: layers per stage, the stages' micro-batch times, the 1F1B bubble and the send/recv
of each stage boundary on the tier it crosses."""

from __future__ import annotations

import numpy as np

from tierwise.hierarchy import GroupHops
from tierwise.parallel.records import Derived, LayerComm, LayerCompute, Pipeline, StageCompute
from tierwise.pricing.comm import hop_times, pick, placed_hops, price_collective
from tierwise.specs.model import ModelSpec
from tierwise.specs.plan import PlanBatch, stage_layout


def stage_layers(model: ModelSpec, plans: PlanBatch):
    """(first, middle, last) layer counts and their MoE layer counts per plan; middle is the fullest middle
    stage (:func:`tierwise.specs.plan.stage_layout`: explicit layout, Megatron-Core's first/last and
    embedding/loss accounting, else the (most) even split), so the slowest stage is the one priced.

    MoE layers: the first stage's are the model's first ``first`` layers', the last stage's its last ``last``
    layers'; the fullest middle stage holds its share of the middle range's MoE layers, rounded up.
    """
    L = model.num_layers
    first, last, mid, _ = stage_layout(L, plans)
    pp = plans.pp
    n_mid = np.maximum(pp - 2, 0)
    last = np.where(pp == 1, first, last)
    first, last, mid = first.astype(float), last.astype(float), np.where(n_mid > 0, mid, 0).astype(float)
    if model.moe is None:
        none = np.zeros(first.shape)
        return (first, mid, last), (none, none, none)
    cum = np.concatenate([[0], np.cumsum(np.array(model.moe_layer_mask, dtype=float))])
    moe_first = cum[np.clip(first, 0, L).astype(int)]
    moe_last = np.where(pp == 1, moe_first, cum[L] - cum[np.clip(L - last, 0, L).astype(int)])
    mid_range = np.maximum(L - first - last, 1)
    moe_in_mid = np.maximum(cum[L] - moe_first - np.where(pp == 1, 0.0, moe_last), 0.0)
    moe_mid = np.where(n_mid > 0, np.minimum(mid, np.ceil(mid * moe_in_mid / mid_range - 1e-9)), 0.0)
    (first, last), (moe_first, moe_last) = _with_mtp(model, pp, (first, last), (moe_first, moe_last))
    return (first, mid, last), (moe_first, moe_mid, moe_last)


def _with_mtp(model: ModelSpec, pp, layers, moe_layers):
    """(first, last) layers and MoE layers with the model's MTP blocks on the stage that holds the output head.

    DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.3, "Shared Embedding and Output Head for Multi-Token
    Prediction": "we deploy the shallowest layers (including the embedding layer) and deepest layers (including
    the output head) of the model on the same PP rank ... physical sharing of parameters and gradients, of the
    shared embedding and output head, between the MTP module and the main model": each of the ``D`` MTP
    modules (sec. 2.2, ``model.mtp_layers``) runs on the last stage, one transformer block of the model's last
    layer's kind each (Megatron-Core's ``pipeline_model_parallel_layout`` likewise puts ``m`` before the loss).
    With one stage it is that stage."""
    mtp = float(model.mtp_layers)
    if not mtp:
        return layers, moe_layers
    (first, last), (moe_first, moe_last) = layers, moe_layers
    kind = float(bool(model.moe_layer_mask[-1]))
    single = np.where(pp == 1, mtp, 0.0)
    return (first + single, last + mtp), (moe_first + single * kind, moe_last + mtp * kind)


def stage_compute(model, plans: PlanBatch, P: Derived, C: LayerCompute) -> StageCompute:
    """Layers, MoE layers, forward and recompute time per micro-batch of the (first, last, middle) stages."""
    (l_first, l_mid, l_last), (e_first, e_mid, e_last) = stage_layers(model, plans)
    n = P.n

    head = (C.logits_t + C.logits_elem / 3) + mtp_head_s(model, C)

    def stage(layers, moe_layers, last):
        dense_layers = layers - moe_layers
        fwd = dense_layers * C.fwd_dense + moe_layers * C.fwd_moe + np.where(last, head, 0.0)
        return fwd, dense_layers * C.rec_dense + moe_layers * C.rec_moe

    stages = (stage(l_first, e_first, P.deg.pp == 1), stage(l_last, e_last, np.ones(n, bool)),
              stage(l_mid, e_mid, np.zeros(n, bool)))
    return StageCompute(layers=(l_first, l_last, l_mid), moe=(e_first, e_last, e_mid),
                           fwd=tuple(st[0] for st in stages), rec=tuple(st[1] for st in stages),
                           mid_exists=P.deg.pp > 2)


def mtp_head_s(model, C: LayerCompute):
    """Forward seconds per micro-batch of the MTP modules beyond their transformer blocks (which
    :func:`stage_layers` counts as layers of the last stage): per module (arXiv:2412.19437 sec. 2.2) the
    projection ``M_k`` (``2h -> h``: ``2 h / V`` of the output head's GEMM, the same roofline at ``2h x h``) and
    the shared output head with its loss run once more over the micro-batch's tokens (the module predicts token
    ``t + k + 1`` at every position)."""
    mtp = float(model.mtp_layers)
    if not mtp:
        return 0.0
    proj = C.logits_t * 2.0 * model.hidden_size / model.vocab_size
    return mtp * (proj + C.logits_t + C.logits_elem / 3)


def pipeline_p2p(cluster, chain, hops: GroupHops, P, *, parameters):
    """Pipeline send/recv per micro-batch of the slowest stage (``pp_t``) and in the fill and drain
    (``pp_fill``), each stage boundary priced on the tier it crosses.

    Derivation (Megatron-LM's 1F1B schedule, Narayanan et al. SC 2021 section 2.2; its p2p ops are blocking on
    the critical path, ``send_forward_recv_backward`` / ``send_backward_recv_forward``): in the steady state a
    stage ``p`` exchanges one micro-batch's activation and gradient across each of its two boundaries, so
    its slot holds ``c(p-1, p) + c(p, p+1)`` per chunk, ``v`` chunks when interleaved (the ``2 v c`` of a
    uniform pipeline; the first and last stages are charged as a middle one). The slowest stage sets the
    pace; with aligned blocks (:func:`tierwise.hierarchy.group_hops`) every boundary that leaves a node has
    on its other side a boundary of the group's fastest class, so the slowest stage pays ``c_slow + c_fast``
    (``2 c_slow`` when every boundary leaves a node; with interleaving the wrap from the last stage to the
    first is a boundary of the slowest class too). The fill and drain carry the first micro-batch's forward
    across each of the ``pp - 1`` boundaries once and the last one's backward back: ``2 sum_j c_j``, which
    replaces the ``(pp - 1) / v x 2 v c`` that the bubble term ``(pp - 1) / v x t_mb`` would charge. For a
    pipeline inside one tier both are the former uniform ``2 v c`` and ``2 (pp - 1) c``.
    """
    times = hop_times(cluster, chain.bytes, hops, parameters=parameters)
    many = P.deg.pp > 1
    # the chain's calls per micro-batch are 2 v (a forward and a backward transfer per chunk)
    pp_t = np.where(many, chain.calls / 2 * (pick(hops.slowest, times) + pick(hops.fastest, times)), 0.0)
    fill = sum(hops.hops[k] * t for k, t in enumerate(times) if t is not None)
    return pp_t, np.where(many, 2.0 * fill, 0.0)


def pipeline(P: Derived, C: LayerCompute, S: StageCompute, X: LayerComm) -> Pipeline:
    """Per-micro-batch time of each stage; the slowest sets the pace; the bubble; the slowest stage's parts.

    Under DualPipe / DualPipeV (``P.dual``) the steady state runs a forward and a backward chunk as one pair
    whose PP send/recv hides behind the other chunk's compute (DeepSeek-V3 report sec. 3.2.1: "both all-to-all
    and PP communication can be fully hidden"), so a slot carries no ``pp_t``; the bubble is
    :func:`dualpipe_bubble`."""
    dual = P.dual > 0
    pp_steady = np.where(dual, 0.0, X.pp_t)
    per_mb, comm_mb = [], []
    S = dualpipe_rank_pairs(S, P)
    for fwd, rec, layers, moe_layers in zip(S.fwd, S.rec, S.layers, S.moe, strict=True):
        comm = ((layers - moe_layers) * X.tp_layer_exposed + moe_layers * X.tp_moe_layer_exposed
                + layers * X.cp_layer_exposed + moe_layers * X.ep_layer_exposed + pp_steady)
        per_mb.append(3 * fwd + rec + layers * C.attn_bwd_extra + moe_layers * C.moe_host_extra + comm)
        comm_mb.append(comm)
    t_mb = np.maximum(per_mb[0], per_mb[1])
    t_mb = np.where(S.mid_exists, np.maximum(t_mb, per_mb[2]), t_mb)
    slow = np.where(per_mb[0] >= per_mb[1], 0, 1)
    slow = np.where(S.mid_exists & (per_mb[2] > np.maximum(per_mb[0], per_mb[1])), 2, slow)
    fwd, layers, moe_layers = np.choose(slow, S.fwd), np.choose(slow, S.layers), np.choose(slow, S.moe)
    # the bubble: (pp - 1) / v micro-batch slots of the slowest stage without its steady-state send/recv, plus
    # the fill and drain's send/recv across every stage boundary on its own tier (pipeline_p2p)
    bubble = (P.deg.pp - 1) / P.deg.vpp * (t_mb - X.pp_t) + X.pp_fill
    if np.any(dual):
        wgrad = np.maximum(fwd - layers * C.core_t - (layers - moe_layers) * C.elem_dense - moe_layers * C.elem_moe,
                           0.0)
        bubble = np.where(dual, dualpipe_bubble(P.deg.pp, P.dual, t_mb, fwd, wgrad) + X.pp_fill, bubble)
    return Pipeline(
        t_mb=t_mb, slow=slow, bubble=bubble, fwd=fwd, rec=np.choose(slow, S.rec), comm=np.choose(slow, comm_mb),
        layers=layers, moe_layers=moe_layers,
    )


def dualpipe_rank_pairs(S: StageCompute, P: Derived) -> StageCompute:
    """The stages as DualPipe's ranks run them: under DualPipe (``P.dual`` 1) rank ``i`` holds stages ``i`` and
    ``pp - 1 - i`` and runs half the micro-batches through each (the two directions each take half of them;
    DeepSeek-V3 report sec. 3.2.1, Figure 5; sec. 3.2.3: the shallowest layers with the embedding and the
    deepest with the output head, and the MTP module, on the same rank), so rank 0's time per micro-batch is the
    mean of the first and the last stage's (layers, MoE layers, forward, recompute averaged); a middle rank pairs
    two middle stages, priced as the fullest. Other schedules: unchanged."""
    pair = np.asarray(P.dual) == 1
    if not np.any(pair):
        return S

    def both(values):
        mean = (values[0] + values[1]) / 2.0
        return (np.where(pair, mean, values[0]), np.where(pair, mean, values[1]), values[2])

    return StageCompute(layers=both(S.layers), moe=both(S.moe), fwd=both(S.fwd), rec=both(S.rec),
                        mid_exists=S.mid_exists)


def dualpipe_bubble(pp, dual, pair, fwd, wgrad):
    """Seconds of DualPipe's (``dual`` 1) or DualPipeV's (2) bubble on ``pp`` ranks, without the fill and drain's
    send/recv.

    DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.1, Table 2, and the DualPipe README's table ("based on the
    same number of PP stages"): the bubble is ``(PP/2 - 1)(F&B + B - 3W)`` against 1F1B's ``(PP - 1)(F + B)``,
    with ``F`` a forward chunk, ``B`` a full backward chunk, ``W`` its backward-for-weights part and ``F&B`` a
    forward and a backward chunk run as one overlapped pair. Here a chunk is one rank's stage for one
    micro-batch: ``F&B = pair`` (the slowest stage's slot, its exposed communication included),
    ``B = pair - F`` (backward, recompute and exposed communication), ``W = wgrad`` (the stage's weight-gradient
    GEMMs, as long as its forward GEMMs). DualPipe's ``PP`` stages are the ``pp`` ranks: ``(pp/2 - 1)``
    pairs. DualPipeV runs ``2 pp`` half-size stages on ``pp`` ranks ("#Devices PP/2"): ``(pp - 1)`` pairs of half
    chunks, ``(pp - 1) / 2`` in the rank's units.
    """
    pp = np.asarray(pp, dtype=float)
    slots = np.where(np.asarray(dual) == 2, (pp - 1.0) / 2.0, np.maximum(pp / 2.0 - 1.0, 0.0))
    return slots * np.maximum(2.0 * pair - fwd - 3.0 * wgrad, 0.0)


def pp_comm(model, cluster, plans: PlanBatch, P, traffic, strides, tp_span, *, parameters):
    """(tier, steady-state seconds per micro-batch, fill-and-drain seconds, bytes per micro-batch) of the
    pipeline's send/recv of one micro-batch's activations (scattered over tp with SP), forward and backward, per
    chunk (:func:`pipeline_p2p`).

    Megatron-LM 2021-22 ``--scatter-gather-tensors-in-pipeline`` (plan ``pp_scatter_gather``; Narayanan et al.
    SC 2021 section 4.1): without sequence parallelism each TP rank sends 1/tp of the replicated activation (the
    chain's bytes, workload/traffic.py) and the receiving stage rebuilds it with an all-gather over its TP
    group (``tp_span``)."""
    (chain,) = traffic["pp"]
    hops = placed_hops(cluster, plans.pp, strides["pp"], ring=False)
    pp_t, pp_fill = pipeline_p2p(cluster, chain, hops, P, parameters=parameters)
    gather = plans.pp_scatter_gather & (plans.tp > 1) & ~P.sp & (plans.pp > 1)
    if np.any(gather):
        t_ag = price_collective("all-gather", 2.0 * P.tokens * model.hidden_size, tp_span, cluster,
                                parameters=parameters).time_s
        pp_t = pp_t + np.where(gather, chain.calls * t_ag, 0.0)
        pp_fill = pp_fill + np.where(gather, 2.0 * (P.deg.pp - 1) * t_ag, 0.0)
    return hops.tier, pp_t, pp_fill, chain.calls * chain.bytes
