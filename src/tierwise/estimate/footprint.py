"""Bytes per GPU of a training plan on its fullest pipeline stage (:mod:`tierwise.workload.memory`)."""

from __future__ import annotations

import numpy as np

from tierwise.parallel.offload import offloaded_layers
from tierwise.parallel.records import DataParallel, Derived, StageCompute
from tierwise.specs.plan import PRECISION, PlanBatch
from tierwise.units import parse_bytes
from tierwise.workload.flops import ModelShape
from tierwise.workload.memory import activation_bytes_per_token_per_layer, in_flight_microbatches


def memory_footprint(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, S: StageCompute,
                     D: DataParallel, cparams, *, offloaded_per_mb=0.0):
    """Bytes per GPU on the fullest stage (see :mod:`tierwise.workload.memory`).

    The first stage holds the embedding and the most in-flight activations, the last the LM head, the fp32
    logits and the MTP modules (:func:`tierwise.parallel.pp.stage_layers`). When an uneven split gives the
    middle stages more layers than the first, the second stage (``pp - 1`` micro-batches in flight in 1F1B) is
    checked too. Under DualPipe the ranks are checked as they hold stages (:func:`_dualpipe_ranks`). The
    breakdown is the fullest stage's (or rank's). Reads tokens per micro-batch, sequence parallelism, recompute
    and micro-batches from ``P``, each stage's layers and MoE layers from ``S``, and parameters per GPU and the
    sharding groups from ``D``. ``offloaded_per_mb``: the bytes activation offload moves to the host per
    micro-batch (:class:`tierwise.parallel.offload.Offload` ``bytes_per_mb``), held there for the micro-batches
    in flight (:func:`_host_memory`).
    """
    m = P.m
    in_flight = in_flight_microbatches(m, plans.pp, plans.vpp, P.dual)
    copies, dual = _dualpipe_copies(P)
    overhead = parse_bytes(cparams["memory_overhead"])
    stage = _stage_bytes(model, shape, plans, P, D, cparams, overhead)
    # combined 1F1B runs the next micro-batch's forward before this one's backward frees its activations
    extra = np.where(plans.ep_comm_overlap & ~dual, 1.0, 0.0)
    first = stage(D.stage_params[0], S.layers[0], S.moe[0], plans.pp == 1, copies, in_flight + extra)
    # the last stage holds one micro-batch at its peak (1F1B); under DualPipe every rank is a first stage of one
    # direction (_dualpipe_ranks prices DualPipe's rank 0 as it is)
    held_last = np.where(dual, in_flight, np.minimum(m, 1.0)) + extra
    last = stage(D.stage_params[1], S.layers[1], S.moe[1], np.ones(len(plans), bool), copies, held_last)
    fullest = first[0] >= last[0]
    parts = [np.where(fullest, a, b) for a, b in zip(first, last, strict=True)]
    parts = _dualpipe_ranks(plans, P, S, D, stage, parts)
    if np.any(S.mid_exists & ((S.layers[2] > S.layers[0]) | (P.dual == 1))):
        # an uneven split can give a middle stage more layers than the first: the second stage (the fullest
        # middle one in 1F1B, which holds pp - 1 micro-batches at its peak) is checked too; under DualPipe a
        # middle rank holds PP + 1 chunks of its two middle stages
        held_mid = np.where(P.dual == 1, in_flight,
                            in_flight * np.minimum(m, np.maximum(plans.pp - 1, 1)) / np.maximum(np.minimum(m, plans.pp), 1)
                            + extra)
        mid = stage(D.stage_params[2], S.layers[2], S.moe[2], np.zeros(len(plans), bool), copies, held_mid)
        take = S.mid_exists & (mid[0] > parts[0])
        parts = [np.where(take, a, b) for a, b in zip(mid, parts, strict=True)]
    out = _breakdown(parts, cluster.accelerator.hbm_capacity_bytes, overhead, len(plans))
    # offload runs only with pp 1 (specs.plan._OFFLOAD_RULES): one micro-batch in flight, two under combined 1F1B
    _host_memory(out, cluster, np.broadcast_to(offloaded_per_mb * (in_flight + extra), (len(plans),)))
    if shape.mtp_layers:
        held = np.where(dual, 1.0, held_last)  # DualPipe's rank 0 holds one chunk of the last stage
        out["mtp_bytes"] = _mtp_bytes(shape, model.vocab_size, P, stage, copies * ~dual + dual, held) - overhead
    return out


def _mtp_bytes(shape: ModelShape, vocab_size: int, P: Derived, stage, copies, held):
    """Bytes per GPU of the MTP modules on the stage that holds them (weights, gradients, optimizer states and
    activations of their blocks, projections and norms, and the extra logits): the last stage's footprint with
    them less without, as :func:`memory_footprint` prices it."""
    mtp = float(shape.mtp_layers)
    moe = mtp * float(shape.mtp_moe)
    tp, ep, etp = P.deg.tp, P.deg.ep, P.deg.etp
    dense = mtp * (shape.attention_params + shape.norm_params + shape.mtp_other_params) / tp + (
        (mtp - moe) * shape.dense_mlp_params + moe * shape.moe_other_params) / tp
    expert = moe * shape.expert_params * shape.num_experts / (ep * etp)
    block = stage((dense, expert), np.full(P.n, mtp), np.full(P.n, moe), np.ones(P.n, bool), copies, held)[0]
    # ``block`` counts every head's logits (its ``last``); the main head's are the main model's
    return block - P.tokens * vocab_size / tp * (4 + 4 + 2)


def _stage_bytes(model, shape: ModelShape, plans: PlanBatch, P: Derived, D: DataParallel, cparams, overhead):
    """``stage(params, layers, moe_layers, last, copies, held)``: (total, weights, grads, optimizer, activations)
    bytes per GPU of a stage holding ``copies`` of its parameters and ``held`` micro-batches of activations; the
    last stage adds the fp32 logits of the main head and of each MTP module (sec. 2.2: one more prediction per
    position each) and the MTP modules' projection inputs (the two RMSNorm inputs and their concatenation, BF16:
    ``8 h`` bytes per token, split over the sequence-parallel ranks)."""
    tokens, zero, tp = P.tokens, plans.zero_stage, plans.tp.astype(float)
    dense_shard = np.where(D.hsdp, D.shard, D.dp_group)
    edp = D.edp
    wb, gb, ob = cparams["weight_bytes"], cparams["grad_bytes"], cparams["optimizer_state_bytes"]
    fp8_extra = np.where(plans.precision == PRECISION.index("fp8"), 1.0, 0.0)
    dense_act, moe_act = layer_activation_bytes(model, shape, plans, P)
    heads = 1.0 + shape.mtp_layers
    mtp_in = shape.mtp_layers * 8.0 * model.hidden_size / np.where(P.sp, tp, 1.0)
    offload = bool(np.any(plans.activation_offload_layers > 0))

    def sharded(params, shard_deg, stage_min):
        return np.where(zero >= stage_min, params / np.maximum(shard_deg, 1), params)

    def stage(params, layers, moe_layers, last, copies, held):
        dense_params, expert_params = params
        weights = (sharded(dense_params, dense_shard, 3) + sharded(expert_params, edp, 3)) * (wb + fp8_extra) * copies
        grads = (sharded(dense_params, dense_shard, 2) + sharded(expert_params, edp, 2)) * gb * copies
        optimizer = (sharded(dense_params, dense_shard, 1) + sharded(expert_params, edp, 1)) * ob * copies
        # ZeRO-3 keeps the gathered weights of the layers in flight (prefetch: about two layers)
        gathered = np.where(zero == 3, 2 * (dense_params + expert_params) / np.maximum(layers, 1) * wb, 0.0)
        layer_act = (layers - moe_layers) * dense_act + moe_layers * moe_act
        if offload:
            # activation offload (plan activation_offload_layers): those layers' activations live in host
            # memory (tierwise.parallel.offload), a share k / layers of the stage's (dense and MoE averaged)
            layer_act = layer_act * (1.0 - offloaded_layers(plans, layers) / np.maximum(layers, 1))
        per_mb = (layer_act + np.where(last, mtp_in, 0.0)) * tokens
        logits = np.where(last, tokens * model.vocab_size / tp * (4 + 4 + 2) * heads, 0.0)
        activations = per_mb * held + logits
        total = weights + gathered + grads + optimizer + activations + overhead
        return total, weights + gathered, grads, optimizer, activations

    return stage


def _host_memory(out: dict, cluster, host_bytes) -> None:
    """Adds ``host_bytes`` and ``host_capacity_bytes`` (the cluster's host DRAM per GPU) to the breakdown, and a
    plan whose offloaded activations exceed a known host capacity does not fit. An unknown capacity (0: no
    catalog figure, no cluster ``host_memory``) leaves the host side unchecked (``estimate`` warns)."""
    cap = float(cluster.host_memory_bytes)
    out["host_bytes"] = host_bytes
    out["host_capacity_bytes"] = np.full(len(host_bytes), cap)
    if cap > 0:
        out["fits"] = out["fits"] & (host_bytes <= cap)


def _dualpipe_ranks(plans: PlanBatch, P: Derived, S: StageCompute, D: DataParallel, stage, parts):
    """DualPipe's rank 0 as it is (DeepSeek-V3 report sec. 3.2.1, 3.2.3): it holds the first stage (with the
    embedding) and the last (with the output head and the MTP modules), one copy of each one's parameters,
    and at its peak ``PP`` chunks of the first stage's activations with one of the last's (DualPipe
    ``dualpipe.py`` ``step()``: rank ``i`` runs ``2 (PP/2 - 1 - i)`` forward chunks of its first direction, then
    one pair, before the steady state adds a forward and frees a backward, so stage ``i`` holds ``PP - i`` and
    stage ``PP - 1 - i`` holds ``i + 1``: ``PP + 1`` in all). It replaces the first and last stage where
    ``P.dual`` is 1 (with ``pp >= 2``)."""
    pair = (P.dual == 1) & (plans.pp >= 2)
    if not np.any(pair):
        return parts
    one = np.ones(len(plans))
    first = stage(D.stage_params[0], S.layers[0], S.moe[0], np.zeros(len(plans), bool), one, plans.pp.astype(float))
    last = stage(D.stage_params[1], S.layers[1], S.moe[1], np.ones(len(plans), bool), one, one)
    overhead = first[0] - sum(first[1:])
    rank0 = [first[0] + last[0] - overhead] + [a + b for a, b in zip(first[1:], last[1:], strict=True)]
    return [np.where(pair, a, b) for a, b in zip(rank0, parts, strict=True)]


def _dualpipe_copies(P: Derived):
    """(parameter copies, DualPipe or V) per plan: DualPipe keeps two copies of the parameters (stages ``i`` and
    ``pp - 1 - i`` on rank ``i``: DeepSeek-V3 report sec. 3.2.1, "DualPipe requires keeping two copies of the
    model parameters"), with their gradients and optimizer states, taken as twice the stage's own; DualPipeV's
    two half stages are one copy."""
    return np.where(P.dual == 1, 2.0, 1.0), P.dual > 0


def layer_activation_bytes(model, shape: ModelShape, plans: PlanBatch, P: Derived):
    """(dense, MoE) layers' stored bytes per token (:func:`activation_bytes_per_token_per_layer`); recompute
    ``deepseek`` caches in FP8 under an FP8 plan."""
    tp, etp = plans.tp.astype(float), plans.etp.astype(float)
    cache = np.where(plans.precision == PRECISION.index("fp8"), 1.0, 2.0)
    dense = activation_bytes_per_token_per_layer(model, shape, tp, etp, P.sp, P.rc, moe_layer=False, cache_bytes=cache)
    moe = (activation_bytes_per_token_per_layer(model, shape, tp, etp, P.sp, P.rc, moe_layer=True, cache_bytes=cache)
           if model.moe is not None else dense)
    return dense, moe


def _breakdown(parts, capacity: float, overhead: float, n: int) -> dict:
    """The fullest stage's bytes per GPU by kind, against the part's HBM capacity."""
    total, weights, grads, optimizer, activations = parts
    return {
        "per_gpu_bytes": total,
        "capacity_bytes": np.full(n, capacity),
        "fits": total <= capacity,
        "weights_bytes": weights,
        "gradients_bytes": grads,
        "optimizer_bytes": optimizer,
        "activations_bytes": activations,
        "overhead_bytes": np.full(n, overhead),
    }
