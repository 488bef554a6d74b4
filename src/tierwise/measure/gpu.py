"""``measure gemm`` and ``measure hbm``: what one GPU delivers, to calibrate an accelerator's efficiencies.

* gemm: ``C = A @ B`` with ``A`` (M x K), ``B`` (K x N) takes ``2 M N K`` FLOPs (one multiply and one add per
  term of each of the M N dot products of length K); TFLOP/s = 2 M N K / t. Shapes span square and
  skinny (LLM projection-like) matrices; dense, no sparsity.
* hbm: the STREAM kernels (McCalpin, "Memory Bandwidth and Machine Balance", 1995) on device arrays of
  ``size_bytes``: copy ``a = b`` moves 2 x size bytes (one read, one write); triad ``a = b + s c`` moves
  3 x size bytes (two reads, one write). Bandwidth = bytes moved / t.

Timing: CUDA events around ``iters`` back-to-back launches after ``warmup`` launches; the median of
``repeats`` such batches. Without a visible CUDA GPU both raise one :class:`MeasureError` line.
"""

from __future__ import annotations

import statistics

from tierwise.errors import MeasureError
from tierwise.measure.bench import require_torch

__all__ = ["measure_gemm", "measure_hbm", "render_gemm", "render_hbm", "GEMM_SHAPES"]

GEMM_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16384, 8192, 8192),  # tokens x hidden x hidden, a projection
    (8192, 28672, 8192),  # an MLP up-projection (8B-class model)
    (8192, 8192, 28672),  # its down-projection
    (256, 8192, 8192),  # small batch: bandwidth-bound
)


def _cuda():

    torch = require_torch()
    if not torch.cuda.is_available():
        raise MeasureError("no CUDA GPU is visible; `measure gemm` and `measure hbm` need one "
                           "(check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    return torch


def _time_batches(torch, fn, iters: int, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / iters)
    return statistics.median(samples)


def measure_gemm(dtype: str = "bfloat16", shapes=GEMM_SHAPES, iters: int = 20, warmup: int = 5,
                 repeats: int = 5) -> list[dict]:
    """Matmul throughput by shape: rows of ``{m, n, k, dtype, time_s, flops_per_s}``."""
    torch = _cuda()
    types = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if dtype not in types:
        raise MeasureError(f"--dtype {dtype!r}: choose one of {', '.join(types)}")
    rows = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=types[dtype])
        b = torch.randn(k, n, device="cuda", dtype=types[dtype])
        t = _time_batches(torch, lambda a=a, b=b: torch.matmul(a, b), iters, warmup, repeats)
        rows.append({"m": m, "n": n, "k": k, "dtype": dtype, "time_s": t, "flops_per_s": 2.0 * m * n * k / t,
                     "device": torch.cuda.get_device_name()})
        del a, b
    return rows


def measure_hbm(size_bytes: int = 2**30, iters: int = 20, warmup: int = 3, repeats: int = 5) -> list[dict]:
    """STREAM copy and triad on the GPU: rows of ``{kernel, size_bytes, bytes_moved, time_s, bytes_per_s}``."""
    torch = _cuda()
    elements = max(1, size_bytes // 4)
    a = torch.empty(elements, device="cuda", dtype=torch.float32)
    b = torch.rand(elements, device="cuda", dtype=torch.float32)
    c = torch.rand(elements, device="cuda", dtype=torch.float32)
    kernels = {
        "copy": (lambda: a.copy_(b), 2),
        "triad": (lambda: torch.add(b, c, alpha=3.0, out=a), 3),
    }
    rows = []
    for name, (fn, arrays) in kernels.items():
        t = _time_batches(torch, fn, iters, warmup, repeats)
        moved = arrays * elements * 4
        rows.append({"kernel": name, "size_bytes": elements * 4, "bytes_moved": moved, "time_s": t,
                     "bytes_per_s": moved / t, "device": torch.cuda.get_device_name()})
    return rows


def render_gemm(rows: list[dict]):
    def render(console) -> None:
        console.print(f"matmul on {rows[0]['device']} ({rows[0]['dtype']})" if rows else "no shapes")
        for r in rows:
            console.print(f"  {r['m']:>6} x {r['n']:>6} x {r['k']:>6}  {r['time_s'] * 1e3:9.3f} ms  "
                          f"{r['flops_per_s'] / 1e12:8.1f} TFLOP/s")

    return render


def render_hbm(rows: list[dict]):
    def render(console) -> None:
        for r in rows:
            console.print(f"  {r['kernel']:>6}: {r['size_bytes'] / 2**30:.2f} GiB arrays  "
                          f"{r['time_s'] * 1e3:8.3f} ms  {r['bytes_per_s'] / 1e9:8.1f} GB/s")

    return render
