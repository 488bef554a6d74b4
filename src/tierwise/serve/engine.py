"""Serving scenarios on arrays of deployments: aggregated (prefill mixed into decode) and disaggregated
(a prefill pool, a decode pool and the KV transfer between them), offline, server and interactive.

``Deployments`` is a struct of arrays (one entry per candidate); :func:`evaluate` returns a dict of arrays.
``serve`` evaluates one deployment, ``serve-plan`` thousands; both run this code.

Scenarios:

* ``offline``: all requests queued; the batch is the largest that fits the KV cache (and the scheduler's
  ``max_batch``), or the largest whose TPOT meets ``tpot_slo`` when one is given.
* ``interactive``: the same search with a tight TPOT SLO (default 40 ms, TTFT 450 ms: MLPerf Inference's
  interactive Llama-2-70B bounds).
* ``server``: Poisson arrivals at ``rate`` requests/s. Decode concurrency from Little's law ``B = lambda_i
  (TTFT + O TPOT)``, solved the other way round: the steady state is parametrized by ``B`` and the rate that
  holds it, ``lambda_i(B) = B / (t_prefill + O t_step(B))``, rises with ``B``, so one bisection on ``B`` finds
  the batch of a given rate or the largest batch meeting the SLOs (:func:`_server_batch`); requests in flight
  in an M/G/inf system are Poisson,
  so the p99 batch is ``B + 2.326 sqrt(B)`` (normal tail) and p99 TPOT is the step time at that batch.
  Prefill is an M/D/1 queue per instance (service ``t_p``, load ``rho = lambda_i t_p``): mean wait
  ``rho t_p / (2 (1 - rho))`` (Pollaczek-Khinchine), tail ``P(W > t) ~ rho exp(-t rho / W_mean)`` (Kingman's
  heavy-traffic exponential approximation, Kingman 1962), so ``W_99 = (W_mean / rho) ln(100 rho)``. Without a
  rate, the largest rate whose p99 TTFT and TPOT meet the SLOs (MLPerf's Server rule; defaults 2 s / 200 ms).

Aggregated in-flight batching: each step decodes ``B`` sequences and prefills the prompts of the requests
that replace finished ones, ``B I / O`` tokens on average (chunked prefill); the step reads the weights once.
This spreads each prompt evenly over the steps, an approximation: an engine prefills a prompt in one or a few
budget-sized chunks, so a few steps are long and the rest short, and the mean of the step times exceeds the step
at the mean. ``serve --simulate`` (:mod:`tierwise.serve.simulate`) runs the iterations as they come: within 2%
of this mean TPOT where prompts are short against the outputs (128/512), about 18% above it for Llama-3.1-8B on an
H100 at 512/128 tokens and 20 requests/s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tierwise.serve.kv import (
    attention_dp,
    instance_gpus,
    kv_bytes_per_token,
    kv_fraction_per_gpu,
    mtp_kv_factor,
    weight_bytes_per_gpu,
    workspace_bytes_per_gpu,
)
from tierwise.serve.params import ServingParameters
from tierwise.serve.phases import decode_token_time
from tierwise.serve.prefix import PrefixCache, prefix_prefill
from tierwise.serve.records import PrefillCost, ServeResults, ServingSetup
from tierwise.serve.transfer import exposed_transfer, kv_transfer_time
from tierwise.specs.cluster import Cluster
from tierwise.specs.model import ModelSpec

__all__ = ["Workload", "Deployments", "evaluate", "SCENARIOS", "Z99"]

SCENARIOS = ("offline", "server", "interactive")
Z99 = 2.326
"""The standard normal's 99th percentile."""
_ITER = 24


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What is served: the model on the cluster, the request shape, the scenario and its SLOs."""

    model: ModelSpec
    cluster: Cluster
    precision: str
    """Weight (GEMM) precision: bf16, fp8 or fp4."""
    kv_precision: str
    input_len: int
    output_len: int
    scenario: str
    rate: float | None = None
    """Server arrivals, requests/s for the whole deployment (None: the largest rate meeting the SLOs)."""
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    batching: str = "inflight"
    """``inflight`` (continuous batching, chunked prefill) or ``static`` (a batch prefilled, then decoded to the
    end together: ``benchmark_latency``-style runs)."""
    kv_streamed: bool = True
    beams: int = 1
    """Beam-search width: each request decodes ``beams`` sequences that share its prompt's KV cache and
    return one output (MLPerf's GPT-J rule: 4 beams). Output tokens count once per request."""
    kv_reservation: str = "paged"
    """How the scheduler admits a request: ``paged`` (blocks allocated as tokens arrive, so a sequence holds
    the prompt plus half its output on average: vLLM, TensorRT-LLM ``MAX_UTILIZATION``) or ``full`` (the whole
    ``I + O`` reserved on admission: TensorRT-LLM's default ``GUARANTEED_NO_EVICT`` capacity scheduler)."""
    kv_cache_fraction: float | None = None
    """Memory fraction for the KV cache (None: ``params.memory_utilization``, 0.9), of the whole ``kv_cache_of``
    names."""
    kv_cache_of: str = "total"
    """``total``: the engine may use ``fraction x HBM`` for weights, activations and cache (vLLM
    ``gpu_memory_utilization``); ``free``: the cache gets ``fraction`` of what weights and activations leave
    (TensorRT-LLM ``kv_cache_free_gpu_mem_fraction``, "fraction of free GPU memory after the model is
    loaded", TensorRT-LLM docs, KV cache management)."""
    params: ServingParameters
    prefix: PrefixCache | None = None
    """Prefix caching (:mod:`tierwise.serve.prefix`): the share of each prompt whose KV is cached, in HBM or
    offloaded to host memory; None: none."""
    decode_cluster: Cluster | None = None
    """Disaggregated: the cluster of the decode pool when it differs from the prefill pool's ``cluster`` (its own
    accelerator, HBM and host; Splitwise's heterogeneous pools, Patel et al. ISCA 2024, sec. 5)."""

    def decode_side(self) -> Workload:
        """This workload as the decode pool sees it: priced on ``decode_cluster`` when one is set."""
        return self if self.decode_cluster is None else dataclasses.replace(self, cluster=self.decode_cluster)

    @property
    def kv_bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.model, self.kv_precision)

    @property
    def hit_rate(self) -> float:
        return 0.0 if self.prefix is None else self.prefix.hit_rate

    @property
    def setup(self) -> ServingSetup:
        """What this workload's steps are priced for (:class:`~tierwise.serve.records.ServingSetup`): the model on
        ``cluster`` (the prefill pool's, or the one pool's; :meth:`decode_side` for the decode pool's)."""
        return ServingSetup(self.model, self.cluster, self.precision, self.params, self.kv_bytes_per_token)

    def prefill(self, tp, ep, num_requests=1.0) -> PrefillCost:
        """One prefill step of ``num_requests`` prompts on this workload's cluster, less what prefix hits spare
        (:func:`tierwise.serve.prefix.prefix_prefill`)."""
        return prefix_prefill(self.setup, tp, ep, self.input_len, self.prefix, num_requests)

    @property
    def mean_context(self) -> float:
        """Mean tokens in a decoding sequence's cache: the prompt plus half the output."""
        return self.input_len + self.output_len / 2.0


@dataclass(frozen=True)
class Deployments:
    """Candidates as arrays of one length. Aggregated: ``disagg`` False, the decode fields describe the one
    pool (``prefill_*`` ignored). ``batch`` 0 = auto."""

    disagg: np.ndarray
    prefill_gpus: np.ndarray
    prefill_tp: np.ndarray
    decode_gpus: np.ndarray
    decode_tp: np.ndarray
    decode_ep: np.ndarray
    batch: np.ndarray
    kv_link: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    prefill_ep: np.ndarray | None = None
    """EP of a prefill instance (None: the decode EP, at most the prefill TP). An instance spans
    :func:`~tierwise.serve.kv.instance_gpus` GPUs: ``tp``, or ``ep`` with attention data-parallel."""

    def __len__(self) -> int:
        return len(self.decode_gpus)


def _capacity(w: Workload, tp, ep):
    """(KV cache bytes per GPU, max concurrent sequences per instance) after weights and workspace."""
    acc = w.cluster.accelerator
    frac = w.params.memory_utilization if w.kv_cache_fraction is None else w.kv_cache_fraction
    used = (weight_bytes_per_gpu(w.model, w.precision, tp, ep, w.params.redundant_experts, mtp=w.params.mtp)
            + workspace_bytes_per_gpu(w.model, tp, w.params))
    if w.kv_cache_of == "free":
        free = frac * (acc.hbm_capacity_bytes - used)
    else:
        free = acc.hbm_capacity_bytes * frac - used
    cache = np.maximum(free, 0.0)
    gen = w.beams * (w.output_len / 2.0 if w.kv_reservation == "paged" else float(w.output_len))
    # with MTP a sequence also holds the N positions a step writes ahead and each MTP module's one-layer cache
    held = w.input_len + gen + w.params.mtp
    per_seq = w.kv_bytes_per_token * kv_fraction_per_gpu(w.model, tp) * held * mtp_kv_factor(w.model, w.params.mtp)
    # each attention data-parallel group holds its own sequences' KV cache
    return cache, np.floor(cache / per_seq) * attention_dp(tp, ep), free > 0


def _largest(ok_fn, lo, hi):
    """Largest integer b in [lo, hi] with ok_fn(b) true (monotone: true below a threshold), vectorized;
    ``lo`` where even ``lo`` fails (the caller checks)."""
    lo = np.asarray(lo, dtype=float).copy()
    hi = np.asarray(hi, dtype=float).copy()
    good = ok_fn(hi)
    out = np.where(good, hi, lo)
    a, b = lo, hi
    for _ in range(13):
        mid = np.floor((a + b) / 2)
        ok = ok_fn(mid)
        a = np.where(ok, mid, a)
        b = np.where(ok, b, mid)
    return np.where(good, out, a)


def _mixed_step(w: Workload, tp, ep, batch):
    o = w.output_len
    # the prompts' uncached suffixes, chunked into the steps; a suffix token's causal context runs from the cached
    # prefix (h I) to the prompt's end (I), so its mean is (1 + h) I / 2: prefill_context (1 + h) I
    h = w.hit_rate
    # (per output token: with MTP a step yields E tokens, :func:`tierwise.serve.phases.decode_token_time`)
    return decode_token_time(w.setup, tp, ep, batch * w.beams, w.mean_context,
                             prefill_tokens=batch * (1.0 - h) * w.input_len / o, prefill_context=(1.0 + h) * w.input_len)


def _pure_step(w: Workload, tp, ep, batch):
    return decode_token_time(w.setup, tp, ep, batch * w.beams, w.mean_context)


def _queue_wait(lam, service):
    """M/D/1 mean and p99 waiting time (module docstring); inf at or past saturation."""
    rho = lam * service
    sat = rho >= 1.0
    r = np.minimum(rho, 0.999999)
    mean = r * service / (2.0 * (1.0 - r))
    p99 = np.where(r > 0.01, mean / np.maximum(r, 1e-12) * np.log(np.maximum(100.0 * r, 1.0)), 0.0)
    return np.where(sat, np.inf, mean), np.where(sat, np.inf, p99)


def evaluate(w: Workload, d: Deployments) -> ServeResults:
    """Every deployment of ``d`` under workload ``w`` (module docstring): a
    :class:`~tierwise.serve.records.ServeResults` of arrays, its fields named like the JSON document's keys."""
    out_a = _aggregated(w, d) if np.any(~d.disagg) else None
    out_d = _disaggregated(w, d) if np.any(d.disagg) else None
    if out_d is None:
        return out_a
    if out_a is None:
        return out_d
    return out_d.where(d.disagg, out_a)


def _batch_limit(w: Workload, d: Deployments, max_conc, dp=1.0):
    """The batch per instance: the stated one, else the KV capacity capped by the scheduler's ``max_batch`` per
    attention group (``dp`` groups each run their own scheduler, as SGLang's DP attention does)."""
    cap = np.minimum(max_conc, w.params.max_batch * dp)
    return np.where(d.batch > 0, d.batch, np.maximum(cap, 1))


def _aggregated(w: Workload, d: Deployments) -> ServeResults:
    tp, ep, gpus = d.decode_tp, d.decode_ep, d.decode_gpus
    inst = gpus // instance_gpus(tp, ep)
    cache, max_conc, fits = _capacity(w, tp, ep)
    limit = _batch_limit(w, d, max_conc, attention_dp(tp, ep))
    pf = w.prefill(tp, ep)
    o = w.output_len
    if w.batching == "static":
        batch = limit
        step = _pure_step(w, tp, ep, batch)
        pfb = w.prefill(tp, ep, num_requests=batch)
        total = pfb.total_s + o * step.total_s
        tps = inst * batch * o / total
        ttft, tpot = pfb.total_s, step.total_s
        ttft99, tpot99 = ttft, tpot
        dbound = step.bound
    elif w.scenario == "server":
        batch, tps, ttft, tpot, ttft99, tpot99, step = _server_agg(w, d, tp, ep, inst, limit, pf)
        dbound = step.bound
    else:
        def tpot_ok(b):
            s = _mixed_step(w, tp, ep, b).total_s
            ok = np.ones(s.shape, dtype=bool)
            if w.tpot_slo_s is not None:
                ok &= s <= w.tpot_slo_s
            if w.ttft_slo_s is not None:
                ok &= pf.total_s + s <= w.ttft_slo_s
            return ok

        auto = d.batch <= 0
        batch = np.where(auto, _largest(tpot_ok, np.ones(len(d)), limit) if np.any(auto) else limit, limit)
        step = _mixed_step(w, tp, ep, batch)
        tpot = step.total_s
        tps = inst * batch / tpot
        ttft = pf.total_s + tpot
        ttft99, tpot99 = ttft, tpot
        dbound = np.where(auto & (batch >= max_conc) & (max_conc < w.params.max_batch), "kv_capacity",
                          step.bound)
    meets = _meets(w, ttft99, tpot99) & fits & (batch <= np.maximum(max_conc, 0))
    zeros = np.zeros(len(d))
    return _result(len(d), output_tokens_per_s=tps, output_tokens_per_s_per_gpu=tps / gpus, ttft_s=ttft,
                   tpot_s=tpot, ttft_p99_s=ttft99, tpot_p99_s=tpot99, batch=batch, kv_cache_bytes_per_gpu=cache,
                   max_concurrency=max_conc * inst, fits=fits, meets_slo=meets,
                   prefill_bound=np.where(pf.compute_s >= pf.memory_s, "compute", "memory"), decode_bound=dbound,
                   kv_transfer_s=zeros, kv_transfer_exposed_s=zeros, kv_transfer_tier=np.full(len(d), None, dtype=object),
                   kv_bandwidth_needed_per_prefill_node_bytes_per_s=zeros, kv_link_bytes_per_s_per_gpu=zeros,
                   num_gpus=gpus)


def _server_agg(w: Workload, d: Deployments, tp, ep, inst, limit, pf):
    o = w.output_len

    def at_batch(b):
        """Steady state with ``b`` sequences in flight per instance (module docstring): the arrival rate that
        holds them (Little's law), the step, the p99 step and the TTFT with its prefill queue."""
        step = _mixed_step(w, tp, ep, b)
        lam = b / (pf.total_s + o * step.total_s)
        tpot99 = _mixed_step(w, tp, ep, b + Z99 * np.sqrt(b)).total_s
        wait, wait99 = _queue_wait(lam, pf.compute_s + pf.comm_s)
        ttft = pf.total_s + step.total_s + wait
        ttft99 = pf.total_s + tpot99 + wait99
        return lam, step, ttft, ttft99, tpot99

    b, ok = _server_batch(w, len(d), inst, limit, lambda b: at_batch(b)[0],
                          lambda b: _meets(w, *at_batch(b)[3:]))
    lam, step, ttft, ttft99, tpot99 = at_batch(b)
    tps = np.where(ok, (inst * lam if w.rate is None else w.rate) * o, 0.0)
    return b, tps, ttft, step.total_s, ttft99, tpot99, step


def _server_batch(w: Workload, n: int, instances, limit, rate_at, meets_at):
    """Mean sequences in flight per instance (``b``) and whether the deployment carries the load.

    The steady state is parametrized by ``b``: ``rate_at(b)`` (requests/s per instance) rises with ``b`` (a
    step grows slower than the batch it serves), so a given ``rate`` is held at the one ``b`` with
    ``instances x rate_at(b) = rate``, found by bisection on ``[0, limit]`` -- the deployment carries it only
    if ``rate_at(limit)`` reaches it. Without a rate (MLPerf's Server rule), ``b`` is the largest in
    ``[0, limit]`` whose p99 TTFT and TPOT meet the SLOs (``meets_at``: both grow with ``b``). ``_ITER``
    halvings either way, one step evaluation per halving and candidate (no inner fixed-point loop)."""
    limit = np.asarray(limit, dtype=float) + np.zeros(n)
    lo, hi = np.zeros(n), limit.copy()
    if w.rate is not None:
        target = w.rate / instances
        ok = rate_at(limit) >= target * (1 - 1e-9)
        for _ in range(_ITER):
            mid = (lo + hi) / 2
            below = rate_at(np.maximum(mid, 1e-9)) < target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.maximum(hi, 1e-9), ok
    good = meets_at(limit)
    for _ in range(_ITER):
        mid = (lo + hi) / 2
        m = meets_at(np.maximum(mid, 1e-9))
        lo, hi = np.where(m, mid, lo), np.where(m, hi, mid)
    return np.where(good, limit, np.maximum(lo, 1e-9)), np.ones(n, dtype=bool)


def _meets(w: Workload, ttft99, tpot99):
    ok = np.isfinite(ttft99) & np.isfinite(tpot99)
    if w.ttft_slo_s is not None:
        ok &= ttft99 <= w.ttft_slo_s * (1 + 1e-9)
    if w.tpot_slo_s is not None:
        ok &= tpot99 <= w.tpot_slo_s * (1 + 1e-9)
    return ok


def _disaggregated(w: Workload, d: Deployments) -> ServeResults:
    i, o, L = w.input_len, w.output_len, w.model.num_layers
    tpp, tpd, epd = d.prefill_tp, d.decode_tp, d.decode_ep
    epp = np.minimum(epd, tpp) if d.prefill_ep is None else d.prefill_ep
    n_p, n_d = d.prefill_gpus // instance_gpus(tpp, epp), d.decode_gpus // instance_gpus(tpd, epd)
    # prefill: one prompt for TTFT; a batch of prompts filling the workspace for throughput
    single = w.prefill(tpp, epp)
    # attention data-parallel groups (ep > tp) each fill their own workspace
    nreq = max(1.0, np.floor(w.params.workspace_tokens / i)) * attention_dp(tpp, epp)
    batched = w.prefill(tpp, epp, num_requests=nreq)
    _, _, fits_p = _capacity(w, tpp, epp)
    # KV transfer of one request: each prefill rank sends its share over its own link
    bytes_req = w.kv_bytes_per_token * i
    xfer = np.zeros(len(d))
    links = np.asarray(d.kv_link, dtype=object)
    wd = w.decode_side()
    for link in sorted(set(links[d.disagg].tolist())):
        sel = d.disagg & (links == link)
        t = kv_transfer_time(w.cluster, link, bytes_req / tpp, w.params)
        if wd is not w:  # two clusters: the slower end of the link (each decode rank receives its share)
            t = np.maximum(t, kv_transfer_time(wd.cluster, link, bytes_req / tpd, w.params))
        xfer = np.where(sel, t, xfer)
    exposed = exposed_transfer(xfer, single.total_s, L, w.kv_streamed)
    prefill_rate = n_p * np.minimum(nreq / batched.total_s, 1.0 / np.maximum(xfer, 1e-12))  # requests/s
    link_bound = xfer > single.total_s
    # decode pool (on its own cluster when it has one)
    cache, max_conc, fits_d = _capacity(wd, tpd, epd)
    limit = _batch_limit(w, d, max_conc, attention_dp(tpd, epd))
    if w.scenario == "server":
        batch, tps, ttft, tpot, ttft99, tpot99 = _server_disagg(wd, d, n_p, n_d, single, exposed, prefill_rate,
                                                                limit)
        step = _pure_step(wd, tpd, epd, batch)
    else:
        def ok_fn(b):
            s = _pure_step(wd, tpd, epd, b).total_s
            return s <= w.tpot_slo_s if w.tpot_slo_s is not None else np.ones(s.shape, dtype=bool)

        auto = d.batch <= 0
        batch = np.where(auto, _largest(ok_fn, np.ones(len(d)), limit) if np.any(auto) else limit, limit)
        step = _pure_step(wd, tpd, epd, batch)
        tpot = step.total_s
        decode_tps = n_d * batch / tpot
        tps = np.minimum(prefill_rate * o, decode_tps)
        ttft = single.total_s + exposed
        ttft99, tpot99 = ttft, tpot
    fits = fits_p & fits_d
    meets = _meets(w, ttft99, tpot99) & fits & (batch <= np.maximum(max_conc, 0))
    pbound = np.where(link_bound, "link", np.where(single.compute_s >= single.memory_s, "compute", "memory"))
    dbound = np.where(prefill_rate * o < n_d * batch / step.total_s, "prefill_pool", step.bound)
    need = prefill_rate / np.maximum(n_p, 1) * bytes_req / tpp * w.cluster.gpus_per_node
    gpus = d.prefill_gpus + d.decode_gpus
    return _result(len(d), output_tokens_per_s=tps, output_tokens_per_s_per_gpu=tps / gpus, ttft_s=ttft,
                   tpot_s=tpot, ttft_p99_s=ttft99, tpot_p99_s=tpot99, batch=batch, kv_cache_bytes_per_gpu=cache,
                   max_concurrency=max_conc * n_d, fits=fits, meets_slo=meets, prefill_bound=pbound,
                   decode_bound=dbound, kv_transfer_s=xfer, kv_transfer_exposed_s=exposed, kv_transfer_tier=links,
                   kv_bandwidth_needed_per_prefill_node_bytes_per_s=need,
                   kv_link_bytes_per_s_per_gpu=(bytes_req / tpp) / np.maximum(xfer, 1e-12), num_gpus=gpus)


def _server_disagg(w, d, n_p, n_d, single, exposed, prefill_rate, limit):
    o = w.output_len
    tpd, epd = d.decode_tp, d.decode_ep
    # each prefill instance serves lam / n_p requests at n_p / prefill_rate seconds each
    service = n_p / np.maximum(prefill_rate, 1e-12)

    def at_batch(b):
        s = _pure_step(w, tpd, epd, b).total_s
        lam = n_d * b / (o * s)  # requests/s of the deployment (Little's law on the decode pool)
        tpot99 = _pure_step(w, tpd, epd, b + Z99 * np.sqrt(b)).total_s
        wait, wait99 = _queue_wait(lam / n_p, service)
        return lam, s, single.total_s + exposed + wait, single.total_s + exposed + wait99, tpot99

    b, ok = _server_batch(w, len(d), n_d, limit, lambda b: at_batch(b)[0] / n_d,
                          lambda b: _meets(w, *at_batch(b)[3:]))
    lam, s, ttft, ttft99, tpot99 = at_batch(b)
    ok &= lam < prefill_rate
    return b, np.where(ok, (lam if w.rate is None else w.rate) * o, 0.0), ttft, s, ttft99, tpot99


_COLUMN_TYPES = {"fits": bool, "meets_slo": bool, "prefill_bound": object, "decode_bound": object,
                 "kv_transfer_tier": object}
"""The :class:`~tierwise.serve.records.ServeResults` columns that are not floats."""


def _result(n: int, **columns) -> ServeResults:
    """The :class:`~tierwise.serve.records.ServeResults` of ``n`` deployments from its ``columns`` (each a
    scalar or an array of ``n``), each broadcast to ``n`` entries of its type (float unless
    :data:`_COLUMN_TYPES` says otherwise)."""
    return ServeResults(**{k: np.broadcast_to(np.asarray(v, dtype=_COLUMN_TYPES.get(k, float)), (n,)).copy()
                           for k, v in columns.items()})
