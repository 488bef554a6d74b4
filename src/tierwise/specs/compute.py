"""Per-accelerator compute microarchitecture and microbenchmark figures (``catalog/compute.yaml``).

The estimator's compute roofline (:mod:`tierwise.estimate.step`) reads three things per accelerator:

* the **large-GEMM fraction** of the dense BF16 peak a measured cuBLAS/hipBLASLt GEMM reaches (maximum
  achievable matmul FLOPS), and the **streaming HBM fraction** of the datasheet bandwidth;
* the **special-function (MUFU) exp2 rate**, ``SMs x clock x ex2 per clock per SM`` (CUDA C++ Programming
  Guide, arithmetic instruction throughput table: 16 per SM per clock for exp2f on compute capability
  5.x-10.0; H100 SXM: 132 x 1.83 GHz x 16 = 3.87e12/s, the "3.9 TFLOPS of special functions" of
  FlashAttention-3, Shah et al. 2024 sec. 3; doubled on Blackwell Ultra);
* a **sustained-clock factor** for a part run below the board power its figures were measured at.

An accelerator without its own measurement uses another's fraction: its ``*_like`` entry, else the
catalog accelerator of the same generation and the same dense BF16 peak (the same die: the 500 W H100
96 GB of torchtitan uses the H100 SXM's), else the median of the measured fractions.
:func:`unmeasured` lists which accelerators do so and what they use (docs/compute.md).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from tierwise.errors import SpecError
from tierwise.specs import catalog
from tierwise.specs.accelerator import load_accelerator

__all__ = ["ComputeProfile", "compute_profile", "compute_catalog", "unmeasured", "attention_kernel_overlap",
           "attention_efficiency_family", "default_attention_kernel", "sdpa_backend",
           "attention_generation_factor", "attention_backward_generation_factor", "backward_matmul_ratio",
           "BENCHMARK_BACKWARD_FLOPS", "matmul_share", "measured_fraction", "check_kernel_generation",
           "ATTENTION_KERNELS", "clock_factor", "moe_kernels_per_layer",
           "moe_expert_launches", "grouped_gemm_efficiency"]

ATTENTION_KERNELS = ("flash2", "sdpa", "cudnn")
"""Attention kernel families (FlashAttention-2 / Triton, PyTorch SDPA, cuDNN / FlashAttention-3 class)."""


@functools.cache
def compute_catalog() -> dict[str, Any]:
    """The raw ``catalog/compute.yaml`` (cached; read-only)."""
    text = resources.files("tierwise.specs").joinpath("catalog", "compute.yaml").read_text()
    return catalog.load_yaml_text(text, "catalog/compute.yaml")


@dataclass(frozen=True)
class ComputeProfile:
    """What the compute roofline needs of one accelerator (see the module docstring)."""

    sms: int
    clock_hz: float
    exp2_per_clock_per_sm: int
    gemm_fraction: float
    gemm_from: str
    """``measured`` or where the fraction comes from (``as h100-sxm``, ``median of measured``)."""
    hbm_fraction: float
    hbm_from: str
    clock_factor: float
    """Sustained clock under a power cap below ``rated_power_w`` over the rated clock (1 when not capped)."""

    @property
    def exp2_per_s(self) -> float:
        """Special-function exp2 results per second: SMs x sustained clock x ex2 per clock per SM (infinite,
        never binding, when the SM count is unknown)."""
        if self.sms <= 0:
            return float("inf")
        return self.sms * self.clock_hz * self.clock_factor * self.exp2_per_clock_per_sm


def clock_factor(power_w: float | None, rated_power_w: float | None) -> float:
    """Sustained clock of a part capped at ``power_w`` relative to its clock at ``rated_power_w``.

    Derivation: dynamic power ``P ~ C V^2 f`` and, in the DVFS range, ``V ~ f``, so ``P ~ f^3`` and a
    power-limited part sustains ``f / f_rated = (P / P_rated)^(1/3)`` (Weste & Harris, CMOS VLSI Design,
    sec. 5.1 dynamic power; the cube law of DVFS). A tensor-core-bound training step holds an H100 SXM at its
    power limit, so a 500 W H100 sustains (500/700)^(1/3) = 0.894 of the 700 W part's clock. Never above 1.
    """
    if not power_w or not rated_power_w or power_w >= rated_power_w:
        return 1.0
    return float((power_w / rated_power_w) ** (1.0 / 3.0))


def _entry_for(acc) -> tuple[str | None, dict | None]:
    table = compute_catalog()["accelerators"]
    if acc.name in table:
        return acc.name, table[acc.name]
    # same die: a catalog accelerator of the same generation and dense BF16 peak (a cluster file's variant)
    peak = acc.peak_dense_flops_per_s.get("bf16")
    for name in sorted(table):
        try:
            other = catalog.entry("accelerators", name)
        except Exception:  # noqa: BLE001 - a compute.yaml name missing from accelerators.yaml: skip it
            continue
        if other.get("generation") == acc.generation and peak and \
                abs(float(other.get("peak_dense_tflops", {}).get("bf16", 0)) * 1e12 - peak) < 1e9 and "gemm_bf16_fraction" in table[name]:
            return name, table[name]
    return None, None


def _fraction(name: str | None, entry: dict | None, key: str) -> tuple[float, str]:
    table = compute_catalog()["accelerators"]
    measured = sorted(float(v[f"{key}_fraction"]) for v in table.values() if f"{key}_fraction" in v)
    seen = set()
    while entry is not None and name not in seen:
        seen.add(name)
        if f"{key}_fraction" in entry:
            return float(entry[f"{key}_fraction"]), "measured" if len(seen) == 1 else f"as {name}"
        name = entry.get(f"{key.split('_')[0]}_like")  # gemm_bf16 -> gemm_like, hbm -> hbm_like
        entry = table.get(name) if name else None
    return float(np.median(measured)), "median of measured"


def compute_profile(acc) -> ComputeProfile:
    """The :class:`ComputeProfile` of accelerator ``acc`` (:class:`~tierwise.specs.accelerator.Accelerator`).

    An accelerator absent from compute.yaml (a TPU, a user's part) gets the median measured fractions, 16
    exp2 per clock per unit and, when its SM count is unknown, an exp2 rate that never binds (infinite):
    the attention roofline then reduces to its matmul part.
    """
    name, entry = _entry_for(acc)
    gemm, gemm_from = _fraction(name, entry, "gemm_bf16")
    hbm, hbm_from = _fraction(name, entry, "hbm")
    if name is not None and name != acc.name:
        gemm_from = gemm_from if gemm_from != "measured" else f"as {name}"
        hbm_from = hbm_from if hbm_from != "measured" else f"as {name}"
    if entry is None:
        return ComputeProfile(sms=0, clock_hz=float("inf"), exp2_per_clock_per_sm=16, gemm_fraction=gemm,
                              gemm_from=gemm_from, hbm_fraction=hbm, hbm_from=hbm_from, clock_factor=1.0)
    return ComputeProfile(
        sms=int(entry["sms"]), clock_hz=float(entry["clock_ghz"]) * 1e9,
        exp2_per_clock_per_sm=int(entry["exp2_per_clock_per_sm"]), gemm_fraction=gemm, gemm_from=gemm_from,
        hbm_fraction=hbm, hbm_from=hbm_from,
        clock_factor=clock_factor(acc.power_w, entry.get("rated_power_w")),
    )


def unmeasured() -> list[dict[str, str]]:
    """Catalog accelerators without their own large-GEMM or HBM measurement, and what they use instead."""

    out = []
    for name in catalog.names("accelerators"):
        p = compute_profile(load_accelerator(name))
        if p.gemm_from != "measured" or p.hbm_from != "measured":
            out.append({"accelerator": name, "gemm": f"{p.gemm_fraction:.3f} ({p.gemm_from})",
                        "hbm": f"{p.hbm_fraction:.3f} ({p.hbm_from})"})
    return out


def default_attention_kernel(generation: str) -> str:
    """The attention kernel family a plan that names none runs on ``generation`` (A100: FlashAttention-2;
    Hopper and Blackwell: cuDNN / FlashAttention-3 class; anything else: SDPA)."""
    return compute_catalog()["default_attention_kernel"].get(generation or "", "sdpa")


def _release(text: str, what: str) -> tuple[int, int, int]:
    """``2.5.1`` (or ``2.5``, ``2.6.0+cu124``, ``2.7.0a0``) as (2, 5, 1); ``what`` names the value in an error."""
    import re

    m = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:

        raise SpecError(f"{what} is not a torch release; write it as MAJOR.MINOR[.PATCH], e.g. '2.5.1'")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def sdpa_backend(generation: str, torch_version: str | None = None, *, where: str = "") -> tuple[str, str]:
    """(kernel family, why) of ``scaled_dot_product_attention`` on ``generation`` under torch ``torch_version``
    (compute.yaml ``sdpa_backends``, each row sourced); without a version the row marked ``default`` (torch
    2.5.1-2.10: its FlashAttention-2 backend). A generation the table does not list runs ``sdpa``."""
    rows = compute_catalog()["sdpa_backends"]
    if torch_version is None:
        row = next(r for r in rows if r.get("default"))
    else:
        what = f"torch_version={torch_version!r}" + (f" in {where}" if where else "")
        release = _release(torch_version, what)
        row = next((r for r in rows if _release(r["first"], "first") <= release <= _release(r["last"], "last")),
                   None)
        if row is None:

            raise SpecError(f"{what}: no torch release before {rows[0]['first']} has "
                            "scaled_dot_product_attention; give a torch 2.x release")
    family = str(row["backend"].get(generation or "", "sdpa"))
    last = " and later" if row["last"] == "99.0.0" else "" if row["last"] == row["first"] else \
        "-" + str(row["last"]).replace(".99", ".x")
    span = f"torch {row['first']}{last}"
    backend = "cuDNN fused attention" if family == "cudnn" else "its FlashAttention-2 backend"
    return family, f"{span} on {generation or 'this part'}: {backend} (compute.yaml sdpa_backends)"


SCORE_FLOPS_HEAD_128 = 512.0
"""GEMM FLOPs of one attention score at head width 128: ``2 (d_qk + d_v)`` (QK^T and PV), the shape the
kernels' papers benchmark."""

REFERENCE_GENERATION = "hopper"
"""The generation whose efficiency the fitted ``attention_efficiency_<family>`` is (every family runs there)."""


def measured_fraction(entry: dict) -> tuple[float, float, float]:
    """(fraction of the effective peak, effective peak FLOP/s, exp2 per s) of one ``forward_fraction`` entry.

    The entry names the catalog ``part`` it ran on and either the published ``fraction`` of that part's dense
    BF16 peak or the measured ``tflops``; ``power_w`` when the card ran below the part's rated board power
    (an A100 80GB PCIe at 300 W is the 400 W SXM part's die): peak and exp2 rate are then both at the
    sustained clock :func:`clock_factor` gives, as the estimator prices such a part."""
    acc = load_accelerator(str(entry["part"]))
    if entry.get("power_w") is not None:
        acc = dataclasses.replace(acc, power_w=float(entry["power_w"]))
    prof = compute_profile(acc)
    peak = acc.peak_flops_per_s("bf16") * prof.clock_factor
    if "tflops" in entry:
        return float(entry["tflops"]) * 1e12 / peak, peak, prof.exp2_per_s
    return float(entry["fraction"]) / prof.clock_factor, peak, prof.exp2_per_s


def matmul_share(fraction: float, peak: float, exp2_per_s: float, overlap: float) -> float:
    """The matmul efficiency a kernel must reach to deliver ``fraction`` of ``peak`` once its exponentials are
    priced as the estimator prices them (pricing/kernels.py ``overlapped``: ``max + (1 - overlap) min`` of the
    matmul and exp2 times). Per FLOP, in units of 1/peak: measured ``T = 1/fraction``, exp2 ``E = peak / (512 x
    exp2 rate)`` (one exp2 per 512 FLOPs at head width 128). Matmul-bound (``M >= E``): ``M = T - (1 - overlap)
    E``; exp2-bound: ``M = (T - E) / (1 - overlap)``. The share is ``1/M``. No overlap (FlashAttention-2):
    ``1 / (1/fraction - peak / (512 x exp2 rate))``; full overlap (cuDNN / FA3 class on Hopper and Blackwell):
    the fraction itself while the matmuls bind (docs/compute.md). A measurement at or past the exp2 bound says
    nothing of the matmuls: a :class:`SpecError`."""
    t, e = 1.0 / fraction, peak / (SCORE_FLOPS_HEAD_128 * exp2_per_s)
    m = t - (1.0 - overlap) * e
    if m < e:
        m = (t - e) / (1.0 - overlap) if overlap < 1.0 and t > e else 0.0
    if m <= 1.0:

        raise SpecError(f"an attention forward at {fraction:.3f} of the peak is at the exp2 bound ({1 / e:.3f}) "
                        "or above the peak: compute.yaml attention_kernels forward_fraction is inconsistent")
    return 1.0 / m


@functools.cache
def attention_generation_factor(family: str, generation: str) -> float:
    """How much more (or less) of the peak a kernel family's matmuls reach on ``generation`` than on
    :data:`REFERENCE_GENERATION`, from the family's measured ``forward_fraction`` per generation (compute.yaml
    ``attention_kernels``; each with its source): the ratio of the matmul shares :func:`matmul_share` implies,
    each under the family's exp2 overlap on its generation (:func:`attention_kernel_overlap`). 1 where the
    family has no measurement for ``generation``. FlashAttention-2: A100 0.73 -> 0.893, H100 0.35 -> 0.424:
    2.10; B200 425 TFLOP/s -> 0.233: 0.55. cuDNN: A100 (PCIe, 300 W) 184 TFLOP/s -> 0.776, H200 680 -> 0.687,
    B200 1488 -> 0.661: 1.13 and 0.962."""
    table = compute_catalog()["attention_kernels"].get(family, {})
    name = str(table.get("efficiency_of", family))
    measured = compute_catalog()["attention_kernels"].get(name, {}).get("forward_fraction", {})
    if generation not in measured or REFERENCE_GENERATION not in measured:
        return 1.0
    own, ref = measured_fraction(measured[generation]), measured_fraction(measured[REFERENCE_GENERATION])
    return (matmul_share(*own, attention_kernel_overlap(name, generation))
            / matmul_share(*ref, attention_kernel_overlap(name, REFERENCE_GENERATION)))


BENCHMARK_BACKWARD_FLOPS = 2.5
"""FLOPs the attention benchmarks of ``backward_rate`` count for a backward over its forward's (cudnn-frontend
``benchmark_flash_attention.py flops(mode="bwd") = 2.5 f``; sdpa_benchmark_training's rows give
``bwd_time / fwd_time = 2.5 x fwd_tflops / bwd_tflops``): five GEMMs to the forward's two, the count the
estimator prices (pricing/kernels.py ``ATTENTION_BACKWARD_FLOPS``, FlashAttention-2 sec. 3.1.2)."""


def backward_matmul_ratio(entry: dict, family: str, generation: str) -> float:
    """The backward's matmul share over the forward's that one ``backward_rate`` entry implies on its part: the
    estimator's ``attention_backward_ratio`` for that kernel on that generation. Each share by
    :func:`matmul_share` under the family's overlap there, the backward's with its one exp2 per score spread over
    :data:`BENCHMARK_BACKWARD_FLOPS` x 512 FLOPs (exp2 rate x 2.5): in units of 1/peak per forward FLOP the
    backward takes ``2.5 / bwd fraction = max + (1 - overlap) min`` of ``2.5 / share_b`` and ``E``, so
    ``share_b = 1 / (1 / bwd fraction - (1 - overlap) E / 2.5)``; with full overlap (cuDNN on Hopper / Blackwell)
    the ratio is the measured backward rate over the forward rate."""
    part = {k: entry[k] for k in ("part", "power_w") if k in entry}
    fwd, peak, exp2 = measured_fraction({**part, "tflops": entry["forward_tflops"]})
    bwd = float(entry["backward_tflops"]) * 1e12 / peak
    overlap = attention_kernel_overlap(family, generation)
    return (matmul_share(bwd, peak, BENCHMARK_BACKWARD_FLOPS * exp2, overlap)
            / matmul_share(fwd, peak, exp2, overlap))


@functools.cache
def attention_backward_generation_factor(family: str, generation: str) -> float:
    """How much more (or less) of its forward's matmul rate a kernel family's backward reaches on ``generation``
    than on :data:`REFERENCE_GENERATION`: :func:`backward_matmul_ratio` of the family's ``backward_rate`` entry
    for ``generation`` over that of its Hopper entry (compute.yaml ``attention_kernels``, each with its source;
    one benchmark run gives both passes of one kernel). The fitted ``attention_backward_ratio`` is the Hopper
    value (the calibration set is mostly Hopper) and a backward on ``generation`` runs at it times this factor,
    as :func:`attention_generation_factor` does for the forward. 1 where the family has no backward measurement
    for ``generation`` (Ampere: none published). cuDNN 9.19 on GB200 against H200: (1402 / 1687) / (579 / 673)
    = 0.966; torch's FlashAttention-2 backend on B200 against H200: 0.709 / 0.837 = 0.847."""
    table = compute_catalog()["attention_kernels"].get(family, {})
    name = str(table.get("efficiency_of", family))
    measured = compute_catalog()["attention_kernels"].get(name, {}).get("backward_rate", {})
    if generation not in measured or REFERENCE_GENERATION not in measured:
        return 1.0
    return (backward_matmul_ratio(measured[generation], name, generation)
            / backward_matmul_ratio(measured[REFERENCE_GENERATION], name, REFERENCE_GENERATION))


def check_kernel_generation(kernel: str, generation: str) -> None:
    """Refuse a named attention kernel on a known generation it does not run on (compute.yaml
    ``attention_kernel_generations``: FlashAttention-3 is Hopper-only); an unknown generation ("") passes."""
    entry = compute_catalog().get("attention_kernel_generations", {}).get(kernel)
    if entry is None or not generation or generation in entry["generations"]:
        return
    others = "flash2 or cudnn" if generation == "ampere" else "cudnn (FlashAttention-4 is of that class)"

    raise SpecError(f"attention_kernel={kernel!r} runs only on {', '.join(entry['generations'])} (compute.yaml "
                    f"attention_kernel_generations), not on this {generation} accelerator; name the kernel it "
                    f"runs there: {others}")


def attention_efficiency_family(kernel: str) -> str:
    """The family whose fitted matmul efficiency ``kernel`` runs at: its own, or the one its catalog entry
    names as ``efficiency_of`` (PyTorch SDPA's flash backend is FlashAttention-2, so ``sdpa`` -> ``flash2``)."""
    entry = compute_catalog()["attention_kernels"].get(kernel, {})
    return str(entry.get("efficiency_of", kernel))


def attention_kernel_overlap(kernel: str, generation: str = "") -> float:
    """Fraction of the shorter of (matmul, exponential) time a kernel family hides behind the longer.

    FA3/cuDNN-class kernels overlap softmax with the GEMMs only where the hardware has asynchronous
    warpgroup MMA (Hopper, Blackwell); on Ampere the same family runs as FA2 does (no overlap).
    """
    kernels = compute_catalog()["attention_kernels"]
    if kernel not in kernels:

        raise SpecError(f"attention kernel {kernel!r} is not one of {', '.join(kernels)}")
    if generation == "ampere":
        return 0.0
    return float(kernels[kernel]["overlap"])


def moe_kernels_per_layer(dispatcher: str = "alltoall") -> tuple[int, int]:
    """(forward, backward) kernels one MoE layer launches with ``dispatcher`` (compute.yaml moe_dispatchers)."""
    table = compute_catalog()["moe_dispatchers"]
    d = table.get(dispatcher, table["alltoall"])
    return int(d["kernels_forward"]), int(d["kernels_backward"])


def moe_expert_launches() -> tuple[int, int]:
    """(forward, backward) host launches per local expert and MoE layer (compute.yaml moe_expert_launches):
    Transformer Engine's GroupedLinear issues one cuBLASLt GEMM per expert for each of fc1 and fc2 (forward 2;
    backward dgrad and wgrad, 4) and the backward adds, per expert weight, TE's placeholder gradient and
    Megatron-Core DDP's gradient-accumulation hook (4): 2 and 8."""
    d = compute_catalog()["moe_expert_launches"]
    return int(d["forward"]), int(d["backward"])


def grouped_gemm_efficiency(rows, n, k, groups, sms):
    """Useful over padded tile work of a grouped GEMM, times its wave utilization (arrays broadcast).

    ``rows`` tokens per expert (M), ``n`` and ``k`` the expert GEMM's output and reduction widths,
    ``groups`` experts on the rank, ``sms`` streaming multiprocessors; tile ``tm x tn x tk`` from
    compute.yaml (``grouped_gemm_tile``).

    * Tile quantization: every expert's rows are padded to whole tiles. Routing makes an expert's row count
      vary from step to step, so its remainder mod ``tm`` is spread out and the expected padded rows are
      ``M + tm/2`` once ``M > tm/2``, and a whole tile below: ``M_pad = max(tm, M + tm/2)``. The expert
      width and ``K`` are fixed: ``N_pad = ceil(N / tn) tn``, ``K_pad = ceil(K / tk) tk``.
    * Wave quantization: ``T = groups x (M_pad/tm) x (N_pad/tn)`` tiles run on ``sms`` SMs one tile each per
      wave; with ``T`` varying the last wave is on average half full: utilization ``T / max(sms, T + sms/2)``
      (``T / sms`` for a single partial wave).

    The product lies in (0, 1], rises with ``M`` and with ``groups``; with ``sms`` 0 (unknown) only the tile
    term applies.
    """
    g = compute_catalog()["grouped_gemm_tile"]
    tm, tn, tk = float(g["m"]), float(g["n"]), float(g["k"])
    rows = np.maximum(np.asarray(rows, dtype=float), 1e-9)
    m_pad = np.maximum(tm, rows + tm / 2)
    n_pad = np.ceil(np.asarray(n, dtype=float) / tn) * tn
    k_pad = np.ceil(np.asarray(k, dtype=float) / tk) * tk
    tile = rows * n * k / (m_pad * n_pad * k_pad)
    if not sms:
        return tile
    tiles = np.asarray(groups, dtype=float) * (m_pad / tm) * (n_pad / tn)
    wave = tiles / np.maximum(sms, tiles + sms / 2)
    return tile * wave
