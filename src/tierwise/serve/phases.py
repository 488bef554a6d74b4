"""Prefill, decode and KV transfer times, vectorized over TP / EP degrees and batch sizes (numpy arrays).

One model for ``serve`` (a batch of one) and ``serve-plan`` (thousands of candidates at once); there is no
scalar copy. All times are seconds on one model instance (``tp`` ranks; experts spread over ``ep`` of them).

Every kernel is priced by :mod:`tierwise.pricing.kernels`, the functions the training step uses: this module
has no efficiency law of its own, only what makes a serving step a serving step.

* **Prefill** of ``n`` prompts of ``s`` tokens is :func:`tierwise.pricing.kernels.layer_forward` over ``n s``
  tokens at sequence ``s`` (the forward of a training micro-batch of the same tokens: weight GEMMs on their
  roofline, the causal attention core, the elementwise kernels), times the layers, plus the LM head for the
  last position of each prompt only (engines compute logits only where a token is sampled: vLLM's
  ``LogitsProcessor`` prunes the hidden states to the sampled positions; TensorRT-LLM's
  ``gather_context_logits`` is off by default), plus the TP and EP collectives.
* **A decode step** of ``B`` sequences at mean context ``c`` (Pope et al. 2022, "Efficiently Scaling
  Transformer Inference", sec. 2): the weight GEMMs over ``B`` rows on the same roofline (memory-bound at
  small ``B``: the weights are read once per step, shared by the batch; a MoE layer reads only the experts its
  tokens picked), the attention core over ``B`` queries of ``c`` keys each with the KV cache read as its
  memory side, the elementwise kernels, the LM head over ``B`` rows, the collectives (small messages: their
  latency term dominates; the per-collective host launch is dropped, CUDA graphs), and the engine's per-step
  host time (``params.engine``, priced by :func:`tierwise.pricing.engine.engine_host_time`: launches,
  scheduler work per step and per sequence, exposed unless the engine overlaps it with the GPU step). Prompt tokens mixed into the step (chunked prefill, Agrawal
  et al. 2024 "Sarathi-Serve", sec. 4) add their GEMM rows and their own causal attention.

* **MTP speculative decoding** (``params.mtp`` N, DeepSeek-V3 report sec. 2.2 and 5.4.3): a decode step verifies
  ``1 + N`` positions per sequence in its one target forward and runs N draft forwards of the MTP module
  (:func:`mtp_draft_time`); it yields ``E = sum P^i`` tokens per sequence (:func:`accepted_per_step`), so a token
  costs the step over E (:func:`decode_token_time`).

TP: two all-reduces of ``T h`` BF16 activations per layer (Megatron-LM, Shoeybi et al. 2019, sec. 3); EP: a
dispatch and a combine all-to-all of ``T k h`` per MoE layer (GShard, Lepikhin et al. 2020, sec. 2.2), each
priced by :func:`tierwise.collectives.model.collective_cost` on the tiers the group spans
(:func:`tierwise.hierarchy.group_span`).
"""

from __future__ import annotations

import numpy as np

from tierwise.estimate.compute import compute_params
from tierwise.parallel.deepep import deepep_time
from tierwise.parallel.eplb import serving_imbalance
from tierwise.pricing.comm import price_per_token_records
from tierwise.pricing.engine import DENSE_LAYER_KERNELS, MOE_LAYER_KERNELS, engine_host_time
from tierwise.pricing.kernels import (
    ComputeRates,
    LayerWork,
    attention_backward_factors,
    attention_kernel_rates,
    attention_time,
    compute_rates,
    elementwise_time,
    gemm_peak,
    layer_forward,
    layer_gemms,
    lm_head_time,
)
from tierwise.serve.kv import (
    attention_dp,
    expert_tp,
    kv_fraction_per_gpu,
    mtp_modules,
    mtp_weight_bytes_per_gpu,
    shape_of,
    weight_bytes_per_gpu,
    weight_bytes_read_per_step,
)
from tierwise.serve.params import ServingParameters, model_parameters
from tierwise.serve.records import DecodeStep, DecodeToken, MtpDraft, PrefillCost, ServingSetup
from tierwise.specs.cluster import Cluster
from tierwise.specs.model import ModelSpec
from tierwise.specs.parameters import Parameters
from tierwise.workload.flops import attention_core_flops_per_token, decode_attention_flops_per_token
from tierwise.workload.kernels import elementwise_bytes
from tierwise.workload.traffic import forward_traffic

__all__ = ["serving_rates", "layer_work", "linear_time", "prefill_time", "decode_step_time", "decode_token_time",
           "mtp_draft_time", "accepted_per_step", "comm_time", "host_time", "finish_step"]


def serving_rates(cluster: Cluster, params: ServingParameters) -> ComputeRates:
    """The cluster accelerator's rates under the ``compute:`` parameters ``params`` carries (the training fit,
    the cluster's own measured ``compute:`` block over it) and the serving set's ``fp4_efficiency_ratio``, through
    :func:`tierwise.pricing.kernels.compute_rates`: the rates the training step prices the same part with."""
    cparams = {**compute_params(model_parameters(params)), **cluster.compute,
               "fp4_efficiency_ratio": params.fp4_efficiency_ratio}
    return compute_rates(cluster.accelerator, cparams)


def layer_work(model: ModelSpec, rates: ComputeRates, precision: str, params: ServingParameters, *, tp, ep,
               tokens, seq, group_tokens=None) -> LayerWork:
    """What one rank of an instance runs of one layer over the instance's ``tokens`` tokens of sequences ``seq``
    long (:class:`tierwise.pricing.kernels.LayerWork`): no sequence parallelism (every rank of an attention group
    holds every token of its group), routed experts over ``ep`` ranks each split ``tp / ep`` ways when
    ``ep <= tp`` (the vLLM / TensorRT-LLM layout, :func:`tierwise.serve.kv.weight_bytes_per_gpu`), whole on
    each of ``ep`` ranks with attention data-parallel over ``ep / tp`` groups when ``ep > tp``
    (:func:`tierwise.serve.kv.instance_gpus`); ``group_tokens`` the tokens of one attention group (default
    ``tokens / dp``). A rank's grouped GEMMs run ``tokens / ep`` tokens (``x top_k`` rows over its experts:
    :func:`tierwise.parallel.ep.expert_tokens_per_rank`'s meaning), the busiest EP rank at
    :func:`tierwise.parallel.eplb.serving_imbalance` (the router's skew, the step's tokens, EPLB's redundant
    experts); the engine's attention kernel (``params.attention_kernel``).

    Low-precision GEMM inputs are quantized inside the kernel that writes them (TensorRT-LLM's fused
    RMSNorm-quantize and SwiGLU-quantize kernels; vLLM's fused ``rms_norm_static_fp8_quant`` and
    ``silu_and_mul_quant`` ops), not by a cast kernel per GEMM as Transformer Engine runs in training, so no
    cast bytes are charged (``cast_inputs`` False). On the serving set this is what the throughput rows
    support: with per-GEMM casts the FP8 rows' p90 error is 33.4% against 27.7% without (docs/serving.md)."""
    tp, ep = np.asarray(tp, dtype=float), np.asarray(ep, dtype=float)
    tokens, seq = np.asarray(tokens, dtype=float), np.asarray(seq, dtype=float)
    group = tokens / attention_dp(tp, ep) if group_tokens is None else np.asarray(group_tokens, dtype=float)
    tp, ep, tokens, seq, group = np.broadcast_arrays(tp, ep, tokens, seq, group)
    shape = tp.shape
    eff, overlap = attention_kernel_rates([params.attention_kernel], np.zeros(shape, dtype=np.int64), rates)
    imbalance = serving_imbalance(model, rates.params, ep, tokens, params.redundant_experts)
    low = precision in ("fp8", "fp4")
    return LayerWork(
        tokens=group, seq=seq, seq_chunk=seq, tp=tp, etp=expert_tp(tp, ep), ep=ep, seq_shard=np.ones(shape),
        expert_tokens=tokens / ep, imbalance=imbalance, fp8=np.full(shape, low), fp4=np.full(shape, precision == "fp4"),
        cast_inputs=np.zeros(shape, dtype=bool),
        attention_eff=eff, attention_overlap=overlap, unfused=np.zeros(shape, dtype=bool),
        fused_elementwise=np.ones(shape, dtype=bool),
        attention_backward_factor=attention_backward_factors([params.attention_kernel], np.zeros(shape, dtype=np.int64),
                                                             rates.generation),
    )


def _layers(model: ModelSpec, dense, moe):
    """Sum over the model's layers of a per-layer time (dense and MoE layers)."""
    s = shape_of(model)
    return s.num_dense_layers * dense + s.num_moe_layers * moe


def linear_time(model: ModelSpec, cluster: Cluster, precision: str, tp, ep, tokens, params: ServingParameters,
                *, touched_fraction=None) -> np.ndarray:
    """Seconds of the weight GEMMs of every layer over ``tokens`` tokens on one instance
    (:func:`tierwise.pricing.kernels.layer_gemms`; ``touched_fraction``: the share of a rank's experts whose
    weights a decode step reads)."""
    rates = serving_rates(cluster, params)
    work = layer_work(model, rates, precision, params, tp=tp, ep=ep, tokens=tokens, seq=1.0)
    shape = shape_of(model)
    dense = layer_gemms(model, shape, rates, work, False)[0]
    moe = (layer_gemms(model, shape, rates, work, True, touched_fraction=touched_fraction)[0]
           if model.moe is not None else 0.0)
    return _layers(model, dense, moe)


def comm_time(model: ModelSpec, cluster: Cluster, tp, ep, tokens, weight_precision: str, *, parameters: Parameters,
              low_latency: bool = False, layers: tuple[float, float] | None = None) -> np.ndarray:
    """TP all-reduces and EP all-to-alls of one forward over an attention group's ``tokens`` tokens (seconds).

    Group placement: TP ranks are consecutive GPUs (stride 1), EP ranks too (EP folds into the TP ranks, or
    spans the instance's ``ep`` GPUs when ``ep > tp``). The collective model's host launch overhead is removed
    per call (CUDA graphs; params docstring). With ``ep > tp`` the all-to-alls are DeepEP's kernels
    (:func:`tierwise.parallel.deepep.deepep_time`: the normal kernels for prefill, the low-latency ones for
    decode, ``low_latency``), each rank dispatching its ``1 / tp`` share of its group's tokens. ``layers``: (layers,
    MoE layers) to price instead of the model's (an MTP module's one block). ``parameters``: the model's
    (:mod:`tierwise.specs.parameters`), the collectives priced under them."""
    n_layers, n_moe = (model.num_layers, model.num_moe_layers) if layers is None else layers
    tp = np.asarray(tp, dtype=np.int64)
    ep = np.asarray(ep, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=float)
    tp, ep, tokens = np.broadcast_arrays(tp, ep, tokens)
    launch = parameters.collectives["launch_overhead"]
    fp8 = weight_precision in ("fp8", "fp4")
    records = forward_traffic(model, tp, ep, tokens, fp8_dispatch=fp8)
    out = n_layers * price_per_token_records(records["tp"], cluster, tokens, parameters=parameters, launch=launch)
    if model.moe is not None and n_moe and np.any(ep > 1):
        a2a = price_per_token_records(records["ep"], cluster, tokens, parameters=parameters, launch=launch)
        wide = ep > tp
        if np.any(wide):
            deep = deepep_time(model, cluster, np.where(wide, ep, 1), tokens / tp, low_latency=low_latency,
                               fp8_dispatch=fp8)["time_s"]
            a2a = np.where(wide, deep, a2a)
        out = out + n_moe * a2a
    return out


def finish_step(model: ModelSpec, params: ServingParameters, *, layers, comm, head, batch, tp, extra_launches=0.0):
    """``(gpu_s, host_s)`` of a step (prefill or decode) from its layers' kernels, its collectives and its LM
    head: the collectives run after the layers' kernels, or behind them under two-batch overlap
    (``params.two_batch_overlap``: one micro-batch's communication behind the other's layers, DeepSeek-V3 report
    sec. 3.4), the LM head after both; then the engine's host time the step exposes for ``batch`` running
    sequences (:func:`host_time`; ``extra_launches``: kernels beyond the layers', the MTP draft forwards'). The one
    place both phases end a step."""
    gpu = (np.maximum(layers, comm) if params.two_batch_overlap else layers + comm) + head
    return gpu, host_time(model, params, gpu_s=gpu, batch=batch, tp=tp, extra_launches=extra_launches)


def _layer_launches(moe_layer: bool, tp):
    """Kernels one layer launches: its own (:data:`tierwise.pricing.engine.DENSE_LAYER_KERNELS` or
    ``MOE_LAYER_KERNELS``) plus two TP all-reduces when ``tp > 1``."""
    per_layer = 2.0 * (np.asarray(tp, dtype=float) > 1)
    return (MOE_LAYER_KERNELS if moe_layer else DENSE_LAYER_KERNELS) + per_layer


def host_time(model: ModelSpec, params: ServingParameters, *, gpu_s, batch, tp, extra_launches=0.0) -> np.ndarray:
    """The engine's host time one step exposes (:func:`tierwise.pricing.engine.engine_host_time`) for a step of
    ``gpu_s`` GPU seconds over ``batch`` sequences: its launches are every layer's kernels (:func:`_layer_launches`)
    plus ``extra_launches``."""
    shape = shape_of(model)
    launches = (shape.num_dense_layers * _layer_launches(False, tp) + shape.num_moe_layers * _layer_launches(True, tp)
                + extra_launches)
    return engine_host_time(params.engine, gpu_s=gpu_s, batch=batch, launches=launches,
                            kernel_gap_s=params.kernel_gap_s)


def prefill_time(setup: ServingSetup, tp, ep, input_len, num_requests=1.0) -> PrefillCost:
    """Prefill of ``num_requests`` prompts of ``input_len`` tokens on one instance of ``setup`` (module docstring).

    Returns a :class:`~tierwise.serve.records.PrefillCost`: ``layers_s`` (the transformer layers alone: :func:`tierwise.pricing.kernels.layer_forward` times the
    layers, what a training micro-batch's forward of the same tokens costs), ``head_s`` (the LM head at each
    prompt's last position), ``compute_s`` (their sum), ``memory_s`` (the weights read once, for reference:
    every GEMM's roofline already counts its own read), ``comm_s``, ``host_s`` (the engine's host time of the
    step, :func:`host_time`) and ``total_s``. With ``params.mtp`` the MTP modules run over the prompt as well
    (SGLang's and vLLM's MTP drafters prefill the module beside the target, which fills its KV cache and drafts
    the first tokens): one more block of the last layer's kind per module, its collectives, and the projection
    and head at each prompt's last position.
    """
    model, cluster, precision, params = setup.model, setup.cluster, setup.precision, setup.params
    rates = serving_rates(cluster, params)
    n = np.asarray(num_requests, dtype=float)
    s = np.asarray(input_len, dtype=float)
    # with attention data-parallel the prompts spread over the groups; the fullest group sets the pace
    per_group = np.ceil(n / attention_dp(tp, ep) - 1e-9)
    work = layer_work(model, rates, precision, params, tp=tp, ep=ep, tokens=n * s, seq=s, group_tokens=per_group * s)
    fwd = layer_forward(model, shape_of(model), rates, work)
    layers = _layers(model, fwd.dense, fwd.moe)
    head = lm_head_time(model, rates, tokens=per_group, tp=work.tp, peak=fwd.gemm_peak)
    memory = weight_bytes_per_gpu(model, precision, work.tp, work.ep, params.redundant_experts, mtp=params.mtp) / rates.hbm
    comm = comm_time(model, cluster, work.tp.astype(np.int64), work.ep.astype(np.int64), work.tokens, precision,
                     parameters=model_parameters(params))
    if params.mtp:
        # the MTP modules run over the prompt too (their KV cache, the first draft): one more block each, the
        # projection and the head at the last position (:func:`mtp_draft_time`'s parts)
        k, moe_block = mtp_modules(model, params.mtp), bool(model.moe_layer_mask[-1]) and model.moe is not None
        layers = layers + k * (fwd.moe if moe_block else fwd.dense)
        head = head * (1.0 + k * (1.0 + 2.0 * model.hidden_size / model.vocab_size))
        comm = comm + comm_time(model, cluster, work.tp.astype(np.int64), work.ep.astype(np.int64), work.tokens,
                                precision, parameters=model_parameters(params), layers=(float(k), float(k * moe_block)))
    compute = layers + head
    gpu, host = finish_step(model, params, layers=layers, comm=comm, head=head, batch=n, tp=work.tp)
    total = gpu + host
    return PrefillCost(layers_s=layers, head_s=head + 0 * total, compute_s=compute, memory_s=memory + 0 * total,
                       comm_s=comm + 0 * total, host_s=host + 0 * total, total_s=total)


def accepted_per_step(params: ServingParameters) -> float:
    """Expected tokens a sequence gains per decode step with ``params.mtp`` speculative tokens, each accepted with
    probability ``params.mtp_acceptance`` ``P`` given its predecessors were: ``E = sum_{i=0..N} P^i``. Leviathan
    et al. 2023, "Fast Inference from Transformers via Speculative Decoding", sec. 3.1 (eq. 1,
    ``(1 - a^(g+1)) / (1 - a)`` with i.i.d. acceptance ``a``; the verify step's own token is always kept). 1 without
    MTP; ``1 + P`` for N = 1."""
    p = float(params.mtp_acceptance)
    return float(sum(p ** i for i in range(int(params.mtp) + 1)))


def _decode_layer(model: ModelSpec, rates: ComputeRates, work: LayerWork, *, seqs, queries, ctx, pt, pc,
                  kv_bytes_token, rows):
    """Per-layer seconds (dense, MoE) and FLOPs (dense GEMMs, MoE GEMMs, decode attention, prompt attention) of
    one rank of a decode step, and the KV bytes one layer reads: ``seqs`` sequences of an attention group, each
    running ``queries / seqs`` query positions against its ``ctx`` cached keys (the cache read once per sequence,
    its queries sharing it: FlashMLA's decode kernel takes ``s_q`` query positions per sequence,
    ``get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)``, the layout its README gives for MTP), ``pt``
    prompt tokens at context ``pc`` mixed in, the instance's ``rows`` tokens through the GEMMs."""
    shape = shape_of(model)
    tp_ = work.tp
    touched = (1.0 - (1.0 - shape.top_k / shape.num_experts) ** np.maximum(rows, 1.0)
               if shape.num_moe_layers else None)
    dense_g, dense_f = layer_gemms(model, shape, rates, work, False)
    moe_g, moe_f = (layer_gemms(model, shape, rates, work, True, touched_fraction=touched)
                    if model.moe is not None else (0.0, 0.0))
    # attention: the queries over c cached keys each (the cache read is the kernel's memory side), and the
    # mixed-in prompt tokens' causal attention over their own chunk
    kv_layer = seqs * ctx * kv_bytes_token * kv_fraction_per_gpu(model, tp_) / model.num_layers
    # MLA decodes in the latent space (absorbed matrices); the mixed-in prompt tokens below prefill uncompressed
    dec_f = decode_attention_flops_per_token(model, shape, ctx) * queries / tp_
    att_dec, _ = attention_time(dec_f, shape, rates, seq_len=ctx, eff=work.attention_eff,
                                overlap=work.attention_overlap, kv_bytes=kv_layer)
    pre_f = attention_core_flops_per_token(model, shape, pc, causal_halving=True) * pt / tp_
    att_pre, _ = attention_time(pre_f, shape, rates, seq_len=pc, eff=work.attention_eff,
                                overlap=work.attention_overlap)
    eb = elementwise_bytes(model, shape, rates.params, tokens=work.tokens, tp=tp_, etp=work.etp,
                           seq_shard=work.seq_shard, expert_tokens=work.expert_tokens, fp8=work.cast_inputs,
                           fused=work.fused_elementwise)
    return ((dense_g + att_dec + att_pre + elementwise_time(eb.dense, rates),
             moe_g + att_dec + att_pre + elementwise_time(eb.moe, rates)),
            (dense_f, moe_f, dec_f, pre_f), kv_layer)


def mtp_draft_time(setup: ServingSetup, tp, ep, batch, context) -> MtpDraft:
    """GPU seconds, FLOPs and bytes read of the ``params.mtp`` draft forwards of one decode step (0 without MTP):
    a :class:`~tierwise.serve.records.MtpDraft`.

    Each speculative token is one forward of an MTP module (DeepSeek-V3 report, arXiv:2412.19437 sec. 2.2) over
    the step's ``batch`` sequences, one position each: the projection ``M_k`` (``2h -> h``, priced as ``2h / V``
    of the LM head's GEMM, as :func:`tierwise.parallel.pp.mtp_head_s` prices it in training), one transformer
    block of the model's last layer's kind (its GEMMs, its attention over the module's own one-layer KV cache of
    ``context`` keys, its elementwise kernels, its TP all-reduces and EP all-to-alls: the same
    :func:`_decode_layer` and :func:`comm_time` as the target's layers) and the shared LM head. More tokens than the
    model has modules chain them (the engines' rule: :func:`tierwise.serve.params.ServingParameters.mtp`)."""
    model, cluster, precision, params = setup.model, setup.cluster, setup.precision, setup.params
    n = int(params.mtp)
    rates = serving_rates(cluster, params)
    batch = np.asarray(batch, dtype=float)
    ctx = np.maximum(np.asarray(context, dtype=float), 1.0)
    work = layer_work(model, rates, precision, params, tp=tp, ep=ep, tokens=batch, seq=1.0)
    seqs = batch / attention_dp(tp, ep)
    (dense, moe), (dense_f, moe_f, dec_f, _), kv_layer = _decode_layer(
        model, rates, work, seqs=seqs, queries=seqs, ctx=ctx, pt=0.0, pc=1.0, kv_bytes_token=setup.kv_bytes_token, rows=batch)
    moe_block = bool(model.moe_layer_mask[-1]) and model.moe is not None
    block, block_f = (moe, moe_f) if moe_block else (dense, dense_f)
    peak = gemm_peak(rates, work.fp8, work.fp4)[0]
    head = lm_head_time(model, rates, tokens=seqs, tp=work.tp, peak=peak)
    proj = head * 2.0 * model.hidden_size / model.vocab_size
    comm = comm_time(model, cluster, work.tp.astype(np.int64), work.ep.astype(np.int64), work.tokens, precision,
                     parameters=model_parameters(setup.params), low_latency=True, layers=(1.0, float(moe_block)))
    h = model.hidden_size
    flops = block_f + dec_f + (4.0 * h * h + 2.0 * h * model.vocab_size) / work.tp * seqs
    weights = mtp_weight_bytes_per_gpu(model, precision, work.tp, work.ep, params.redundant_experts, modules=1)
    return MtpDraft(gpu_s=n * (block + comm + proj + head), flops=n * flops, bytes=n * (weights + kv_layer),
                    launches=n * (_layer_launches(moe_block, work.tp) + 2.0))


def decode_step_time(setup: ServingSetup, tp, ep, batch, context, *, prefill_tokens=0.0,
                     prefill_context=0.0) -> DecodeStep:
    """One decode step of ``batch`` sequences at mean context ``context`` on one instance of ``setup`` (module
    docstring).

    ``prefill_tokens`` (with their mean context ``prefill_context``) are prompt tokens mixed into the same step
    (chunked prefill): they add GEMM rows, their own causal attention and communication, and share the step's
    single read of the weights. With ``params.mtp`` speculative tokens (N) the step verifies ``1 + N`` positions
    per sequence in the one target forward (its GEMMs see ``(1 + N) B`` rows, its attention ``1 + N`` queries per
    sequence over one read of the cache, its LM head ``1 + N`` rows per sequence: Leviathan et al. 2023 sec. 3,
    the target model scores the draft's guesses in parallel) and runs the draft forwards
    (:func:`mtp_draft_time`). Returns a :class:`~tierwise.serve.records.DecodeStep`: ``memory_s`` (weights and
    KV cache read once at the datasheet rate), ``compute_s`` (the math alone), ``comm_s``, ``overhead_s``,
    ``total_s`` (the step), ``mtp_s`` (the draft forwards' GPU seconds, in ``total_s``) and ``bound``
    (``memory`` or ``compute``).
    """
    model, cluster, precision, params = setup.model, setup.cluster, setup.precision, setup.params
    rates = serving_rates(cluster, params)
    batch = np.asarray(batch, dtype=float)
    ctx = np.maximum(np.asarray(context, dtype=float), 1.0)
    pt = np.asarray(prefill_tokens, dtype=float)
    pc = np.maximum(np.asarray(prefill_context, dtype=float), 1.0)
    q = 1.0 + int(params.mtp)
    rows = batch * q + pt
    work = layer_work(model, rates, precision, params, tp=tp, ep=ep, tokens=rows, seq=pc)
    tp_ = work.tp
    # one attention group's share of the instance's sequences (attention data-parallel when ep > tp)
    dp = attention_dp(tp, ep)
    seqs = batch / dp
    (per_dense, per_moe), (dense_f, moe_f, dec_f, pre_f), kv_layer = _decode_layer(
        model, rates, work, seqs=seqs, queries=seqs * q, ctx=ctx, pt=pt / dp, pc=pc,
        kv_bytes_token=setup.kv_bytes_token, rows=rows)
    gemm_rate = gemm_peak(rates, work.fp8, work.fp4)[0]
    head = lm_head_time(model, rates, tokens=seqs * q, tp=tp_, peak=gemm_rate)
    layers = _layers(model, per_dense, per_moe)
    draft = mtp_draft_time(setup, tp, ep, batch, ctx) if params.mtp else MtpDraft()
    w_read = weight_bytes_read_per_step(model, precision, tp_, work.ep, rows, params.redundant_experts)
    memory = (w_read + model.num_layers * kv_layer + draft.bytes) / rates.hbm
    flops = (_layers(model, dense_f, moe_f) + model.num_layers * (dec_f + pre_f)
             + 2.0 * model.hidden_size * model.vocab_size / tp_ * (seqs * q) + draft.flops)
    compute = flops / gemm_rate
    comm = comm_time(model, cluster, tp_.astype(np.int64), work.ep.astype(np.int64), work.tokens, precision,
                     parameters=model_parameters(params), low_latency=True)
    gpu, overhead = finish_step(model, params, layers=layers, comm=comm, head=head + draft.gpu_s,
                                batch=seqs + pt / dp / pc, tp=tp_, extra_launches=draft.launches)
    total = gpu + overhead
    bound = np.where(memory >= compute, "memory", "compute")
    return DecodeStep(memory_s=memory + 0 * total, compute_s=compute + 0 * total, comm_s=comm + 0 * total,
                      overhead_s=overhead + 0 * total, total_s=total, mtp_s=draft.gpu_s + 0 * total, bound=bound)


def decode_token_time(setup: ServingSetup, tp, ep, batch, context, *, prefill_tokens=0.0,
                      prefill_context=0.0) -> DecodeToken:
    """:func:`decode_step_time` per output token of each sequence: what TPOT and the scenarios' step loops use.

    Without MTP a step is a token. With ``params.mtp`` a step yields ``E`` tokens per sequence on average
    (:func:`accepted_per_step`), so a token costs ``step / E`` (TPOT = step time / E; output tokens/s scale by E)
    and, as requests finish E times as fast, the prompt tokens chunked in per token (``prefill_tokens``) are
    ``E`` times as many per step. Returns a :class:`~tierwise.serve.records.DecodeToken`: the ``step``,
    ``total_s`` per token and ``tokens_per_step`` (``E``)."""
    e = accepted_per_step(setup.params)
    step = decode_step_time(setup, tp, ep, batch, context,
                            prefill_tokens=np.asarray(prefill_tokens, dtype=float) * e,
                            prefill_context=prefill_context)
    return DecodeToken(step=step, total_s=step.total_s / e, tokens_per_step=e + 0 * step.total_s)
