"""Data parallelism: gradient reduction, parameter gathers (ZeRO 0-3, HSDP), their overlap, ZeRO-3's buffer
passes and host launches, the optimizer step, and the gradient-compression and sync levers."""

from __future__ import annotations

import numpy as np

from tierwise.parallel.records import DataParallel, Derived, DpGroups, Pipeline, StageCompute
from tierwise.pricing.comm import placed_span, price_collective, two_axis_span
from tierwise.specs.framework import ZERO2_SYNC
from tierwise.specs.model import ModelSpec
from tierwise.specs.plan import ZERO3_GATHER, PlanBatch
from tierwise.workload.flops import ModelShape


def dp_groups(cluster, plans: PlanBatch, P: Derived, strides) -> DpGroups:
    """Where gradient reduction and parameter gathers run: the dp x cp group (one strided group in the default
    tp-cp-dp-pp order, a two-axis group when another axis sits between cp and dp), the expert-data-parallel
    group, and for HSDP the shard group and the replicas of each shard position."""
    dp_group = P.deg.dp * P.deg.cp
    edp = np.maximum(P.deg.tp * P.deg.cp * P.deg.dp / (P.deg.etp * P.deg.ep), 1)
    shard = plans.dp_shard.astype(float) * P.deg.cp
    return DpGroups(
        dp_group=dp_group, dp_span=two_axis_span(cluster, plans.cp, strides["cp"], plans.dp, strides["dp"]),
        edp=edp, edp_span=placed_span(cluster, edp.astype(np.int64), (P.deg.etp * P.deg.ep).astype(np.int64)),
        shard=shard, hsdp=(plans.dp_shard < plans.dp) & (plans.zero_stage >= 1),
        shard_span=two_axis_span(cluster, plans.cp, strides["cp"], plans.dp_shard, strides["dp"]),
        # HSDP replicas: the same shard position in each of the dp / dp_shard shard groups (cp is not in it)
        repl_span=placed_span(cluster, (dp_group / shard).astype(np.int64), strides["dp"] * plans.dp_shard.astype(np.int64)),
    )


class _NoCost:
    time_s = bytes_per_rank = 0.0


def _dp_costs(cluster, plans: PlanBatch, g: DpGroups, params, *, span_full, group, pieces, cparams, parameters,
              grad_factor=1.0):
    """(gradient seconds, gather seconds, bytes per rank) per step for ``params`` per GPU reduced over
    ``group`` ranks (``span_full``): ZeRO 0 all-reduces the gradients; ZeRO >= 1 reduce-scatters them and
    all-gathers the weights, over the shard group plus an all-reduce of the 1/shard gradients over the replicas
    under HSDP; each in ``pieces`` collectives (one per layer under ZeRO-3). A kind no plan of the batch uses
    is not priced (a planner batch often has none). ``grad_factor``: the gradient compression's bytes per
    uncompressed byte (:func:`_dp_levers`)."""
    zero, hsdp, shard = plans.zero_stage, g.hsdp, g.shard
    g_bytes = cparams["grad_bytes"] * params / pieces * grad_factor
    w_bytes = cparams["weight_bytes"] * params / pieces
    used = group > 1

    def maybe(needed, kind, size, span):
        return price_collective(kind, size, span, cluster, parameters=parameters) if np.any(needed) else _NoCost

    ar = maybe(used & (zero == 0), "all-reduce", g_bytes, span_full)
    rs_full = maybe(used & (zero >= 1) & ~hsdp, "reduce-scatter", g_bytes, span_full)
    ag_full = maybe(used & (zero >= 1) & ~hsdp, "all-gather", w_bytes, span_full)
    rs_sh = maybe(used & hsdp, "reduce-scatter", g_bytes, g.shard_span)
    ag_sh = maybe(used & hsdp, "all-gather", w_bytes, g.shard_span)
    ar_rep = maybe(used & hsdp, "all-reduce", g_bytes / np.maximum(shard, 1), g.repl_span)
    rs = np.where(hsdp, rs_sh.time_s + ar_rep.time_s, rs_full.time_s)
    ag = np.where(hsdp, ag_sh.time_s, ag_full.time_s)
    grad_t = pieces * np.where(zero == 0, ar.time_s, rs)
    gather_t = pieces * np.where(zero == 0, 0.0, ag)
    bytes_ = pieces * np.where(zero == 0, ar.bytes_per_rank,
                               np.where(hsdp, rs_sh.bytes_per_rank + ar_rep.bytes_per_rank + ag_sh.bytes_per_rank,
                                        rs_full.bytes_per_rank + ag_full.bytes_per_rank))
    return (np.where(used, grad_t, 0.0), np.where(used, gather_t, 0.0), np.where(used, bytes_, 0.0))


def _dp_exposed(plans: PlanBatch, P: Derived, pipe: Pipeline, grad_t, gather_t, total_params_local, cparams):
    """(time, exposed) of the step's data-parallel traffic under the overlap switches (module docstring).

    ZeRO 0-2: one reduction per step behind the last micro-batch's backward except its last bucket, one gather
    behind the first forward. ZeRO-3: per micro-batch a gather (forward, and backward again when resharding)
    and a reduce-scatter, prefetched a layer ahead; the first layer's are exposed. The hidden part still costs
    ``overlap_interference`` of its time: NCCL kernels take SMs and HBM bandwidth from the GEMMs they overlap
    (Jangda et al. ASPLOS 2022 section 2; Rashidi et al. ISCA 2021).
    """
    m, z3 = P.m, plans.zero_stage == 3
    regather = np.where(plans.reshard_after_forward, 1.0, 0.0)
    bucket = np.maximum(cparams["bucket_params_min"], cparams["bucket_params_per_dp"] * P.deg.dp)
    last_bucket = np.minimum(1.0, bucket / np.maximum(total_params_local, 1))
    bwd_last_mb = 2 * pipe.fwd + pipe.rec
    grad_exposed = np.where(plans.overlap_grad_reduce,
                            np.maximum(grad_t - bwd_last_mb, 0.0) + grad_t * last_bucket, grad_t)
    gather_exposed = np.where(plans.overlap_param_gather, np.maximum(gather_t - pipe.fwd, 0.0), gather_t)
    z3_per_mb = gather_t * (1 + regather) + grad_t
    per_layer = 1.0 / np.maximum(pipe.layers, 1)
    z3_exposed_mb = (np.maximum(gather_t - pipe.fwd, 0) + np.maximum(gather_t * regather + grad_t - bwd_last_mb, 0)
                     + (gather_t + grad_t) * per_layer)
    time = np.where(z3, z3_per_mb * m, grad_t + gather_t)
    exposed = np.where(z3, z3_exposed_mb * m, grad_exposed + gather_exposed)
    # ZeRO-2 under gradient accumulation (plan zero2_sync, tierwise.specs.framework.ZERO2_SYNC): DeepSpeed
    # reduce-scatters every micro-batch's gradients behind that micro-batch's backward (weights gathered once
    # per step); FSDP SHARD_GRAD_OP without no_sync also re-gathers the weights before every forward
    z2_reduce = (plans.zero_stage == 2) & (plans.zero2_sync != ZERO2_SYNC.index("per-step"))
    if np.any(z2_reduce):
        fsdp = plans.zero2_sync == ZERO2_SYNC.index("fsdp-per-microbatch")
        grad_mb_exposed = np.where(plans.overlap_grad_reduce,
                                   np.maximum(grad_t - bwd_last_mb, 0.0) + grad_t * last_bucket, grad_t)
        z2_time = m * grad_t + np.where(fsdp, m, 1.0) * gather_t
        z2_exposed = m * grad_mb_exposed + np.where(fsdp, m * np.maximum(gather_t - pipe.fwd, 0.0), gather_exposed)
        time = np.where(z2_reduce, z2_time, time)
        exposed = np.where(z2_reduce, z2_exposed, exposed)
    exposed = exposed + cparams.get("overlap_interference", 0.0) * np.maximum(time - exposed, 0.0)
    return time, exposed


def data_parallel(model, shape: ModelShape, cluster, plans: PlanBatch, *, P: Derived, S: StageCompute,
                  pipe: Pipeline, strides, cparams, hbm, parameters) -> DataParallel:
    """Gradient reduction, parameter gathers (ZeRO 0-3, HSDP) and the optimizer step of the slowest stage."""
    n, tp, ep, etp, m = P.n, P.deg.tp, P.deg.ep, P.deg.etp, P.m
    single = P.deg.pp == 1
    stage_params = [stage_param_counts(shape, S.layers[0], S.moe[0], tp, ep, etp, np.ones(n, bool), single),
                    stage_param_counts(shape, S.layers[1], S.moe[1], tp, ep, etp, single, np.ones(n, bool)),
                    stage_param_counts(shape, S.layers[2], S.moe[2], tp, ep, etp, np.zeros(n, bool), np.zeros(n, bool))]
    dense_params = np.choose(pipe.slow, [sp_[0] for sp_ in stage_params])
    expert_params = np.choose(pipe.slow, [sp_[1] for sp_ in stage_params])
    g = dp_groups(cluster, plans, P, strides)
    zero, hsdp, shard, dp_group, edp = plans.zero_stage, g.hsdp, g.shard, g.dp_group, g.edp
    # ZeRO-3 / FSDP gather and reduce-scatter one layer (one wrapped unit) at a time, so each step pays the
    # collective latency once per layer; ZeRO 0-2 reduce in large buckets (one collective per step here)
    pieces = np.where(zero == 3, np.maximum(pipe.layers, 1), 1.0)
    total_params_local = dense_params + expert_params
    factor, lever_s = _dp_levers(model, shape, cluster, P, cparams, total_params_local, hbm)
    d_grad, d_gather, d_bytes = _dp_costs(cluster, plans, g, dense_params, span_full=g.dp_span, group=dp_group,
                                          pieces=pieces, cparams=cparams, grad_factor=factor,
                                          parameters=parameters)
    if model.moe is not None:
        e_grad, e_gather, e_bytes = _dp_costs(cluster, plans, g, expert_params, span_full=g.edp_span, group=edp,
                                              pieces=pieces, cparams=cparams, grad_factor=factor,
                                              parameters=parameters)
    else:
        e_grad = e_gather = e_bytes = np.zeros(n)
    time, exposed = _dp_exposed(plans, P, pipe, d_grad + e_grad, d_gather + e_gather, total_params_local, cparams)
    time, exposed, sync_every = _dp_sync_levers(time, exposed, lever_s, dp_group, P, pipe, cparams)
    z3 = zero == 3
    time, exposed, shard_copy_s = _zero3_extras(model, shape, plans, P, pipe, g, cparams, hbm=hbm, time=time,
                                                exposed=exposed, hidden=d_gather + e_gather,
                                                local_params=total_params_local)
    # optimizer step (memory bound), sharded under ZeRO >= 1
    opt_params = np.where(zero >= 1, dense_params / np.maximum(np.where(hsdp, shard, dp_group), 1)
                          + expert_params / edp, total_params_local)
    return DataParallel(
        time=time, exposed=exposed,
        bytes=np.where(z3, (d_bytes + e_bytes) * m * np.where(plans.reshard_after_forward, 1.5, 1.0),
                       d_bytes + e_bytes) / sync_every,
        tier=np.maximum(g.dp_span.tier, np.where(edp > 1, g.edp_span.tier, 0)),
        optimizer_s=opt_params * cparams["optimizer_bytes_per_param"] / hbm, shard_copy_s=shard_copy_s,
        stage_params=stage_params, dp_group=dp_group, edp=edp, shard=shard, hsdp=hsdp,
    )


def _zero3_extras(model, shape: ModelShape, plans: PlanBatch, P: Derived, pipe: Pipeline, g: DpGroups, cparams, *,
                  hbm, time, exposed, hidden, local_params):
    """(time, exposed, shard-copy seconds) after ZeRO-3's implementation costs outside its collectives: the
    list-form gathers' per-rank copies and their host launches, DeepSpeed 2021's blocked prefetch, and the
    buffer passes over the unsharded parameters (``hidden``: the step's gather seconds the prefetch hid)."""
    m, zero, hsdp, shard, dp_group = P.m, plans.zero_stage, g.hsdp, g.shard, g.dp_group
    gb, wb = cparams["grad_bytes"], cparams["weight_bytes"]
    z3 = zero == 3
    regather = np.where(plans.reshard_after_forward, 1.0, 0.0)
    # ZeRO-3 with list-form collectives (zero3_gather = tensor-list, DeepSpeed ZeRO-3 of 2021): one
    # torch.distributed all_gather / reduce_scatter per parameter tensor, each with a list of one tensor per
    # rank, which PyTorch's ProcessGroupNCCL flattens and unflattens with one device copy per rank (pytorch
    # PR #57769 added _all_gather_base because "_all_gather_base saved copies in all_gather"; DeepSpeed PR
    # #4705: the list "will be flattened and unflattened, which will result in additional allocation of GPU
    # memory and D2D operations"). Per micro-batch and tensor: the forward gather, the backward re-gather and
    # the gradient reduce-scatter, each ``group`` copies. Every copy is one eager op the training process's
    # CPU thread launches (``torch_op_overhead`` each), and that thread does not run ahead of the GPU: the
    # parameter fetch synchronizes the device after its gathers (DeepSpeed partition_parameters.py, "guarantee
    # the communication to be completed"), so the launch time adds to the step, exposed, as DP time.
    # Expert tensors are counted on the dense group.
    tensors = ((pipe.layers - pipe.moe_layers) * param_tensors_per_layer(model, shape, False)
               + pipe.moe_layers * param_tensors_per_layer(model, shape, True))
    list_mode = z3 & (plans.zero3_gather == ZERO3_GATHER.index("tensor-list"))
    gather_group = np.where(hsdp, shard, dp_group)
    copies = np.where(list_mode & (gather_group > 1), m * tensors * (2 + regather) * gather_group, 0.0)
    cpu_launch_s = copies * cparams["torch_op_overhead"]
    time, exposed = time + cpu_launch_s, exposed + cpu_launch_s
    # DeepSpeed 2021 prefetches the next sub-module's parameters only while the gathered (live) parameters are
    # under stage3_max_live_parameters (deepspeed_blocked_gather_fraction): a gather behind a matrix at least
    # that large is fetched when its module starts, so the part of it the prefetch model above hid is exposed
    blocked = np.where(list_mode & (gather_group > 1), deepspeed_blocked_gather_fraction(shape, P.deg.tp), 0.0)
    # (_dp_exposed already charged ``overlap_interference`` of that part as hidden: the rest is added)
    hidden_gather = np.minimum(hidden, pipe.fwd) * (1 + regather) * m
    exposed = exposed + blocked * hidden_gather * (1.0 - cparams.get("overlap_interference", 0.0))
    # ZeRO-3 buffer passes over the rank's unsharded parameters, every micro-batch (shard_copy_bytes): streaming
    # kernels on the compute stream, or (FSDP1's cast and divide) on a side stream whose kernels wait for the
    # SMs the backward GEMMs fill, so they are charged in full, at the memory-bound rate
    copy_bytes = shard_copy_bytes(plans.zero3_gather, wb, gb, regather)
    # FSDP ZeRO-2 (SHARD_GRAD_OP) without no_sync pays its implementation's passes every micro-batch too; its
    # weights are not resharded after the forward, so the backward does not gather (and copy) them again
    z2_fsdp = (zero == 2) & (plans.zero2_sync == ZERO2_SYNC.index("fsdp-per-microbatch"))
    copy_bytes = np.where(z2_fsdp, shard_copy_bytes(plans.zero3_gather, wb, gb, 0.0), copy_bytes)
    shard_copy_s = np.where((z3 | z2_fsdp) & (gather_group > 1), m * local_params * copy_bytes / hbm, 0.0)
    return time, exposed, shard_copy_s


def _dp_levers(model, shape: ModelShape, cluster, P: Derived, cparams, local_params, hbm):
    """(bytes per uncompressed gradient byte, compression compute seconds per step) of the gradient
    compression levers (:mod:`tierwise.estimate.levers`: PowerSGD rank r, Vogels et al. 2019; 1-bit Adam, Tang
    et al. 2021). No lever: (1, 0)."""
    rank = float(cparams.get("dp_powersgd_rank", 0.0))
    if rank > 0:
        gemms = shape.attention_gemms + (shape.dense_mlp_gemms or shape.moe_gemms)
        factor = powersgd_factor(gemms, rank, P.deg.tp)
        peak = cluster.accelerator.peak_flops_per_s("bf16")
        # 6 a b r FLOPs per matrix; about 5 fp32 passes over the gradient with error feedback
        return factor, np.maximum(6 * rank * local_params / peak, 20.0 * local_params / hbm)
    if cparams.get("dp_onebit", 0.0):
        # signs (1/8 byte) per element; error-compensated compression on worker and server: ~32 B/param of HBM
        return np.full(P.n, 0.125 / cparams["grad_bytes"]), 32.0 * local_params / hbm
    return 1.0, np.zeros(P.n)


def _dp_sync_levers(time, exposed, lever_s, dp_group, P: Derived, pipe: Pipeline, cparams):
    """DP (time, exposed, H) under the compression compute cost, local SGD / DiLoCo's outer sync every H steps
    (traffic / H, exposed: the outer step waits for it; Douillard et al. 2023) and asynchronous DP with
    staleness s (exposed less up to s steps of compute; Ho et al. 2013)."""
    used = dp_group > 1
    time = time + np.where(used, lever_s, 0.0)
    exposed = exposed + np.where(used, lever_s, 0.0)
    H = max(float(cparams.get("dp_sync_every", 1.0)), 1.0)
    if H > 1:
        time = time / H
        exposed = time
    s = float(cparams.get("dp_async_staleness", 0.0))
    if s > 0:
        exposed = np.maximum(exposed - s * P.m * pipe.t_mb, 0.0)
    return time, exposed, H


def shard_copy_bytes(mode, wb: float, gb: float, regather) -> np.ndarray:
    """HBM bytes per unsharded parameter per micro-batch that a ZeRO-3 implementation moves outside its
    collectives (``wb``/``gb``: bytes of a weight as gathered and of a gradient as reduced; ``regather``: 1
    when the backward gathers again). Passes over the 1/N shards are left out.

    * ``flat`` (PyTorch FSDP1, ``torch/distributed/fsdp/_runtime_utils.py`` and ``algorithms/_comm_hooks/
      default_hooks.py``): the parameters are ``split``/``view`` views of the flat buffer, so autograd's
      ``SplitWithSizesBackward`` concatenates their gradients into one flat gradient (read + write, ``2 wb``);
      ``_post_backward_hook`` casts it to the reduce dtype (``flat_param.grad.to(handle._reduce_dtype)``,
      ``wb + gb`` when the dtypes differ); the default ``reduce_scatter_hook`` divides it in place by the
      gradient pre-divide factor (``grad.div_``, > 1 for any world size >= 2: ``2 gb``). The all-gather writes
      into the flat buffer directly: no pass. bf16 weights, fp32 reduce: 4 + 6 + 8 = 18 bytes.
    * ``per-parameter`` (FSDP2, ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``): each
      all-gather is copied out of its staging buffer into the parameters (``split_with_sizes_copy``, ``2 wb``
      per gather: forward and, when resharding, backward); the gradients are copied and cast into the
      reduce-scatter input (``_chunk_cat``, ``wb + gb``); fp32/bf16 reductions use NCCL's average, no
      divide kernel (``_get_gradient_divide_factors``). 2 x 4 + 6 = 14 bytes.
    * ``tensor-list`` (DeepSpeed 2021): its per-rank copies are counted as launch time (``torch_op_overhead``),
      not here.
    * ``zero-copy`` (Megatron-FSDP): the parameters and gradients are views of the collectives' own buffers
      (megatron/core/distributed/fsdp/src/README.md, "Zero copy communication ... ParamAndGradBuffer"), and
      with ``--calculate-per-token-loss`` (its user guide's recommended setting) no gradient scaling pass: 0.
    """
    flat = 2.0 * wb + np.where(np.not_equal(gb, wb), wb + gb, 0.0) + 2.0 * gb
    per_param = 2.0 * wb * (1.0 + regather) + wb + gb
    return np.select([mode == ZERO3_GATHER.index("flat"), mode == ZERO3_GATHER.index("per-parameter")],
                     [flat, per_param], 0.0)


DEEPSPEED_MAX_LIVE_PARAMETERS = 1_000_000_000
"""DeepSpeed ZeRO-3's ``stage3_max_live_parameters`` default (deepspeed/runtime/zero/constants.py of 2021,
``ZERO_OPTIMIZATION_MAX_LIVE_PARAMETERS_DEFAULT = 1000000000``)."""


def deepspeed_blocked_gather_fraction(shape: ModelShape, tp) -> np.ndarray:
    """Fraction of a dense layer's gathered weight elements whose gather DeepSpeed's 2021 ZeRO-3 cannot prefetch.

    DeepSpeed's ``PartitionedParameterCoordinator.prefetch_next_sub_modules`` (stage3.py, v0.3.x) prefetches
    the next sub-module's parameters only when ``total_available_parameter_numel <
    max_available_parameters_in_numel`` (``stage3_max_live_parameters``, 1e9 elements by default) and no
    prefetch is in flight; it is called right after ``fetch_sub_module`` made the current sub-module's
    parameters live. So while a weight matrix of at least 1e9 elements is live, the next one is not prefetched:
    it is gathered when its own module starts (``fetch_sub_module`` then ``_synchronize_communication``, which
    ends in ``torch.cuda.synchronize()``), exposed. Weights are visited in module order (QKV, output
    projection, MLP in, MLP out, then the next layer's QKV); norms and biases (under
    ``stage3_param_persistence_threshold``, 1e5 elements) stay gathered and do not count. TP-local sizes.
    """
    tp = np.asarray(tp, dtype=float)
    sizes = [g.params for g in (*shape.attention_gemms, *shape.dense_mlp_gemms)]
    if not sizes:
        return np.zeros_like(tp)
    total = float(sum(sizes))
    blocked = np.zeros_like(tp)
    for j, size in enumerate(sizes):
        before = sizes[j - 1]  # j = 0: the previous layer's last matrix
        blocked = blocked + np.where(before / tp >= DEEPSPEED_MAX_LIVE_PARAMETERS, size, 0.0)
    return blocked / total


def param_tensors_per_layer(model: ModelSpec, shape: ModelShape, moe_layer: bool) -> int:
    """Parameter tensors of one layer as Megatron-style code holds them: one weight per GEMM (fused QKV, fused
    gate+up), two norm weights, and a bias beside each when ``model.bias``; an MoE layer has each expert's
    matrices, the shared experts' and the router in place of the dense MLP."""
    mlp = shape.moe_gemms if moe_layer else shape.dense_mlp_gemms
    weights = len(shape.attention_gemms) + 2
    if moe_layer and model.moe is not None:
        weights += (len(mlp) - 2) + 2 * model.moe.num_experts  # shared experts and router, plus routed experts
    else:
        weights += len(mlp)
    return weights * (2 if model.bias else 1)


def stage_param_counts(shape: ModelShape, layers, moe_layers, tp, ep, etp, first, last):
    """(dense, expert) parameters one GPU of a stage holds: its layers' weights split over tp (experts
    over ep x etp), plus the embedding on the first stage and the LM head on the last, with the MTP modules'
    projections and norms (their blocks are among the last stage's ``layers``: :func:`tierwise.parallel.pp.
    stage_layers`)."""
    dense = (layers * (shape.attention_params + shape.norm_params) + (layers - moe_layers) * shape.dense_mlp_params
             + moe_layers * shape.moe_other_params + np.where(first, shape.embedding_params, 0.0)
             + np.where(last, shape.lm_head_params + shape.mtp_layers * shape.mtp_other_params, 0.0)) / tp
    expert = moe_layers * shape.expert_params * shape.num_experts / (ep * etp)
    return dense, expert


def powersgd_factor(gemms, rank: float, tp: np.ndarray) -> np.ndarray:
    """Elements PowerSGD sends per gradient element of a layer's weight matrices, per plan's tp degree.

    Each GEMM's shard on a rank is ``a x b`` (its TP-split dimension divided by tp); rank-r PowerSGD sends
    ``min(r, a, b) (a + b)`` elements for it (Vogels et al. 2019, section 3): factor = sum over the layer's
    GEMMs of that, over the sum of ``a b``.
    """
    tp = np.asarray(tp, dtype=float)
    sent = np.zeros_like(tp)
    total = np.zeros_like(tp)
    for g in gemms:
        a = g.out_features / np.where(g.split == "out", tp, 1.0)
        b = g.in_features / np.where(g.split == "in", tp, 1.0)
        r = np.minimum(rank, np.minimum(a, b))
        sent += r * (a + b)
        total += a * b
    return np.minimum(sent / np.maximum(total, 1.0), 1.0)
