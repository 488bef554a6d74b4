"""``measure compute``: the kernels one accelerator runs, measured, and the cluster ``compute:`` block they imply.

The compute twin of ``calibrate``: on a CUDA or ROCm GPU (or, small, on the CPU, for tests) it times

* **GEMMs** ``C = A @ B`` (A: M x K, B: K x N; ``2 M N K`` FLOPs) in BF16 over training shapes (tokens x hidden
  projections, an 8B-class MLP) and serving shapes (decode batches of 64 and 256 rows), and FP8
  (``torch._scaled_mm``, per-tensor scales) where the GPU has FP8 tensor cores (compute capability >= 8.9);
* the **HBM copy** rate (STREAM copy, McCalpin 1995: a read and a write of the array, 2 x size bytes);
* **attention** forward and backward through ``torch.nn.functional.scaled_dot_product_attention`` for every
  backend of ``torch.nn.attention.SDPBackend`` that runs on the device (causal, BF16; on the CPU the math
  and the CPU flash backend); FLOPs counted as the pricing counts them (:func:`attention_flops`; the backward
  row is timed with its forward, ``1 + 2.5`` forward FLOPs);
* an **RMSNorm** (read and write of the BF16 activations, 4 bytes per element, plus the weight);
* a **fused AdamW step** (``torch.optim.AdamW(fused=True)``, FP32 parameters, gradients and both moments:
  read p, g, m, v and write p, m, v: 7 x 4 = 28 bytes per parameter; the multi-tensor kernels of
  torch/csrc/.../fused_adam_impl: one pass over the four tensors).

:func:`compute_block` turns the rows into the cluster's ``compute:`` keys that
:func:`tierwise.pricing.kernels.per_accelerator` reads (the same rules as ``calibrate`` of ``measure gemm`` /
``measure hbm`` results: best large BF16 GEMM over the dense BF16 peak; STREAM copy over the datasheet HBM
rate), plus ``attention_efficiency_<family>`` of each fused backend measured, inverted from
:func:`tierwise.pricing.kernels.attention_time`. :func:`predictions` prices every measured kernel with the
catalog's rates for the cluster's accelerator, beside the measurement.

Timing: CUDA events (or ``time.perf_counter`` on the CPU) around ``iters`` back-to-back calls after
``warmup`` calls; the median of ``repeats`` batches.
"""

from __future__ import annotations

import datetime as _dt
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tierwise.errors import MeasureError, SpecError
from tierwise.measure.bench import require_torch
from tierwise.measure.calibrate import _cluster_base, cluster_for_device
from tierwise.measure.hf_step import HFStepRun, finish_hf_step
from tierwise.pricing.kernels import (
    ATTENTION_BACKWARD_FLOPS,
    attention_time,
    compute_parameters,
    compute_rates,
    elementwise_time,
)
from tierwise.specs.cluster import cluster_from_mapping
from tierwise.specs.compute import (
    attention_backward_generation_factor,
    attention_generation_factor,
    attention_kernel_overlap,
)
from tierwise.specs.compute_profile import check_device
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["ComputeBench", "ComputeResult", "ProfileTarget", "profile_target", "finish_profile", "run_compute", "compute_block", "predictions", "profile_document", "device_info",
           "attention_flops", "backend_name", "ADAMW_BYTES_PER_PARAM", "SDPA_FAMILY", "LARGE_GEMM_DIM"]

LARGE_GEMM_DIM = 4096
"""A GEMM with every dimension at least this fills the GPU (as ``calibrate``'s large GEMM)."""

ADAMW_BYTES_PER_PARAM = 28
"""Fused AdamW with FP32 master weights: reads parameter, gradient, first and second moment (4 x 4 B) and
writes parameter and both moments (3 x 4 B) (Loshchilov & Hutter 2019, Algorithm 2; torch fused_adamw)."""

SDPA_FAMILY = {"FLASH_ATTENTION": "flash2", "CUDNN_ATTENTION": "cudnn", "EFFICIENT_ATTENTION": "sdpa"}
"""Pricing family of each fused SDPA backend: torch's flash backend is FlashAttention-2 (torch 2.2 release
notes), its cuDNN backend is cuDNN fused attention, the memory-efficient backend (xFormers / CUTLASS) is
priced as SDPA; the math backend is unfused and has no family."""

_TRAINING_GEMMS = ((4096, 4096, 4096), (16384, 8192, 8192), (8192, 28672, 8192), (8192, 8192, 28672))
_SERVING_GEMMS = ((64, 8192, 8192), (256, 8192, 8192))
_SMALL_TRAINING = ((256, 256, 256), (512, 512, 512))
_SMALL_SERVING = ((16, 512, 512),)


@dataclass(frozen=True, kw_only=True)
class ComputeBench:
    """What ``measure compute`` runs."""

    device: str = "cuda"
    """``cuda`` (CUDA and ROCm both appear to torch as cuda) or ``cpu``."""
    small: bool = False
    """Small shapes (the CPU and CI path)."""
    backends: tuple[str, ...] | None = None
    """SDPA backends to measure (``SDPBackend`` names); None: every one that runs here."""
    iters: int = 10
    warmup: int = 3
    repeats: int = 3


def _torch_device(bench: ComputeBench):
    torch = require_torch()
    if bench.device == "cuda" and not torch.cuda.is_available():
        raise MeasureError("no CUDA/ROCm GPU is visible; run `measure compute --cpu` for the small CPU path "
                           "(check nvidia-smi / rocm-smi and CUDA_VISIBLE_DEVICES)")
    if bench.device not in ("cuda", "cpu"):
        raise MeasureError(f"device {bench.device!r}: use cuda or cpu")
    return torch


def device_info(torch, device: str) -> dict:
    """The device name and the software it ran under (written with the profile)."""
    name = torch.cuda.get_device_name() if device == "cuda" else f"cpu ({platform.machine() or 'unknown'})"
    return {"device": name, "torch": str(torch.__version__), "cuda": str(torch.version.cuda or ""),
            "hip": str(getattr(torch.version, "hip", None) or ""), "date": _dt.date.today().isoformat()}


def _timer(torch, device: str, bench: ComputeBench) -> Callable[[Callable[[], object]], float]:
    """Median seconds per call of ``fn`` (module docstring)."""

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(fn) -> float:
        for _ in range(bench.warmup):
            fn()
        sync()
        samples = []
        for _ in range(bench.repeats):
            start = time.perf_counter()
            for _ in range(bench.iters):
                fn()
            sync()
            samples.append((time.perf_counter() - start) / bench.iters)
        return statistics.median(samples)

    return timed


def _row(kernel: str, shape: str, dtype: str, time_s: float, *, flops: float = 0.0, bytes_: float = 0.0,
         **extra) -> dict:
    if not time_s > 0:
        raise MeasureError(f"{kernel} {shape}: measured time {time_s!r} s is not positive; rerun with more --iters")
    return {"kernel": kernel, "shape": shape, "dtype": dtype, "time_s": time_s, "flops": flops, "bytes": bytes_,
            "flops_per_s": flops / time_s if flops else None, "bytes_per_s": bytes_ / time_s if bytes_ else None,
            **extra}


def _gemms(torch, dev, bench, timed, emit) -> None:
    train, serve = (_SMALL_TRAINING, _SMALL_SERVING) if bench.small else (_TRAINING_GEMMS, _SERVING_GEMMS)
    fp8 = dev == "cuda" and torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "_scaled_mm")
    for use, shapes in (("training", train), ("serving", serve)):
        for m, n, k in shapes:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
            t = timed(lambda a=a, b=b: torch.matmul(a, b))
            emit(_row("gemm", f"{m}x{n}x{k}", "bf16", t, flops=2.0 * m * n * k, m=m, n=n, k=k, use=use))
            if fp8:
                a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=dev, dtype=torch.float32)
                t = timed(lambda a8=a8, b8=b8, one=one: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                                         out_dtype=torch.bfloat16))
                emit(_row("gemm", f"{m}x{n}x{k}", "fp8", t, flops=2.0 * m * n * k, m=m, n=n, k=k, use=use))
            del a, b


def _copy(torch, dev, bench, timed, emit) -> None:
    elements = (4 << 20) if bench.small else (256 << 20)  # fp32: 16 MiB or 1 GiB arrays
    a = torch.empty(elements, device=dev, dtype=torch.float32)
    b = torch.rand(elements, device=dev, dtype=torch.float32)
    emit(_row("hbm-copy", f"{elements * 4 / 2**20:.0f} MiB", "fp32", timed(lambda: a.copy_(b)),
              bytes_=2.0 * elements * 4))


def _norm(torch, dev, bench, timed, emit) -> None:
    tokens, hidden = (512, 1024) if bench.small else (16384, 8192)
    x = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
    w = torch.ones(hidden, device=dev, dtype=torch.bfloat16)
    t = timed(lambda: torch.nn.functional.rms_norm(x, (hidden,), w))
    emit(_row("rmsnorm", f"{tokens}x{hidden}", "bf16", t, bytes_=4.0 * tokens * hidden + 2.0 * hidden))


def _adamw(torch, dev, bench, timed, emit) -> None:
    params = (1 << 20) if bench.small else (64 << 20)
    p = torch.zeros(params, device=dev, dtype=torch.float32, requires_grad=True)
    p.grad = torch.rand(params, device=dev, dtype=torch.float32)
    try:
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        kind = "fused"
    except (RuntimeError, TypeError):  # a device without the fused kernel: the multi-tensor path
        opt = torch.optim.AdamW([p], lr=1e-4, foreach=True)
        kind = "foreach"
    t = timed(opt.step)
    emit(_row("adamw", f"{params} params", "fp32", t, bytes_=float(ADAMW_BYTES_PER_PARAM * params),
              implementation=kind))


def attention_flops(batch: int, heads: int, seq: int, head_dim: int) -> float:
    """Forward FLOPs of a causal attention core as the pricing counts them: QK^T and PV, ``2 s^2 d`` each per
    head, halved by the causal mask (:func:`tierwise.workload.flops.attention_core_flops_per_token`)."""
    return 4.0 * batch * heads * seq * seq * head_dim / 2.0


def available_backends(torch) -> list[str]:
    """SDPA backend names this torch defines (``ERROR`` and ``OVERRIDEABLE`` are not kernels)."""
    from torch.nn.attention import SDPBackend

    return [n for n in SDPBackend.__members__ if n not in ("ERROR", "OVERRIDEABLE")]


BACKEND_ALIASES = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                   "cudnn": "CUDNN_ATTENTION"}
"""Short names ``--backend`` takes for ``torch.nn.attention.SDPBackend`` members (their own names work too)."""


def backend_name(text: str) -> str:
    """The ``SDPBackend`` member name ``--backend text`` means (``flash`` -> ``FLASH_ATTENTION``)."""
    return BACKEND_ALIASES.get(text.strip().lower(), text.strip().upper())


def _check_backends(torch, asked) -> None:
    known = available_backends(torch)
    for name in asked:
        if name not in known:
            raise MeasureError(f"--backend {name}: this torch ({torch.__version__}) has no such SDPA backend; "
                               f"it has {', '.join(known)}")


def _attention(torch, dev, bench, timed, emit) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    known = available_backends(torch)
    asked = bench.backends
    b, h, s, d = (1, 4, 256, 64) if bench.small else (4, 16, 4096, 128)
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    flops = attention_flops(b, h, s, d)
    for name in asked or known:
        backend = SDPBackend.__members__[name]

        def fwd(backend=backend):
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        try:
            out = fwd()
        except RuntimeError:
            if asked:
                raise MeasureError(f"--backend {name}: torch {torch.__version__} cannot run it on {dev} "
                                   f"(bf16, causal, head dim {d})") from None
            continue  # this backend does not run here
        extra = {"backend": name, "family": SDPA_FAMILY.get(name, "unfused"), "seq": s, "head_dim": d}
        emit(_row("attention-forward", f"{b}x{h}x{s}x{d}", "bf16", timed(fwd), flops=flops, **extra))
        t = timed(lambda fwd=fwd, grad=torch.ones_like(out): torch.autograd.grad(fwd(), (q, k, v), grad))
        emit(_row("attention-backward", f"{b}x{h}x{s}x{d}", "bf16", t, flops=(1.0 + ATTENTION_BACKWARD_FLOPS) * flops,
                  includes_forward=True, **extra))


def run_compute(bench: ComputeBench, rows: list[dict], on_row: Callable[[dict], None] | None = None) -> dict:
    """Measure every kernel (module docstring), appending each row to ``rows`` as it is measured (so a caller
    interrupted by Ctrl-C keeps what was measured); returns :func:`device_info`."""
    torch = _torch_device(bench)
    dev = bench.device
    info = device_info(torch, dev)
    timed = _timer(torch, dev, bench)
    if bench.backends:  # a backend this torch lacks: one line before anything runs
        _check_backends(torch, bench.backends)

    def emit(row: dict) -> None:
        rows.append({**row, "device": info["device"]})
        if on_row is not None:
            on_row(rows[-1])

    with torch.no_grad():
        for kernel in (_gemms, _copy, _norm, _adamw):  # each frees its buffers when it returns
            kernel(torch, dev, bench, timed, emit)
    _attention(torch, dev, bench, timed, emit)
    return info


class _Heads:
    """The two head widths :func:`attention_time` reads of a model shape."""

    def __init__(self, head_dim: int):
        self.qk_head_dim = self.v_head_dim = head_dim


def _attention_fwd_s(row: dict, rates, family: str, eff: float) -> float:
    fwd, _ = attention_time(np.array(row["flops"]), _Heads(row["head_dim"]), rates, seq_len=row["seq"],
                            eff=eff, overlap=attention_kernel_overlap(family, rates.generation))
    return float(fwd)


def _attention_efficiency(row: dict, rates, family: str) -> float | None:
    """The ``attention_efficiency_<family>`` that makes :func:`attention_time`'s forward equal the measured one:
    the forward is ``F / (peak x eff x s/(s+s_half) x clock)`` overlapped with the exp2 time, so with ``t1`` the
    priced time at efficiency 1, ``eff = (t1 matmul part) / (measured - exp2 part not hidden)``; solved by
    bisection on the monotone priced time (None when even efficiency 1 is slower than the measurement)."""
    measured = float(row["time_s"])
    if _attention_fwd_s(row, rates, family, 1.0) > measured:
        return None
    lo, hi = 1e-9, 1.0
    for _ in range(100):
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if _attention_fwd_s(row, rates, family, mid) < measured else (mid, hi)
    return (lo * hi) ** 0.5


def compute_block(rows: list[dict], accelerator, *, parameters: Parameters, small: bool = False) -> dict[str, float]:
    """The ``compute:`` keys the measured ``rows`` imply for ``accelerator`` (module docstring).

    ``matmul_efficiency_max``: the best BF16 GEMM with every dimension >= :data:`LARGE_GEMM_DIM` (any BF16
    GEMM on the small path) over the dense BF16 peak; ``memory_bound_efficiency``: the STREAM copy over the
    datasheet HBM rate, at most 1; ``attention_efficiency_<family>``: each fused backend's forward, inverted
    through the attention roofline at the catalog's rates of ``accelerator``, over the family's generation factor
    (:func:`tierwise.specs.compute.attention_generation_factor`): the key holds the family's Hopper-equivalent
    efficiency, which the pricing multiplies by the same factor, so the estimate on this accelerator prices the
    kernel at what was measured. A kernel not measured leaves its key out; a GEMM faster than the peak raises (a
    profile of another part).
    """
    out: dict[str, float] = {}
    gemms = [r for r in rows if r["kernel"] == "gemm" and r["dtype"] == "bf16"
             and (small or min(r["m"], r["n"], r["k"]) >= LARGE_GEMM_DIM)]
    if gemms:
        best = max(gemms, key=lambda r: r["flops_per_s"])
        eff = best["flops_per_s"] / accelerator.peak_flops_per_s("bf16")
        if eff > 1.0:
            raise MeasureError(f"a {best['shape']} BF16 GEMM ran at {best['flops_per_s'] / 1e12:.0f} TFLOP/s, above "
                               f"{accelerator.name}'s dense peak; is --cluster the cluster this GPU belongs to?")
        out["matmul_efficiency_max"] = eff
    copies = [r for r in rows if r["kernel"] == "hbm-copy"]
    if copies:
        out["memory_bound_efficiency"] = min(1.0, max(r["bytes_per_s"] for r in copies) / accelerator.hbm_bytes_per_s)
    rates = compute_rates(accelerator, compute_parameters(parameters))
    for r in rows:
        family = r.get("family")
        key = f"attention_efficiency_{family}"
        if r["kernel"] == "attention-forward" and key in rates.params:
            eff = _attention_efficiency(r, rates, family)
            if eff is not None:
                out[key] = max(out.get(key, 0.0), eff / attention_generation_factor(family, rates.generation))
    return out


def _predicted_s(row: dict, rates) -> float | None:
    if "predicted_s" in row:  # a row the whole estimator priced when it was measured (--hf-step)
        return row["predicted_s"]
    p = rates.params
    if row["kernel"] == "gemm":
        peak = rates.fp8_peak * p.get("fp8_efficiency_ratio", 1.0) if row["dtype"] == "fp8" else rates.bf16_peak
        in_b = 1.0 if row["dtype"] == "fp8" else 2.0
        m, n, k = row["m"], row["n"], row["k"]
        memory_t = (in_b * (m * k + k * n) + 2.0 * m * n) / rates.hbm
        t = max(row["flops"] / (peak * p["matmul_efficiency_max"]), memory_t)
        return t + p.get("matmul_memory_weight", 0.0) * memory_t
    if row["kernel"] == "hbm-copy":
        return row["bytes"] / rates.streaming
    if row["kernel"] in ("rmsnorm", "adamw"):
        return float(elementwise_time(row["bytes"], rates))
    if row["kernel"].startswith("attention") and row.get("family") in SDPA_FAMILY.values():
        eff = (p[f"attention_efficiency_{'flash2' if row['family'] == 'sdpa' else row['family']}"]
               * attention_generation_factor(row["family"], rates.generation))  # as attention_kernel_rates
        overlap = attention_kernel_overlap(row["family"], rates.generation)
        backward = row["kernel"].endswith("backward")  # timed with its forward: (1 + 2.5) forward FLOPs
        fwd, bwd = attention_time(np.array(row["flops"] / ((1.0 + ATTENTION_BACKWARD_FLOPS) if backward else 1.0)),
                                  _Heads(row["head_dim"]), rates, seq_len=row["seq"], eff=eff, overlap=overlap,
                                  backward_factor=attention_backward_generation_factor(row["family"], rates.generation))
        return float(fwd + bwd) if backward else float(fwd)
    return None


def predictions(rows: list[dict], accelerator, cparams: dict | None = None, *, parameters: Parameters) -> list[dict]:
    """Each measured row beside what the pricing core predicts for it on ``accelerator`` with the global
    parameters (and ``cparams`` over them): ``{kernel, shape, dtype, backend, measured_s, predicted_s,
    error_pct}`` (``predicted_s`` None for a kernel the pricing has no family for: the math SDPA backend)."""
    rates = compute_rates(accelerator, {**compute_parameters(parameters), **(cparams or {})})
    out = []
    for r in rows:
        pred = _predicted_s(r, rates)
        out.append({"kernel": r["kernel"], "shape": r["shape"], "dtype": r["dtype"], "backend": r.get("backend", ""),
                    "measured_s": r["time_s"], "predicted_s": pred,
                    "error_pct": None if pred is None else 100.0 * (pred - r["time_s"]) / r["time_s"]})
    return out


def profile_document(base: dict, label: str, compute: dict[str, float], info: dict, rows: list[dict]) -> dict:
    """The cluster YAML ``measure compute --out`` writes: ``base`` (the --cluster's own keys, or ``{base:
    name}``), a name, the ``compute:`` block, ``compute_measured_on`` (device and software) and the rows."""
    if not compute:
        raise MeasureError("nothing was measured that sets a compute rate (no GEMM, copy or fused attention row); "
                           "no profile written")
    doc = dict(base)
    doc["name"] = f"measured-{label}"
    doc["source"] = (f"tierwise measure compute on {info['device']} (torch {info['torch']}"
                     f"{', CUDA ' + info['cuda'] if info['cuda'] else ''}{', HIP ' + info['hip'] if info['hip'] else ''}"
                     f", {info['date']})")
    doc["compute"] = {k: float(f"{v:.4g}") for k, v in compute.items()}
    doc["compute_measured_on"] = {k: info[k] for k in ("device", "torch", "cuda", "hip", "date") if info.get(k)}
    doc["compute_rows"] = [{k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in r.items()
                            if v is not None} for r in rows]
    return doc


@dataclass(frozen=True, kw_only=True)
class ComputeResult:
    """What ``measure compute`` reports: the device, the rows, the profile and the predictions beside them."""

    info: dict
    rows: list[dict]
    cluster: str
    accelerator: str
    compute: dict[str, float]
    predictions: list[dict]
    document: dict
    warnings: list[str]
    interrupted: bool = False
    hf_step: dict | None = None
    """The ``--hf-step`` training step, measured and predicted (:func:`tierwise.measure.hf_step.finish_hf_step`)."""

    def as_dict(self) -> dict:
        out = {"device": self.info, "cluster": self.cluster, "accelerator": self.accelerator,
               "compute": self.compute, "rows": self.rows, "predictions": self.predictions,
               "warnings": self.warnings, "interrupted": self.interrupted}
        if self.hf_step is not None:
            out["hf_step"] = self.hf_step
        return out


def profile_cluster(cluster: str | None, device: str) -> tuple[str, dict]:
    """(label, the profile document's cluster keys) for ``--cluster`` (a catalog name or a file, whose keys are
    copied as ``calibrate`` copies them), or without it the catalog cluster of ``device``'s GPU."""

    if cluster is None:
        cluster = cluster_for_device(device)
        if cluster is None:
            raise MeasureError(f"no catalog cluster is built from {device}; pass --cluster NAME|FILE (the cluster "
                               "whose accelerator the profile stands for)")
    label, _, own = _cluster_base(cluster)
    own = {k: v for k, v in own.items() if k not in ("compute", "compute_measured_on", "compute_rows")}
    return label, (own or {"base": label}), cluster


@dataclass(frozen=True, kw_only=True)
class ProfileTarget:
    """The device measured and the cluster it stands for, checked before any kernel runs."""

    info: dict
    label: str
    keys: dict
    accelerator: object
    warnings: list[str]


def profile_target(bench: ComputeBench, cluster: str | None, *, strict: bool = False) -> ProfileTarget:
    """The device ``bench`` runs on and the ``--cluster`` it is profiled for; a device that is not the cluster's
    accelerator is a warning, or the one-line error under ``strict`` (before anything is measured)."""

    info = device_info(_torch_device(bench), bench.device)
    label, keys, _ = profile_cluster(cluster, info["device"])
    acc = cluster_from_mapping(keys, name=label, origin=f"--cluster {label}").accelerator
    warnings: list[str] = []
    try:
        check_device(info["device"], acc.name, "this profile", strict, warnings)
    except SpecError as exc:
        raise MeasureError(str(exc)) from None
    return ProfileTarget(info=info, label=label, keys=keys, accelerator=acc, warnings=warnings)


def finish_profile(bench: ComputeBench, target: ProfileTarget, rows: list[dict], *,
                   interrupted: bool = False, hf: HFStepRun | None = None) -> ComputeResult:
    """The profile document and the predictions of the measured ``rows`` (module docstring); with ``hf`` (a
    ``--hf-step`` run) its training step, predicted with the compute block just measured, as one more row.
    The command's entry point: the model's parameters are the run's (:func:`load_parameters`), loaded once."""
    parameters = load_parameters()
    compute = compute_block(rows, target.accelerator, parameters=parameters, small=bench.small)
    step = None
    done = None if hf is None else finish_hf_step(hf, target.keys, target.label, compute, target.info["device"],
                                                  cpu=bench.device == "cpu", parameters=parameters,
                                                  interrupted=interrupted)
    if done is not None:
        step, row = done
        rows = [*rows, row]
    doc = profile_document(target.keys, target.label, compute, target.info, rows)
    return ComputeResult(info=target.info, rows=rows, cluster=target.label, accelerator=target.accelerator.name,
                         compute=compute, predictions=predictions(rows, target.accelerator, parameters=parameters), document=doc,
                         warnings=target.warnings, interrupted=interrupted, hf_step=step)
