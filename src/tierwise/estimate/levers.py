"""Communication-reduction levers of data parallelism: what each changes in the step, by its method's own
statement. Convergence effects are **not** modelled; :data:`PUBLISHED` says what published work measured.

A lever rides into the step model as a compute parameter (the same way ``grad_bytes``, the gradient
reduction's dtype, always has): :func:`with_levers` returns the cluster with its ``compute`` block extended,
so ``estimate`` and the planner rank plans under the lever without a change to their signatures.

* **reduce dtype** ``fp32 | bf16 | fp8``: ``grad_bytes`` 4 / 2 / 1 bytes per gradient element on the wire.
* **PowerSGD rank r** (Vogels, Karimireddy & Jaggi, NeurIPS 2019, Algorithm 1): each weight matrix shard
  ``M`` (a x b) is sent as ``P`` (a x r) and ``Q`` (b x r): ``r (a + b)`` instead of ``a b`` elements
  (:func:`powersgd_factor`). Cost: ``P = M Q``, ``Q = M^T P`` and the decompression ``P Q^T`` are
  ``6 a b r`` FLOPs; with error feedback about 5 fp32 passes over the gradient (read M twice, the error
  read and written, the decompressed write): ``max(6 r N / peak, 20 N / hbm)`` seconds for N local params.
* **1-bit Adam** (Tang et al., ICML 2021, section 4): after the warm-up the momentum is sent as signs plus one
  scale per chunk: 1/8 byte per element instead of ``grad_bytes`` (factor ``0.125 / grad_bytes``); the
  error-compensated compression on the worker and again on the server side costs about 32 bytes of HBM
  traffic per parameter. The uncompressed warm-up (15-25% of steps in the paper) is not counted.
* **local SGD / DiLoCo outer sync every H steps** (Lin et al., ICLR 2020 "Don't use large mini-batches, use
  local SGD"; Douillard et al. 2023 "DiLoCo", section 2): replicas step alone for H steps and then average;
  the data-parallel traffic of a step is that of one synchronisation divided by H, and it is exposed (the
  outer step waits for it).
* **asynchronous DP with staleness s** (stale-synchronous parallel, Ho et al., NeurIPS 2013): a step's
  gradient reduction may finish during the next ``s`` steps' compute, so its exposed time falls by up to
  ``s`` times the step's compute (bytes unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tierwise.errors import SpecError
from tierwise.parallel.dp import powersgd_factor

__all__ = ["Levers", "with_levers", "powersgd_factor", "REDUCE_DTYPES", "PUBLISHED", "CONVERGENCE_NOTE"]

REDUCE_DTYPES = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0}
CONVERGENCE_NOTE = ("communication levers change bytes and exposed time only; their effect on convergence "
                    "(loss per step) is not modelled")
PUBLISHED = {
    "reduce_dtype": "bf16 gradient all-reduce: Megatron-Core and FSDP keep fp32 by default for accuracy; "
                    "fp8 gradient communication in FP8-LM (Peng et al. 2023, section 4) matched bf16 loss on "
                    "GPT-7B..175B",
    "powersgd_rank": "PowerSGD (Vogels et al. 2019, section 5): low ranks (2-4) with error feedback reached "
                     "uncompressed SGD's test accuracy on ResNet-18/CIFAR-10 and an LSTM on WikiText-2; not "
                     "shown for LLM pre-training",
    "onebit": "1-bit Adam (Tang et al. 2021, abstract): Adam's convergence on BERT-Large pre-training after an "
              "uncompressed warm-up, up to 5x less communication volume and 3.3x higher throughput",
    "sync_every": "DiLoCo (Douillard et al. 2023, abstract): 8 workers with H=500 inner steps performed as well "
                  "as fully synchronous optimisation on C4 while communicating 500 times less",
    "async_staleness": "stale-synchronous parallel (Ho et al. 2013): bounded staleness converges, slower per "
                       "step as staleness grows; PipeDream-2BW (Narayanan et al. 2021) uses staleness 1",
}


@dataclass(frozen=True, kw_only=True)
class Levers:
    """Data-parallel communication levers (module docstring); the defaults change nothing."""

    reduce_dtype: str | None = None
    """fp32 | bf16 | fp8 for every plan, in place of the plan's ``grad_reduce_dtype`` (stated, or its
    framework's default); None keeps the plan's."""
    powersgd_rank: int = 0
    """PowerSGD rank r (0 = off)."""
    onebit: bool = False
    """1-bit Adam-style sign compression of the reduced tensor."""
    sync_every: int = 1
    """Local SGD / DiLoCo: average the replicas every H steps (1 = every step)."""
    async_staleness: int = 0
    """Asynchronous DP: gradients may be up to s steps stale (0 = synchronous)."""

    def __post_init__(self) -> None:
        if self.reduce_dtype is not None and self.reduce_dtype not in REDUCE_DTYPES:
            raise SpecError(f"--reduce-dtype {self.reduce_dtype!r} is unknown; choose one of "
                            f"{', '.join(REDUCE_DTYPES)}")
        if self.powersgd_rank and self.onebit:
            raise SpecError("--powersgd-rank and --onebit both compress the gradients; choose one")

    @property
    def active(self) -> bool:
        return self != Levers()

    def params(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.reduce_dtype is not None:
            # the what-if replaces every plan's gradient-reduce dtype, stated or the framework's default
            # (step._estimate reads grad_bytes_lever before the plan's grad_reduce_dtype)
            out["grad_bytes"] = out["grad_bytes_lever"] = REDUCE_DTYPES[self.reduce_dtype]
        if self.powersgd_rank:
            out["dp_powersgd_rank"] = float(self.powersgd_rank)
        if self.onebit:
            out["dp_onebit"] = 1.0
        if self.sync_every > 1:
            out["dp_sync_every"] = float(self.sync_every)
        if self.async_staleness:
            out["dp_async_staleness"] = float(self.async_staleness)
        return out

    def describe(self) -> dict:
        used = {k: v for k, v in (("reduce_dtype", self.reduce_dtype), ("powersgd_rank", self.powersgd_rank),
                                  ("onebit", self.onebit), ("sync_every", self.sync_every if self.sync_every > 1
                                                            else None),
                                  ("async_staleness", self.async_staleness)) if v}
        return {"levers": used, "convergence": CONVERGENCE_NOTE,
                "published": {k: PUBLISHED[k] for k in used}}


def with_levers(cluster, levers: Levers | None):
    """The cluster with the levers' parameters in its ``compute`` block (the cluster itself when none)."""
    if levers is None or not levers.active:
        return cluster
    return replace(cluster, compute={**dict(cluster.compute), **levers.params()})
