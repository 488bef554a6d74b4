"""``serve --simulate``: requests through an iteration-level event loop, each iteration priced by the closed
form's step functions (:func:`tierwise.serve.phases.decode_token_time`, :func:`tierwise.serve.phases.prefill_time`).

The loop is the scheduler of vLLM / Sarathi-Serve (Agrawal et al., OSDI 2024, sec. 4) at the level of iterations,
as Vidur (Agrawal et al., MLSys 2024) and Splitwise-sim simulate it:

* **Continuous batching with a token budget**: each iteration decodes one token of every running sequence and
  fills the rest of the budget (``token_budget``, vLLM's ``max_num_batched_tokens``; default the engine
  workspace, 8,192) with prompt chunks of admitted requests in arrival order (Sarathi-style chunked prefill); a
  request's first token comes at the end of the iteration that finishes its prompt.
* **KV-cache admission and preemption**: a request is admitted when its prompt fits the cache (paged: the cache
  grows a token per sequence per iteration) and the batch is under ``max_batch``; when the growing cache no
  longer fits, the most recently admitted sequence is preempted (vLLM's policy): ``recompute`` sends it back to
  the queue's head to prefill its prompt and the tokens it had made again; ``swap`` copies its KV to host memory
  over the host tier (PCIe / C2C, ``--kv-link host``'s rate) and back when it resumes.
* **Prefix caching**: a hit rate ``h`` removes that share of each prompt's prefill work (its KV still occupies
  the cache). With ``prefix_tier`` ``host`` the cached prefixes live in host memory (KV offload, LMCache and
  Mooncake Store style) and each hit's KV is loaded back over the host tier (PCIe / C2C,
  :func:`tierwise.serve.transfer.kv_transfer_time` ``host``) before the request's prompt runs, serially (an
  upper bound: LMCache overlaps the load with the compute layer by layer).
* **P/D disaggregation**: prompts are prefilled on the prefill pool (FIFO, one prompt per instance at a time),
  their KV sent over the tier joining the pools (:func:`tierwise.serve.transfer.kv_transfer_time`, the exposed
  part when streamed), then decoded on the decode pool with no prompt chunks.
* Requests are routed to instances round robin; each instance runs its own loop.

Speed: the step time is tabulated once over the batch (every integer to ``max_batch``), the prompt tokens in the
step (a geometric grid to the budget, linear between) and the mean context (a geometric grid, as a correction
to the step at the workload's mean context); runs of iterations with no event between them (no arrival that can
be admitted, no sequence finishing, no preemption) advance in one stride at their mean context.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from tierwise.errors import ScenarioError
from tierwise.limits import check_float, check_int
from tierwise.serve.api import serve_estimate, workload_of
from tierwise.serve.engine import Deployments, Workload, _capacity
from tierwise.serve.kv import kv_fraction_per_gpu, mtp_kv_factor
from tierwise.serve.phases import decode_token_time, prefill_time
from tierwise.serve.trace import Arrivals, read_trace, synthetic_arrivals
from tierwise.serve.transfer import exposed_transfer, kv_transfer_time

__all__ = ["SimOptions", "SimRequest", "StepTable", "simulate", "simulation_block", "check_request", "PREEMPTION",
           "ARRIVALS", "PREFIX_TIERS"]

PREEMPTION = ("recompute", "swap")


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """The scheduler's settings for one simulation."""

    token_budget: int
    max_batch: int
    preemption: str = "recompute"
    prefix_hit_rate: float = 0.0
    prefix_tier: str = "hbm"
    """Where prefix-cache hits live: ``hbm`` (free to reuse) or ``host`` (offloaded to host memory, LMCache /
    Mooncake style: each hit's KV is loaded back over the host tier before its prompt's remainder runs)."""


class StepTable:
    """Step time of one instance over (decode sequences ``B``, prompt tokens ``P``, mean context ``c``)
    (module docstring): ``time(B, P, c) = T[B](P) + C[B](c) - C[B](c_ref)``."""

    def __init__(self, w: Workload, tp: int, ep: int, max_batch: int, budget: int, max_context: float):
        self.b = np.arange(max_batch + 1, dtype=float)
        self.p = np.unique(np.concatenate([[0.0], np.geomspace(1.0, max(budget, 2), 40)]))
        self.c = np.geomspace(1.0, max(max_context, 2.0), 24)
        self.c_ref = float(w.mean_context)
        bb, pp = np.meshgrid(self.b, self.p, indexing="ij")
        self.t = self._step(w, tp, ep, bb, pp, self.c_ref, w.input_len)
        self.t[0, 0] = 0.0
        bc, cc = np.meshgrid(self.b, self.c, indexing="ij")
        self.corr = self._step(w, tp, ep, bc, 0.0, cc, 1.0)
        self.corr_ref = np.array([np.interp(self.c_ref, self.c, row) for row in self.corr])
        self._p = self.p.tolist()

    @staticmethod
    def _step(w, tp, ep, batch, prompt_tokens, context, prompt_context):
        # per output token of each sequence (with MTP a step of E tokens costs E iterations' time:
        # :func:`tierwise.serve.phases.decode_token_time`)
        return np.asarray(decode_token_time(w.setup, tp, ep, batch * w.beams, context, prefill_tokens=prompt_tokens,
                                            prefill_context=prompt_context).total_s, dtype=float)

    def time(self, b: int, p: float, c: float) -> float:
        """Seconds of an iteration of ``b`` decoding sequences at mean context ``c`` and ``p`` prompt tokens."""
        row = self.t[b]
        if p <= 0:
            base = row[0]
        else:
            j = min(bisect.bisect_right(self._p, p), len(self._p) - 1)
            p0, p1 = self._p[j - 1], self._p[j]
            f = min((p - p0) / (p1 - p0), 1.0)
            base = row[j - 1] + f * (row[j] - row[j - 1])
        if b == 0:
            return float(base)
        k = min(max(bisect.bisect_right(self.c, c), 1), len(self.c) - 1)
        c0, c1 = self.c[k - 1], self.c[k]
        f = min(max((c - c0) / (c1 - c0), 0.0), 1.0)
        corr = self.corr[b, k - 1] + f * (self.corr[b, k] - self.corr[b, k - 1])
        return float(max(base + corr - self.corr_ref[b], 1e-9))


class _Instance:
    """One instance's scheduler (module docstring). ``prefilled``: requests arrive with their prompt done
    elsewhere (a decode instance of a disaggregated deployment) and join the batch directly."""

    def __init__(self, table: StepTable, opts: SimOptions, cap_tokens: float, swap_s_per_token: float,
                 prefilled: bool):
        self.table, self.opts, self.cap = table, opts, cap_tokens
        self.swap_s_per_token, self.prefilled = swap_s_per_token, prefilled
        self.now, self.gstep, self.kv = 0.0, 0, 0.0
        self.waiting: deque = deque()   # request ids not admitted (preempted ones at the head)
        self.filling: deque = deque()   # [rid, prompt tokens left] admitted, prompt in progress
        self.heap: list = []            # (finish gstep, rid) of running sequences
        self.start: dict[int, int] = {}  # rid -> gstep it started decoding from (generated = gstep - start)
        self.ctx_sum = 0.0
        self.queue_t: list[float] = []
        self.queue_n: list[int] = []
        self.preemptions = 0
        self.rejected = 0
        self.swapped: set[int] = set()

    def run(self, ids, t_arr, inp, out, first, finish) -> None:
        """Simulate requests ``ids`` (arrival order) to completion; fills ``first`` and ``finish`` (seconds)."""
        self.inp, self.out, self.first, self.finish = inp, out, first, finish
        self.gen = np.zeros(len(inp), dtype=np.int64)  # tokens generated before a preemption
        n, i = len(ids), 0
        while i < n or self.waiting or self.filling or self.start:
            while i < n and t_arr[ids[i]] <= self.now:
                self.waiting.append(int(ids[i]))
                i += 1
            self._admit()
            self.queue_t.append(self.now)
            self.queue_n.append(len(self.waiting) + len(self.filling))
            if not self.start and not self.filling:
                if i < n:
                    self.now = max(self.now, float(t_arr[ids[i]]))
                    continue
                break  # nothing admissible and nothing arriving: the cache cannot hold the next request
            next_t = float(t_arr[ids[i]]) if i < n and self._could_admit() else math.inf
            self._iterate(next_t)

    def _could_admit(self) -> bool:
        return len(self.start) + len(self.filling) < self.opts.max_batch

    def _admit(self) -> None:
        while self.waiting and self._could_admit():
            rid = self.waiting[0]
            held = float(self.inp[rid] + self.gen[rid])
            if held + 1 > self.cap:  # longer than the whole cache: refused, as an engine refuses a prompt over
                self.waiting.popleft()  # its max_model_len
                self.rejected += 1
                continue
            if self.kv + held + 1 > self.cap:
                break
            self.waiting.popleft()
            self.kv += held
            if rid in self.swapped:
                self.swapped.discard(rid)
                self.now += held * self.swap_s_per_token
                self._join(rid, int(self.gen[rid]))
            elif self.prefilled:
                self.kv += 1
                self._join(rid, 1)
            else:
                hit = 0.0 if self.gen[rid] else held * self.opts.prefix_hit_rate
                if self.opts.prefix_tier == "host":
                    self.now += hit * self.swap_s_per_token  # the cached KV loaded back from host memory
                self.filling.append([rid, max(held - hit, 1.0)])

    def _join(self, rid: int, generated: int) -> None:
        self.start[rid] = self.gstep - generated
        self.ctx_sum += float(self.inp[rid] + generated)
        heapq.heappush(self.heap, (self.start[rid] + int(self.out[rid]), rid))

    def _iterate(self, next_arrival: float) -> None:
        """One iteration with prompt chunks, or a stride of pure decode iterations up to the next event."""
        b = len(self.start)
        chunks, p = self._chunks(self.opts.token_budget - b)
        c = self.ctx_sum / b if b else 0.0
        k = 1
        if p == 0:
            k = self._stride(b, c, next_arrival)
        dt = self.table.time(b, p, c + (k - 1) / 2.0)
        self.now += k * dt
        self.gstep += k
        self.kv += k * b
        self.ctx_sum += k * b
        for rid in chunks:
            self.first[rid] = self.now if math.isnan(self.first[rid]) else self.first[rid]
            self.kv += 1
            self._join(rid, int(self.gen[rid]) + 1)
        self._retire()
        self._preempt()

    def _chunks(self, room: int):
        """Prompt chunks of this iteration: (requests whose prompt completes, prompt tokens)."""
        done, p = [], 0.0
        while self.filling and room - p >= 1:
            item = self.filling[0]
            take = min(item[1], room - p)
            item[1] -= take
            p += take
            if item[1] <= 0:
                self.filling.popleft()
                done.append(item[0])
        return done, p

    def _stride(self, b: int, c: float, next_arrival: float) -> int:
        """Iterations that can run with nothing changing: up to the next finish, arrival or cache overflow."""
        k = self.heap[0][0] - self.gstep if self.heap else 1
        if b:
            k = min(k, max(int((self.cap - self.kv) // b), 1))
        if math.isfinite(next_arrival):
            dt = self.table.time(b, 0.0, c)
            k = min(k, max(int(math.ceil((next_arrival - self.now) / dt)), 1))
        return max(int(k), 1)

    def _retire(self) -> None:
        while self.heap and self.heap[0][0] <= self.gstep:
            g, rid = heapq.heappop(self.heap)
            if self.start.get(rid) is None or self.start[rid] + int(self.out[rid]) != g:
                continue  # a stale entry of a preempted sequence
            del self.start[rid]
            self.finish[rid] = self.now
            self.kv -= float(self.inp[rid] + self.out[rid])
            self.ctx_sum -= float(self.inp[rid] + self.out[rid])

    def _preempt(self) -> None:
        while self.kv > self.cap and len(self.start) > 1:
            rid = max(self.start, key=self.start.__getitem__)  # the latest to start decoding
            generated = self.gstep - self.start.pop(rid)
            held = float(self.inp[rid] + generated)
            self.kv -= held
            self.ctx_sum -= held
            self.gen[rid] = generated
            self.preemptions += 1
            if self.opts.preemption == "swap":
                self.swapped.add(rid)
                self.now += held * self.swap_s_per_token
            self.waiting.appendleft(rid)


def _percentiles(x: np.ndarray) -> dict:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def _queue_series(instances, points: int = 400) -> dict:
    """Requests waiting for their prefill over time (not admitted, or admitted with their prompt not yet done),
    all instances summed, on ``points`` times."""
    end = max((inst.queue_t[-1] for inst in instances if inst.queue_t), default=0.0)
    grid = np.linspace(0.0, end, points)
    total = np.zeros(points)
    for inst in instances:
        if inst.queue_t:
            idx = np.searchsorted(np.asarray(inst.queue_t), grid, side="right") - 1
            total += np.where(idx >= 0, np.asarray(inst.queue_n)[np.maximum(idx, 0)], 0)
    return {"time_s": grid.tolist(), "waiting": total.tolist(), "max": float(total.max(initial=0.0)),
            "mean": float(total.mean()) if points else 0.0}


def _swap_s_per_token(w: Workload, tp: int) -> float:
    """Seconds to move one token's KV of one rank to host memory or back, on the host tier (PCIe / C2C)."""
    per_token = w.kv_bytes_per_token * float(kv_fraction_per_gpu(w.model, tp))
    big = 1e6
    return float(kv_transfer_time(w.cluster, "host", per_token * big, w.params)) / big


def _decode_pool(w: Workload, arr: Arrivals, ready, tp: int, ep: int, n_inst: int, opts: SimOptions,
                 prefilled: bool):
    """Run ``n_inst`` instances (round robin) on requests ready at ``ready``; (first, finish, instances)."""
    n = len(arr)
    cache, _, _ = _capacity(w, np.array([tp]), np.array([ep]))
    cap = float(cache[0]) / (w.kv_bytes_per_token * float(kv_fraction_per_gpu(w.model, tp)) * w.beams
                             * mtp_kv_factor(w.model, w.params.mtp))
    max_batch = int(max(1, min(opts.max_batch, cap)))
    table = StepTable(w, tp, ep, max_batch, opts.token_budget,
                      float(np.max(arr.input_len) + np.max(arr.output_len)))
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    order = np.argsort(ready, kind="stable")
    insts = []
    for k in range(n_inst):
        inst = _Instance(table, dataclasses.replace(opts, max_batch=max_batch), cap, _swap_s_per_token(w, tp),
                         prefilled)
        inst.run(order[k::n_inst], ready, arr.input_len, arr.output_len, first, finish)
        insts.append(inst)
    return first, finish, insts


def _prefill_pool(w: Workload, arr: Arrivals, tp: int, ep: int, n_inst: int, link: str, streamed: bool):
    """FIFO over ``n_inst`` prefill instances, one prompt at a time each, then the exposed KV transfer:
    the time each request's first token and KV reach the decode pool."""
    lengths, inverse = np.unique(arr.input_len, return_inverse=True)
    pf = prefill_time(w.setup, tp, ep, lengths.astype(float)).total_s
    xfer = kv_transfer_time(w.cluster, link, w.kv_bytes_per_token * lengths / tp, w.params)
    exposed = exposed_transfer(xfer, pf, w.model.num_layers, streamed)
    service, extra = np.asarray(pf)[inverse].tolist(), np.asarray(exposed)[inverse].tolist()
    free = [0.0] * n_inst
    done = np.empty(len(arr))
    for j, t in enumerate(arr.time_s.tolist()):
        start = max(t, heapq.heappop(free))
        end = start + service[j]
        heapq.heappush(free, end)
        done[j] = end + extra[j]
    return done


def simulate(w: Workload, d: Deployments, arr: Arrivals, opts: SimOptions) -> dict:
    """Requests ``arr`` through deployment ``d`` (one entry) under workload ``w``: the ``simulation`` block of
    ``serve --simulate --json`` (module docstring)."""
    tp, ep = int(d.decode_tp[0]), int(d.decode_ep[0])
    if bool(d.disagg[0]):
        ptp = int(d.prefill_tp[0])
        ready = _prefill_pool(w, arr, ptp, min(ep, ptp), int(d.prefill_gpus[0]) // ptp, str(d.kv_link[0]),
                              w.kv_streamed)
        _, finish, insts = _decode_pool(w.decode_side(), arr, ready, tp, ep, int(d.decode_gpus[0]) // tp, opts,
                                        True)
        first = ready
    else:
        first, finish, insts = _decode_pool(w, arr, arr.time_s, tp, ep, int(d.decode_gpus[0]) // tp, opts, False)
    return _summary(w, arr, first, finish, insts)


def _summary(w: Workload, arr: Arrivals, first, finish, insts) -> dict:
    ttft = first - arr.time_s
    tpot = np.where(arr.output_len > 1, (finish - first) / np.maximum(arr.output_len - 1, 1), np.nan)
    e2e = finish - arr.time_s
    served = np.isfinite(finish)
    span = float(np.nanmax(finish) - arr.time_s[0]) if served.any() else 0.0
    good = served & (ttft <= (w.ttft_slo_s or np.inf)) & (np.nan_to_num(tpot) <= (w.tpot_slo_s or np.inf))
    out_tokens = float(arr.output_len[served].sum())
    return {
        "arrivals": arr.source, "requests": len(arr), "served": int(served.sum()),
        "duration_s": span,
        "offered_rate_per_s": float(len(arr) / max(arr.time_s[-1], 1e-12)) if len(arr) > 1 else None,
        "output_tokens_per_s": out_tokens / span if span > 0 else 0.0,
        "ttft_s": _percentiles(ttft), "tpot_s": _percentiles(tpot), "e2e_s": _percentiles(e2e),
        "slo": {"ttft_s": w.ttft_slo_s, "tpot_s": w.tpot_slo_s},
        "goodput_requests_per_s": float(good.sum()) / span if span > 0 else 0.0,
        "slo_attainment": float(good.mean()),
        "preemptions": int(sum(i.preemptions for i in insts)),
        "rejected": int(sum(i.rejected for i in insts)),
        "queue": _queue_series(insts),
    }


@dataclass(frozen=True, kw_only=True)
class SimRequest:
    """What ``serve --simulate`` was asked: the arrivals and the scheduler's settings (None: defaults)."""

    requests: int = 10_000
    arrivals: str = "poisson"
    """``poisson`` or ``gamma`` (bursty, coefficient of variation ``cv``); a ``trace`` file overrides both."""
    cv: float = 4.0
    trace: str | None = None
    seed: int = 0
    token_budget: int | None = None
    preemption: str = "recompute"
    prefix_hit_rate: float = 0.0
    prefix_tier: str = "hbm"


ARRIVALS = ("poisson", "gamma")
PREFIX_TIERS = ("hbm", "host")


def check_request(sim: SimRequest) -> None:
    """One clear line for a bad simulation setting."""
    if sim.arrivals not in ARRIVALS:
        raise ScenarioError(f"--arrivals {sim.arrivals!r}; use one of {', '.join(ARRIVALS)} (or --trace FILE)")
    if sim.prefix_tier not in PREFIX_TIERS:
        raise ScenarioError(f"--prefix-tier {sim.prefix_tier!r}; use one of {', '.join(PREFIX_TIERS)}")
    if sim.preemption not in PREEMPTION:
        raise ScenarioError(f"--preemption {sim.preemption!r}; use one of {', '.join(PREEMPTION)}")
    check_int(sim.requests, "--requests", maximum=10_000_000, error=ScenarioError)
    check_int(sim.seed, "--seed", minimum=0, maximum=2**32 - 1, error=ScenarioError)
    if sim.token_budget is not None:
        check_int(sim.token_budget, "--token-budget", maximum=10_000_000, error=ScenarioError)
    check_float(sim.cv, "--cv", minimum=0.0, min_open=True, maximum=100.0, error=ScenarioError,
                hint=" (inter-arrival coefficient of variation; 1 is Poisson)")
    check_float(sim.prefix_hit_rate, "--prefix-hit-rate", minimum=0.0, maximum=0.99, error=ScenarioError,
                hint=" (the share of each prompt found in the prefix cache)")


def simulation_block(cfg, sim: SimRequest) -> dict:
    """``serve --simulate``: the closed-form document of ``cfg`` at the simulated arrival rate, with the
    ``simulation`` block beside it (and ``closed_form_vs_simulation``: mean TPOT, TTFT and tokens/s of each)."""
    check_request(sim)
    if sim.trace is not None:
        arr = read_trace(sim.trace)
        span = float(arr.time_s[-1])
        rate = len(arr) / span if span > 0 else cfg.rate
    else:
        if cfg.rate is None:
            raise ScenarioError("serve --simulate needs --rate R (requests/s) or --trace FILE")
        rate = cfg.rate
        arr = synthetic_arrivals(sim.requests, rate, cfg.input_len, cfg.output_len,
                                 cv=1.0 if sim.arrivals == "poisson" else sim.cv, seed=sim.seed)
    cfg = dataclasses.replace(cfg, scenario="server", rate=rate)
    doc = serve_estimate(cfg)
    w, d, _ = workload_of(cfg)
    budget = sim.token_budget or w.params.workspace_tokens
    if sim.token_budget is None:
        doc["assumed"].append(f"token budget {budget} per iteration (TensorRT-LLM max_num_tokens default)")
    opts = SimOptions(token_budget=budget, max_batch=int(w.params.max_batch), preemption=sim.preemption,
                      prefix_hit_rate=sim.prefix_hit_rate, prefix_tier=sim.prefix_tier)
    block = simulate(w, d, arr, opts)
    block.update(token_budget=budget, preemption=sim.preemption, prefix_hit_rate=sim.prefix_hit_rate,
                 prefix_tier=sim.prefix_tier)
    doc["simulation"] = block
    doc["closed_form_vs_simulation"] = {
        "tpot_mean_s": [doc["tpot_s"], block["tpot_s"]["mean"]],
        "ttft_mean_s": [doc["ttft_s"], block["ttft_s"]["mean"]],
        "ttft_p99_s": [doc["ttft_p99_s"], block["ttft_s"]["p99"]],
        "output_tokens_per_s": [doc["output_tokens_per_s"], block["output_tokens_per_s"]],
    }
    return doc
