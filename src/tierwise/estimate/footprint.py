"""Bytes per GPU of a training plan on its fullest pipeline stage (:mod:`tierwise.workload.memory`)."""

from __future__ import annotations

import numpy as np

from tierwise.parallel.records import DataParallel, Derived, StageCompute
from tierwise.specs.plan import PRECISION, PlanBatch
from tierwise.units import parse_bytes
from tierwise.workload.flops import ModelShape
from tierwise.workload.memory import activation_bytes_per_token_per_layer, in_flight_microbatches


def memory_footprint(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, S: StageCompute,
                     D: DataParallel, cparams):
    """Bytes per GPU on the fullest stage (see :mod:`tierwise.workload.memory`).

    The first stage holds the embedding and the most in-flight activations, the last the LM head and the
    fp32 logits. When an uneven split gives the middle stages more layers than the first, the second stage
    (``pp - 1`` micro-batches in flight in 1F1B) is checked too. The breakdown is the fullest stage's.
    Reads tokens per micro-batch, sequence parallelism, recompute and micro-batches from ``P``, each stage's
    layers and MoE layers from ``S``, and parameters per GPU and the sharding groups from ``D``.
    """
    tokens, m = P.tokens, P.m
    dp_group, edp, shard, hsdp = D.dp_group, D.edp, D.shard, D.hsdp
    zero = plans.zero_stage
    tp = plans.tp.astype(float)
    dense_shard = np.where(hsdp, shard, dp_group)
    wb, gb, ob = cparams["weight_bytes"], cparams["grad_bytes"], cparams["optimizer_state_bytes"]
    fp8_extra = np.where(plans.precision == PRECISION.index("fp8"), 1.0, 0.0)

    def sharded(params, shard_deg, stage_min):
        return np.where(zero >= stage_min, params / np.maximum(shard_deg, 1), params)

    in_flight = in_flight_microbatches(m, plans.pp, plans.vpp, P.dual)
    copies, dual = _dualpipe_copies(P)
    dense_act, moe_act = _activations(model, shape, plans, P)
    overhead = parse_bytes(cparams["memory_overhead"])

    def stage(params, layers, moe_layers, last, in_flight=in_flight):
        dense_params, expert_params = params
        weights = (sharded(dense_params, dense_shard, 3) + sharded(expert_params, edp, 3)) * (wb + fp8_extra) * copies
        grads = (sharded(dense_params, dense_shard, 2) + sharded(expert_params, edp, 2)) * gb * copies
        optimizer = (sharded(dense_params, dense_shard, 1) + sharded(expert_params, edp, 1)) * ob * copies
        # ZeRO-3 keeps the gathered weights of the layers in flight (prefetch: about two layers)
        gathered = np.where(zero == 3, 2 * (dense_params + expert_params) / np.maximum(layers, 1) * wb, 0.0)
        per_mb = ((layers - moe_layers) * dense_act + moe_layers * moe_act) * tokens
        logits = np.where(last, tokens * model.vocab_size / tp * (4 + 4 + 2), 0.0)
        # (under DualPipe every rank is a first stage of one direction)
        held = np.where(last & ~dual, np.minimum(m, 1.0), in_flight)
        # combined 1F1B runs the next micro-batch's forward before this one's backward frees its activations
        held = held + np.where(plans.ep_comm_overlap & ~dual, 1.0, 0.0)
        activations = per_mb * held + logits
        total = weights + gathered + grads + optimizer + activations + overhead
        return total, weights + gathered, grads, optimizer, activations

    first = stage(D.stage_params[0], S.layers[0], S.moe[0], plans.pp == 1)
    last = stage(D.stage_params[1], S.layers[1], S.moe[1], np.ones(len(plans), bool))
    fullest = first[0] >= last[0]
    parts = [np.where(fullest, a, b) for a, b in zip(first, last, strict=True)]
    if np.any(S.mid_exists & (S.layers[2] > S.layers[0])):
        # an uneven split can give a middle stage more layers than the first: the second stage (the fullest
        # middle one in 1F1B, which holds pp - 1 micro-batches at its peak) is checked too
        held_mid = in_flight * np.minimum(m, np.maximum(plans.pp - 1, 1)) / np.maximum(np.minimum(m, plans.pp), 1)
        mid = stage(D.stage_params[2], S.layers[2], S.moe[2], np.zeros(len(plans), bool), held_mid)
        take = S.mid_exists & (mid[0] > parts[0])
        parts = [np.where(take, a, b) for a, b in zip(mid, parts, strict=True)]
    return _breakdown(parts, cluster.accelerator.hbm_capacity_bytes, overhead, len(plans))


def _dualpipe_copies(P: Derived):
    """(parameter copies, DualPipe or V) per plan: DualPipe keeps two copies of the parameters (stages ``i`` and
    ``pp - 1 - i`` on rank ``i``: DeepSeek-V3 report sec. 3.2.1, "DualPipe requires keeping two copies of the
    model parameters"), with their gradients and optimizer states, taken as twice the stage's own; DualPipeV's
    two half stages are one copy."""
    return np.where(P.dual == 1, 2.0, 1.0), P.dual > 0


def _activations(model, shape: ModelShape, plans: PlanBatch, P: Derived):
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
