"""Expert parallelism: routed tokens per rank, load imbalance, the MoE dispatcher's kernels and host launches,
and the dispatch / combine all-to-all priced on the tier the EP group spans with its overlap rule."""

from __future__ import annotations

import numpy as np

from tierwise.errors import PlanError
from tierwise.parallel.eplb import expert_load_imbalance, model_skew
from tierwise.pricing.comm import placed_span, price_records
from tierwise.specs.compute import moe_expert_launches, moe_kernels_per_layer
from tierwise.specs.framework import MOE_DISPATCHERS, MOE_GROUPED_GEMMS
from tierwise.specs.plan import PlanBatch

__all__ = ["moe_imbalance", "expert_tokens_per_rank", "node_limit", "check_node_limit", "deepep_node_dedup", "node_copies_fraction", "per_expert_gemms", "dispatcher_kernels",
           "moe_host_extra_s", "ep_layer_comm"]

def moe_imbalance(model, plans: PlanBatch, cparams, tokens) -> np.ndarray:
    """The busiest EP rank's routed tokens over the mean, per plan (:func:`tierwise.parallel.eplb.
    expert_load_imbalance`: the router's skew over the experts a rank holds plus the micro-batch's sampling
    noise, ``moe_load_imbalance`` on the layout it was measured on, near 1 under auxiliary-loss-free balancing);
    1 when the router is forced to balance (plan ``moe_force_balance``: Megatron-Core
    ``--moe-router-force-load-balancing``, NeMo Automodel's fake balanced gate) and when one rank holds every
    expert (``ep = 1``: its grouped GEMMs run all ``tokens x top_k`` rows however they are spread). ``tokens``:
    one rank's micro-batch tokens (``b s / cp``); the EP group routes ``ep`` ranks' sequence-parallel shares of
    them. Every rank waits for the busiest at the combine all-to-all, so it scales the routed-expert GEMMs and
    the dispatch / combine (the busiest rank receives and returns that many tokens)."""
    force = getattr(plans, "moe_force_balance", None)
    force = np.zeros(len(plans), bool) if force is None else np.asarray(force, bool)
    if model.moe is None:
        return np.ones(len(plans))
    routed = plans.ep * expert_tokens_per_rank(plans, tokens) / plans.etp
    load = expert_load_imbalance(model.moe.num_experts, model.moe.top_k, plans.ep, routed,
                                 skew=model_skew(model, cparams))
    return np.where(force | (plans.ep <= 1), 1.0, load)


def expert_tokens_per_rank(plans: PlanBatch, tokens):
    """Tokens whose routed-expert work one rank runs per micro-batch (before ``top_k``): ``T etp / tp`` with
    sequence parallelism, ``T`` without.

    Megatron-Core's MoE layer receives the sequence-parallel shard, ``[S/TP, B, H]`` (token_dispatcher.py: "we
    use the following notation ... num_local_tokens: S/TP*B"; MoE with tp > 1 requires sequence parallelism,
    arguments.py "When using MoE and tensor parallelism, sequence parallelism must be used"); each rank routes
    its own ``T / tp`` tokens, the all-to-all over the EP group returns as many on average, and with expert
    tensor parallelism the dispatcher then all-gathers them over the ``etp`` expert-TP ranks
    (``permute -> A2A(EP) -> AG(TP)``, MoEAlltoAllTokenDispatcher), each of which holds ``1 / etp`` of every
    local expert's width. So a rank's grouped GEMMs run ``T etp / tp`` tokens (``x top_k`` rows) on experts
    ``f / etp`` wide: ``T top_k f / tp`` per rank whatever ``etp`` is. With ``etp = tp`` (Megatron-Core's default)
    that is ``T`` rows at ``f / tp``; with NeMo's and the MoE Model Zoo's ``etp = 1`` under ``tp = 2`` it is ``T / 2``
    rows at the full width, not ``T`` (half the expert work per rank).
    """
    tp, etp = plans.tp.astype(float), plans.etp.astype(float)
    sp = plans.sequence_parallel & (plans.tp > 1)
    return np.where(sp, tokens * etp / tp, tokens)


def node_limit(model, plans: PlanBatch, domains) -> np.ndarray:
    """Most scale-up domains of the EP group one token's experts lie on (``M``), per plan.

    DeepSeek-V3's node-limited routing (arXiv:2412.19437 sec. 2.1.2 / 3.2.2: "each token will be sent to at most
    M nodes", M = 4) is its group-limited gate (Hugging Face config ``n_group`` 8, ``topk_group`` 4: a token's
    ``top_k`` experts come from its best ``topk_group`` of ``n_group`` expert groups), the groups laid on the
    nodes. With ``u`` domains and whole groups per domain (``u <= n_group``) a token reaches at most
    ``topk_group`` of them; a group spread over ``u / n_group`` domains multiplies that. A plan's
    ``moe_node_limit`` overrides it; the result never exceeds ``u`` (no limit: ``u``).
    """
    u = np.maximum(np.asarray(domains, dtype=float), 1.0)
    stated = np.asarray(getattr(plans, "moe_node_limit", np.zeros(len(plans))), dtype=float)
    if model.moe is None:
        return u
    groups, per_token = float(model.moe.n_group), float(model.moe.topk_group)
    from_model = np.where(groups > 1, per_token * np.maximum(np.ceil(u / groups), 1.0), u)
    return np.minimum(np.where(stated > 0, stated, from_model), u)


def check_node_limit(model, cluster, plans: PlanBatch) -> None:
    """Refuse a stated ``moe_node_limit`` larger than the scale-up domains the EP group spans (one line)."""
    stated = np.asarray(getattr(plans, "moe_node_limit", np.zeros(len(plans))))
    if model.moe is None or not np.any(stated > 0):
        return
    span = placed_span(cluster, plans.ep, plans.etp.astype(np.int64))
    domains = np.asarray(span.num_domains)
    bad = np.flatnonzero(stated > domains)
    if bad.size:
        i = int(bad[0])
        raise PlanError(f"moe_node_limit={int(stated[i])} is larger than the {int(domains[i])} scale-up domain(s) "
                        f"ep={int(plans.ep[i])} spans on {cluster.name}; node-limited routing sends a token to at "
                        f"most that many; use moe_node_limit <= {int(domains[i])} or 0 (the model's topk_group)")


def deepep_node_dedup(model, plans: PlanBatch, span):
    """Fraction of the EP all-to-all's bytes a DeepEP dispatcher moves (1 for the other dispatchers).

    The all-to-all record counts one copy per routed expert (``top_k`` per token), as Megatron-Core's
    all-to-all dispatcher sends them (it permutes the tokens by expert, then exchanges the expert-sorted copies).
    DeepEP sends a token once to each *unit* that holds at least one of its experts and expands it to the
    unit's experts on arrival (the combine reduces them there before sending one result back):

    * inside one scale-up domain the unit is the rank: the normal kernels' layout is ``is_token_in_rank:
      [num_tokens, num_ranks] ... whether a token be sent to a rank`` (DeepEP deep_ep/buffer.py
      ``get_dispatch_layout``), and Megatron-Core's flex dispatcher permutes the received tokens to the local
      experts afterwards (token_dispatcher.py MoEFlexTokenDispatcher);
    * across domains the unit is the domain: a token crosses RDMA once per domain and is forwarded over NVLink
      inside it (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.2: "each token ... first transmitted via IB to
      the GPUs with the same in-node index on its target nodes ... then forwarded via NVLink"; DeepEP README,
      "normal kernels ... NVLink and RDMA forwarding").

    Derivation: with ``E`` experts spread evenly over ``u`` units and ``k`` experts drawn without replacement per
    token (uniform routing), a token reaches a given other unit with probability ``1 - C(E - E/u, k) / C(E, k)``,
    so it is sent ``(u - 1) (1 - C(E - E/u, k) / C(E, k))`` times against ``k (u - 1) / u`` copies without
    deduplication; the ratio scales the priced all-to-all (whose time the scale-out tier sets once the group
    leaves a domain; the NVLink forwarding runs at the scale-up rate beside it and is not added). Units are the
    ``ep`` ranks inside a domain, the ``num_domains`` domains otherwise.

    Node-limited routing (:func:`node_limit`, ``M < u`` domains): the token's ``k`` experts are drawn from the
    ``E M / u`` experts of its ``M`` chosen domains, so it reaches ``M (1 - C(E M/u - E/u, k) / C(E M/u, k))``
    of them, ``(u - 1) / u`` of which are other domains: the IB copies per token are capped by ``M`` (the
    formula above at ``M = u``), the fan-out to the ``k`` experts inside each domain rides NVLink.
    """
    raw = getattr(plans, "moe_dispatcher", None)
    if raw is None or model.moe is None:
        return np.ones(len(plans))
    domains = np.asarray(span.num_domains, dtype=float)
    u = np.where(domains > 1, domains, plans.ep.astype(float))
    deepep = (np.asarray(raw) == MOE_DISPATCHERS.index("deepep")) & (u > 1)
    if not np.any(deepep):
        return np.ones(len(plans))
    M = np.where(domains > 1, node_limit(model, plans, domains), u)
    return np.where(deepep, _copies_fraction(model, np.maximum(u, 1.0), M), 1.0)


def _copies_fraction(model, u, M) -> np.ndarray:
    """``M (1 - C(E M/u - E/u, k) / C(E M/u, k)) / k``: distinct units a token reaches among its ``M`` over the
    ``k`` copies (:func:`deepep_node_dedup`), at most 1."""
    E, k = float(model.moe.num_experts), int(model.moe.top_k)
    u, M = np.broadcast_arrays(np.asarray(u, dtype=float), np.asarray(M, dtype=float))
    pool = E * M / u  # the experts of the token's M domains (all E without a limit)
    miss = np.ones(u.shape)
    for i in range(k):  # C(pool - E/u, k) / C(pool, k) = prod_i (pool - E/u - i) / (pool - i)
        miss = miss * np.clip((pool - E / u - i) / np.maximum(pool - i, 1e-12), 0.0, None)
    return np.minimum(M * (1.0 - miss) / k, 1.0)


def node_copies_fraction(model, domains) -> np.ndarray:
    """The share of a token's ``top_k`` copies DeepEP sends across ``domains`` scale-up domains under the model's
    node-limited routing (:func:`node_limit` without a plan override; :func:`deepep_node_dedup`)."""
    u = np.maximum(np.asarray(domains, dtype=float), 1.0)
    groups, per_token = float(model.moe.n_group), float(model.moe.topk_group)
    M = np.minimum(np.where(groups > 1, per_token * np.maximum(np.ceil(u / groups), 1.0), u), u)
    return _copies_fraction(model, u, M)


def per_expert_gemms(plans: PlanBatch) -> np.ndarray:
    """Whether each plan launches its expert GEMMs one per local expert (plan ``moe_grouped_gemm``
    ``per-expert``; a batch without the field: yes, Megatron-Core's Transformer Engine path)."""
    raw = getattr(plans, "moe_grouped_gemm", None)
    if raw is None:
        return np.ones(len(plans), dtype=bool)
    return np.asarray(raw) == MOE_GROUPED_GEMMS.index("per-expert")


def dispatcher_kernels(plans: PlanBatch):
    """(forward, backward) kernels per MoE layer of each plan's ``moe_dispatcher`` (compute.yaml
    moe_dispatchers, :func:`tierwise.specs.compute.moe_kernels_per_layer`); a batch without the field: all-to-all."""
    raw = getattr(plans, "moe_dispatcher", None)
    if raw is None:
        kf, kb = moe_kernels_per_layer("alltoall")
        return np.full(len(plans), float(kf)), np.full(len(plans), float(kb))
    table = np.array([moe_kernels_per_layer(d) for d in MOE_DISPATCHERS], dtype=float)
    return table[np.asarray(raw, dtype=np.int64), 0], table[np.asarray(raw, dtype=np.int64), 1]


def moe_host_extra_s(plans: PlanBatch, P, shape, gpu_moe, op_overhead) -> np.ndarray:
    """CPU launch time of one MoE layer and micro-batch beyond its MoE block's GPU time ``gpu_moe`` (forward and
    backward).

    The dispatcher copies the tokens-per-expert counts to the host to size the all-to-all, so the CPU cannot
    run ahead of the GPU into the MoE block; its kernels then start at the CPU's launch pace, and the block
    costs ``max(GPU time, launches x torch_op_overhead)``, forward and backward. The launches: the dispatcher's
    kernels (:func:`dispatcher_kernels`), and per local expert its GEMMs (TE GroupedLinear issues one cuBLASLt
    call per expert) and backward gradient bookkeeping (compute.yaml moe_expert_launches), so few EP ranks over
    many experts at a small micro-batch are host-bound. Plan ``moe_grouped_gemm``: one launch per local
    expert, or one kernel per GEMM (fc1, fc2 forward; their dgrad and wgrad backward) whatever the experts
    (torch._grouped_mm, a CUTLASS grouped kernel).
    """
    kf, kb = dispatcher_kernels(plans)
    ef, eb = moe_expert_launches()
    local_experts = shape.num_experts / np.maximum(P.deg.ep, 1)
    per_expert = per_expert_gemms(plans)
    kf = kf + np.where(per_expert, ef * local_experts, 2.0)
    kb = kb + np.where(per_expert, eb * local_experts, 4.0)
    return np.maximum(kf * op_overhead - gpu_moe, 0.0) + np.maximum(kb * op_overhead - 2.0 * gpu_moe, 0.0)


def ep_layer_comm(model, cluster, plans: PlanBatch, P, C, traffic, strides, cparams, *, parameters):
    """(span, seconds, bytes, exposed seconds) of one MoE layer's dispatch and combine all-to-alls, forward and
    backward (+ forward again under full recompute), over the EP group (ranks ``etp`` apart).

    DeepEP's deduplication scales the bytes (:func:`deepep_node_dedup`); the all-to-all ends when the busiest
    rank has received (dispatch) and returned (combine) its tokens (:func:`moe_imbalance`). Combined 1F1B
    (Megatron-Core ``--overlap-moe-expert-parallel-comm``, after DeepSeek-V3's DualPipe, arXiv:2412.19437
    section 3.2.1): a micro-batch's forward dispatch + combine run behind the adjacent micro-batch's backward of
    the layer (2 x forward), its backward pair behind the adjacent forward; what exceeds the partner's compute
    stays exposed, the hidden part pays ``overlap_interference`` like TP and CP. DualPipe and DualPipeV
    (``schedule``) overlap the same way whatever ``ep_comm_overlap`` says: their steady state is such pairs
    (DeepSeek-V3 report sec. 3.2.1, Figure 4).
    """
    n = P.n
    span = placed_span(cluster, plans.ep, P.deg.etp.astype(np.int64))
    if not (traffic["ep"] and np.any(plans.ep > 1)):
        zero = np.zeros(n)
        return span, zero, zero, zero
    t, bytes_, (a2a,) = price_records(traffic["ep"], span, cluster, n, parameters=parameters)
    dedup = deepep_node_dedup(model, plans, span)
    imb = moe_imbalance(model, plans, cparams, P.tokens)
    t, bytes_, a2a = t * dedup * imb, bytes_ * dedup, a2a * dedup * imb
    unhidden = np.maximum(2 * a2a - 2 * C.fwd_moe, 0) + np.maximum(2 * a2a - C.fwd_moe, 0)
    interference = cparams.get("overlap_interference", 0.0)
    # DualPipe / DualPipeV pair every forward chunk with a backward chunk by design (P.dual)
    exposed = np.where(plans.ep_comm_overlap | (P.dual > 0), unhidden + interference * (t - unhidden), t)
    return span, t, bytes_, exposed
