"""Expert load imbalance: how many routed tokens the busiest EP rank receives over the mean, from the router's
skew, the experts each rank holds, the batch's sampling noise and EPLB's redundant experts.

Every EP rank waits at the combine all-to-all for the busiest one, so this ratio scales the routed-expert GEMMs
and the dispatch / combine (:func:`tierwise.parallel.ep.moe_imbalance`, and serving's decode and prefill steps).

The model (a derivation; its one input is a measurement):

* **Tokens per expert.** A micro-batch routes ``N`` tokens through the EP group, ``k`` copies each, over ``E``
  experts. Expert ``j`` has a popularity ``x_j`` (mean 1, coefficient of variation ``c``: the router's *skew*)
  and receives a multinomial share of the ``N k`` copies, so its load has mean ``N k x_j / E`` and, given
  ``x_j``, Poisson-like variance; relative to the mean load the variance is ``c^2 + E / (N k)`` (skew plus
  sampling).
* **Tokens per rank, default placement.** A rank holds ``g = E / ep`` experts by index. Its load has mean ``g``
  and relative standard deviation ``sqrt(c^2 + ep / (N k))``: the popularity's part is taken at the rank level,
  as if the ``g`` experts a rank holds rose and fell together, so it does not shrink with ``g``. This is the
  conservative-on-``g`` reading of the one measurement we hold. Had the experts on a rank been independent, the
  skew would shrink as ``c^2 / g``, but then that measurement (2.1 at ``g = 16``) would imply a per-expert
  popularity CV of 3.1, which contradicts the near-uniform expert shares Mixtral's authors measured per layer
  (Jiang et al., *Mixtral of Experts*, arXiv:2401.04088, sec. 5, fig. 7) and would put every 8-expert layer at
  the physical cap; so the rank-level reading is the one used. The busiest of ``ep`` ranks sits at the expected maximum of
  ``ep`` standard normals, ``z(ep) = Phi^-1((ep - 0.375) / (ep + 0.25))`` (Blom's approximation of normal order
  statistics, G. Blom, *Statistical Estimates and Transformed Beta-Variables*, 1958), so
  ``I = 1 + z(ep) sqrt(c^2 + ep / (N k))``, capped by the most a rank can receive: every token's copies that
  land on its ``min(g, k)`` experts, ``ep min(g, k) / k`` times the mean. ``I = 1`` for ``ep = 1``.
* **The router's skew** ``c``: ``aux-loss`` routers (the model's ``moe.balance``) take it from the one
  measurement of a trained router's dropless imbalance we hold, ``moe_load_imbalance`` = 2.1: the busiest EP
  rank over the mean on the Megatron MoE Model Zoo's Qwen3-235B-A22B runs (128 experts, top-8, EP 8, 4,096
  routed tokens per rank: TP 4 with sequence parallelism over 16k tokens per CP rank; benchmarks/
  moe_imbalance.py), solved for ``c`` through the formula above: ``c^2 = ((I0 - 1) / z(ep0))^2 - ep0 / (N0 k0)``
  (``c`` = 0.77). The model therefore gives back exactly 2.1 on that layout. ``aux-free`` routers (DeepSeek-V3's
  auxiliary-loss-free balancing, arXiv:2412.19437 sec. 2.1.2: a per-expert bias nudged every step toward equal
  loads) have ``c = 0``: only the sampling noise is left (1.01 at the published EP 64 with 4,096 tokens per rank).
* **EPLB** (DeepSeek's EPLB repository, ``eplb.py``: ``replicate_experts`` then ``balanced_packing``; report sec.
  3.4.1-3.4.2): ``R`` redundant slots go one at a time to the expert with the most load per copy, then the
  ``E + R`` replicas are packed heaviest first onto the least-loaded rank that has a free slot (``(E + R) / ep``
  slots each). It balances the experts' popularity it measured: the persistent part is what the packing leaves
  (:func:`eplb_packed_ratio`, on the expected order statistics of the popularity, ``x_(j) = 1 + c z_j`` at
  Blom's positions, clipped to ``[0, E / k]``); the sampling noise stays: ``I = packed + z(ep) sqrt(ep / (N k))``.
  Assumed: the skew is the experts' lasting popularity (what EPLB's statistics see), not per-batch.
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist

import numpy as np

_PPF = np.vectorize(NormalDist().inv_cdf, otypes=[float])
"""The standard normal's quantile function, elementwise (the standard library's, exact to double precision)."""

__all__ = ["REFERENCE", "expected_max_normal", "router_skew", "expert_load_imbalance", "eplb_packed_ratio",
           "model_skew", "serving_imbalance"]

REFERENCE = {"experts": 128, "top_k": 8, "ep": 8, "tokens_per_rank": 4096}
"""The layout ``moe_load_imbalance`` was measured on: the Megatron MoE Model Zoo's Qwen3-235B-A22B long-context
runs (best_practice/Qwen3/readme.md @c1ad0b5c: TP 4, EP 8, expert TP 1, MBS 1, 16,384 tokens per CP rank, so
4,096 routed tokens per rank under sequence parallelism)."""


def expected_max_normal(n) -> np.ndarray:
    """Expected largest of ``n`` independent standard normals, Blom's ``Phi^-1((n - 0.375) / (n + 0.25))``
    (0 for ``n <= 1``)."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    return np.where(n > 1.0, _PPF((n - 0.375) / (n + 0.25)), 0.0)


def router_skew(measured: float) -> float:
    """The popularity's coefficient of variation ``c`` that gives ``measured`` on :data:`REFERENCE` (module
    docstring): ``c^2 = ((I0 - 1) / z(ep0))^2 - ep0 / (N0 k0)``, at least 0."""
    E, k, ep, t = (REFERENCE[key] for key in ("experts", "top_k", "ep", "tokens_per_rank"))
    z = float(expected_max_normal(ep))
    c2 = ((float(measured) - 1.0) / z) ** 2 - ep / (ep * t * k)
    return float(np.sqrt(max(c2, 0.0)))


def model_skew(model, cparams) -> float:
    """``c`` of ``model``'s router: 0 under auxiliary-loss-free balancing, else from ``moe_load_imbalance``."""
    if model.moe is None or model.moe.balance == "aux-free":
        return 0.0
    return router_skew(cparams.get("moe_load_imbalance", 1.0))


def expert_load_imbalance(num_experts: int, top_k: int, ep, routed_tokens, *, skew: float,
                          redundant: int = 0) -> np.ndarray:
    """The busiest EP rank's routed tokens over the mean (module docstring), per element of ``ep`` and
    ``routed_tokens`` (tokens the whole EP group routes per micro-batch or step, before ``top_k``); ``redundant``
    EPLB slots per layer (0: default placement, no EPLB)."""
    E, k = float(num_experts), float(top_k)
    ep, n = np.broadcast_arrays(np.maximum(np.asarray(ep, dtype=float), 1.0),
                                np.maximum(np.asarray(routed_tokens, dtype=float), 1.0))
    z = expected_max_normal(ep)
    sampling = ep / (n * k)
    g = np.maximum(E / ep, 1.0)
    cap = np.maximum(ep * np.minimum(g, k) / k, 1.0)
    if redundant > 0:
        packed = np.ones(ep.shape)
        for value in np.unique(ep):
            packed[ep == value] = eplb_packed_ratio(int(num_experts), int(top_k), int(redundant), int(value),
                                                    round(float(skew), 9))
        value = packed + z * np.sqrt(sampling)
    else:
        value = 1.0 + z * np.sqrt(skew * skew + sampling)
    return np.where(ep <= 1.0, 1.0, np.clip(value, 1.0, cap))


def serving_imbalance(model, cparams, ep, tokens, redundant: int = 0) -> np.ndarray:
    """:func:`expert_load_imbalance` of a serving step: the instance's ``tokens`` all pass its EP group of ``ep``
    ranks, with ``redundant`` EPLB slots per layer (``--redundant-experts``; 0: default placement)."""
    ep = np.asarray(ep, dtype=float)
    if model.moe is None:
        return np.ones(np.broadcast(ep, np.asarray(tokens)).shape)
    return expert_load_imbalance(model.moe.num_experts, model.moe.top_k, ep, tokens,
                                 skew=model_skew(model, cparams), redundant=int(redundant))


@lru_cache(maxsize=512)
def eplb_packed_ratio(num_experts: int, top_k: int, redundant: int, ep: int, skew: float) -> float:
    """Busiest rank's expected load over the mean after EPLB's replication and packing (DeepSeek EPLB
    ``replicate_experts``: each redundant slot to the expert with the most load per copy; ``balanced_packing``:
    replicas heaviest first onto the least-loaded rank with a free slot), on the popularity's expected order
    statistics ``1 + c z_j`` (Blom's positions) clipped to ``[0, E / k]`` and rescaled to mean 1."""
    E = num_experts
    pos = (np.arange(1, E + 1) - 0.375) / (E + 0.25)
    x = np.clip(1.0 + skew * _PPF(1.0 - pos), 0.0, None)
    x = np.minimum(x / max(x.mean(), 1e-12), E / top_k)
    x = x / max(x.mean(), 1e-12)
    copies = np.ones(E)
    for _ in range(redundant):
        copies[int(np.argmax(x / copies))] += 1.0
    items = np.sort(np.repeat(x / copies, copies.astype(int)))[::-1]
    slots = -(-(E + redundant) // ep)
    loads, counts = np.zeros(ep), np.zeros(ep)
    for w in items:
        r = int(np.argmin(np.where(counts < slots, loads, np.inf)))
        loads[r] += w
        counts[r] += 1
    return float(loads.max() / (x.sum() / ep))
