"""Per-regime alpha-beta fits of collective time versus size, and the prediction rule they define.

Model. Within one size regime (a protocol/algorithm/channel-count choice of the library), one collective
of ``S`` bytes on ``n`` ranks takes::

    t(S) = latency_s + S x bus_factor(op, n) / busbw_bytes_per_s

``bus_factor`` is nccl-tests' busbw/algbw factor (PERFORMANCE.md; :func:`tierwise.collectives.volumes.
bus_factor`), so ``busbw_bytes_per_s`` is directly comparable to the busbw column of nccl-tests, and one
fit transfers between collectives on the same ranks (all-reduce -> all-gather, broadcast) as far as they
run at the same bus rate. This is NCCL's own cost structure: ``tuning.cc`` keeps a latency and a
bandwidth per (algorithm, protocol) and ``enqueue.cc`` picks the minimum time over them
(collectives-notes.md section 4.1). A single line does not fit a NCCL sweep (notes section 7.4); a
sweep is therefore cut into up to ``max_regimes`` contiguous size regimes, breakpoints chosen by the data.
The default of 4 regimes is NCCL's three protocols (LL, LL128, Simple) plus one algorithm or channel-count
switch; with 3 the 32-GPU H100 log's 2-16 MiB transition is merged into the large regime (docs/measure.md).

A second prediction rule, for gloo sweeps with every rank on one host (TCP loopback, where there are no
per-rank links and bus factors do not transfer between ops), is :mod:`tierwise.measure.hostcopy`: the same
regimes carry a per-message latency and a per-byte copy cost fitted on the all-reduce, and a tier written
with ``model: host-copy`` predicts every op from its copy work and message steps (:func:`predict_time`'s
``model``; :func:`predict_tier`). Without the key a tier uses the bus-factor rule below, as before.

Prediction rule (:func:`predict_time`): the minimum, over the regimes whose ``[min_bytes, max_bytes]``
covers ``S`` (``max_bytes`` None = unbounded), of the regime's alpha-beta time. Where a regime's fitted
slope is zero (time flat over its sizes) its ``busbw_bytes_per_s`` is the lower bound at which the
bandwidth term would be 1% of the latency at the regime's largest size (:func:`_flat_bound`); a regime with
``busbw_bytes_per_s`` None (only possible when the latency is zero too) is treated as latency-only.

Fit. Each regime minimizes the squared *relative* error ``sum_i ((a + c x_i - t_i) / t_i)^2`` with
``x_i = S_i x bus_factor``, ``c = 1/busbw``, ``a, c >= 0`` (non-negative least squares on the rows scaled by
``1/t_i``), so a 30 us point and a 30 ms point count alike. Breakpoints come from dynamic programming over
the sorted sizes (optimal segmentation, Bellman 1961), and the number of regimes from the Bayesian
information criterion ``N ln(SSE/N) + p ln N`` with ``p = 3K - 1`` parameters (Schwarz 1978), SSE/N floored
at (1e-4)^2, the rounding of nccl-tests' 4-digit times. A boundary between regimes lies at the geometric
midpoint of the last size of one and the first size of the next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives.fitted import BUS_FACTOR, predict_fitted
from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import MeasureError

__all__ = ["Regime", "RegimeFit", "fit_regimes", "predict_time", "predict_tier", "out_of_sample", "BUS_FACTOR"]

# BUS_FACTOR (imported above): the default fitted model (no ``model:`` key in the YAML), nccl-tests bus factors

_NAMES = {1: ("all",), 2: ("small", "large"), 3: ("small", "medium", "large"), 4: ("tiny", "small", "medium", "large")}


@dataclass(frozen=True, kw_only=True)
class Regime:
    """One alpha-beta line valid over a size range."""

    name: str
    min_bytes: float
    max_bytes: float | None
    """Upper end of the range (inclusive); None: no upper end (the regime extrapolates)."""
    latency_s: float
    busbw_bytes_per_s: float | None
    """Bus bandwidth (nccl-tests convention); None: latency only."""
    step_latency_s: float | None = None
    """Host-copy model only (:mod:`tierwise.measure.hostcopy`): latency per sequential algorithm step."""
    copy_s_per_byte: float | None = None
    """Host-copy model only: seconds per byte of memory traffic (read + written) of the busiest rank inside
    gloo's algorithm (fitted)."""
    memory_s_per_byte: float | None = None
    """Host-copy model only: seconds per byte of the copies outside gloo's algorithm (measured by the host
    memory probe, never fitted); None for results recorded without it."""

    def as_dict(self) -> dict:
        out = {
            "name": self.name,
            "min_bytes": int(self.min_bytes),
            "max_bytes": None if self.max_bytes is None else int(self.max_bytes),
            "latency_s": float(f"{self.latency_s:.4g}"),
            "busbw_bytes_per_s": None if self.busbw_bytes_per_s is None else float(f"{self.busbw_bytes_per_s:.4g}"),
        }
        if self.step_latency_s is not None and self.copy_s_per_byte is not None:
            out["step_latency_s"] = float(f"{self.step_latency_s:.4g}")
            out["copy_s_per_byte"] = float(f"{self.copy_s_per_byte:.4g}")
            if self.memory_s_per_byte is not None:
                out["memory_s_per_byte"] = float(f"{self.memory_s_per_byte:.4g}")
        return out


@dataclass(frozen=True, kw_only=True)
class RegimeFit:
    """Regimes fitted to one sweep, with their in-sample residuals (prediction - measured, in %)."""

    op: str
    num_ranks: int
    regimes: tuple[Regime, ...]
    sizes_bytes: tuple[float, ...]
    residuals_pct: tuple[float, ...]

    @property
    def median_abs_pct(self) -> float:
        return float(np.median(np.abs(self.residuals_pct)))

    @property
    def max_abs_pct(self) -> float:
        return float(np.max(np.abs(self.residuals_pct)))

    model: str = BUS_FACTOR
    """How the regimes transfer to other ops: ``bus-factor`` (this module) or ``host-copy``."""

    def predict(self, op: str, size_bytes, num_ranks: int | None = None):
        """:func:`predict_time` of these regimes on ``num_ranks`` ranks (default: the fitted count)."""
        return predict_time(self.regimes, op, size_bytes, num_ranks or self.num_ranks, model=self.model,
                            fit_ranks=self.num_ranks)


def predict_time(regimes: Sequence[Regime | Mapping], op: str, size_bytes, num_ranks: int, *,
                 model: str | None = None, fit_ranks: int | None = None):
    """Predicted time (s) of ``op`` on ``size_bytes`` (nccl-tests size) over ``num_ranks`` ranks.

    :func:`tierwise.collectives.fitted.predict_fitted`, the one rule the estimator uses too: ``model`` None
    or ``"bus-factor"`` (the default, every NCCL or multi-host fit): the minimum over the regimes covering
    ``S`` of ``latency_s x (n - 1) / (fit_ranks - 1) + S x bus_factor(op, n) / busbw`` (module docstring;
    ``fit_ranks`` None: the regimes' own rank count, no scaling). ``model="host-copy"`` (a gloo sweep with
    all ranks on one host): the same minimum of ``step_latency_s x latency_steps + copy_s_per_byte x
    ring_work_bytes + memory_s_per_byte x outside_copy_bytes`` (:mod:`tierwise.measure.hostcopy`).
    Regimes may be :class:`Regime` objects or the mappings of a calibrated YAML. A size outside every
    regime's range takes the nearest regime. Returns a float for a scalar size, an array otherwise.

    >>> r = [Regime(name="all", min_bytes=0, max_bytes=None, latency_s=1e-5, busbw_bytes_per_s=1e10)]
    >>> round(predict_time(r, "all-reduce", 1e6, 2) * 1e6, 3)  # 10 us + 1 MB x 1.0 / 10 GB/s
    110.0
    """
    best = predict_fitted(regimes, op, size_bytes, num_ranks, fit_ranks=fit_ranks, model=model)
    return float(best) if best.ndim == 0 else best


def predict_tier(tier: Mapping, op: str, size_bytes, num_ranks: int | None = None):
    """:func:`predict_time` for one fitted tier of a calibrated YAML (its ``regimes``, its ``model``, and its
    ``num_ranks`` unless given)."""
    if not isinstance(tier, Mapping) or not tier.get("regimes"):
        raise MeasureError("a fitted tier needs regimes; write it with `tierwise calibrate`")
    n = num_ranks if num_ranks is not None else tier.get("num_ranks")
    if n is None:
        raise MeasureError("the fitted tier has no num_ranks; pass num_ranks")
    return predict_time(tier["regimes"], op, size_bytes, int(n), model=tier.get("model"),
                        fit_ranks=tier.get("num_ranks"))


_RESOLUTION = 1e-4


def _boundary(last_of_previous: float, first_of_next: float) -> float:
    """Regime boundary: the geometric midpoint of the two sizes, so no measured size sits on a boundary."""
    return float(round(math.sqrt(last_of_previous * first_of_next)))


def _flat_bound(x: np.ndarray, latency_s: float) -> float | None:
    """busbw for a regime whose time does not grow with size (fitted slope 0): the data only bound it from
    below. Report that bound: the busbw at which the bandwidth term at the regime's largest size would be
    1% of its latency, i.e. "at least this; time is flat within 1% here". None if the latency is 0 too."""
    if latency_s <= 0:
        return None
    return float(np.max(x)) / (0.01 * latency_s)


def _segment(x: np.ndarray, t: np.ndarray) -> tuple[float, float, float]:
    """Relative-error NNLS of t = a + c x on one segment: (a, c, sum of squared relative residuals)."""
    from scipy.optimize import nnls

    design = np.column_stack([1.0 / t, x / t])
    (a, c), _ = nnls(design, np.ones_like(t))
    rel = (a + c * x - t) / t
    return float(a), float(c), float(rel @ rel)


def _best_segmentation(x: np.ndarray, t: np.ndarray, k: int, min_points: int):
    """Optimal split of the sorted points into k contiguous segments (dynamic programming)."""
    n = len(x)
    cost = {}
    for i in range(n):
        for j in range(i + min_points - 1, n):
            cost[i, j] = _segment(x[i : j + 1], t[i : j + 1])[2]
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    back = [[-1] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for seg in range(1, k + 1):
        for end in range(seg * min_points, n + 1):
            for start in range((seg - 1) * min_points, end - min_points + 1):
                prev = best[seg - 1][start]
                if prev == inf:
                    continue
                total = prev + cost[start, end - 1]
                if total < best[seg][end]:
                    best[seg][end], back[seg][end] = total, start
    if best[k][n] == inf:
        return inf, []
    bounds, end = [], n
    for seg in range(k, 0, -1):
        start = back[seg][end]
        bounds.append((start, end))
        end = start
    return best[k][n], bounds[::-1]


def fit_regimes(sizes_bytes, times_s, op: str, num_ranks: int, *, max_regimes: int = 4,
                min_points: int = 3) -> RegimeFit:
    """Fit up to ``max_regimes`` alpha-beta regimes to one sweep (see the module docstring).

    Raises :class:`MeasureError` for an empty sweep, mismatched inputs or non-positive times.
    """
    kind = normalize_kind(op)
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    if sizes.size == 0:
        raise MeasureError("empty sweep: no sizes to fit; measure or pass a log with at least 2 sizes")
    if sizes.shape != times.shape:
        raise MeasureError(f"{sizes.size} sizes but {times.size} times")
    if np.any(~np.isfinite(times)) or np.any(times <= 0):
        raise MeasureError("times must be positive and finite to fit")
    if sizes.size < 2:
        raise MeasureError(f"a sweep of {sizes.size} size cannot fit latency and bandwidth; measure >= 2 sizes")
    if num_ranks < 2:
        raise MeasureError(f"num_ranks={num_ranks}: a collective needs >= 2 ranks")
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    x = sizes * float(bus_factor(kind, num_ranks))
    n = len(sizes)
    min_points = min(min_points, n)
    best = None
    for k in range(1, max_regimes + 1):
        if k * min_points > n:
            break
        sse, bounds = _best_segmentation(x, times, k, min_points)
        if not bounds:
            continue
        # floor: nccl-tests prints 4 significant digits, so relative residuals below ~1e-4 are rounding
        bic = n * math.log(max(sse / n, _RESOLUTION**2)) + (3 * k - 1) * math.log(n)
        if best is None or bic < best[0]:
            best = (bic, bounds)
    _, bounds = best
    names = _NAMES.get(len(bounds), tuple(f"r{i}" for i in range(len(bounds))))
    regimes = []
    for idx, (start, end) in enumerate(bounds):
        a, c, _ = _segment(x[start:end], times[start:end])
        regimes.append(Regime(
            name=names[idx],
            min_bytes=0.0 if idx == 0 else _boundary(sizes[start - 1], sizes[start]),
            max_bytes=None if end == n else _boundary(sizes[end - 1], sizes[end]),
            latency_s=a,
            busbw_bytes_per_s=1.0 / c if c > 0 else _flat_bound(x[start:end], a),
        ))
    predicted = predict_time(regimes, kind, sizes, num_ranks)
    residuals = (predicted - times) / times * 100.0
    return RegimeFit(op=kind, num_ranks=int(num_ranks), regimes=tuple(regimes),
                     sizes_bytes=tuple(float(s) for s in sizes), residuals_pct=tuple(float(r) for r in residuals))


def out_of_sample(sizes_bytes, times_s, busbw_bytes_per_s, op: str, num_ranks: int, *,
                  fit_max_bytes: float, test_min_bytes: float) -> list[dict]:
    """Fit on sizes <= ``fit_max_bytes``, then predict busbw at sizes >= ``test_min_bytes``.

    Returns one row per test size: size, measured and predicted busbw, and the error in % of measured.
    Predicted busbw = S x bus_factor / predicted time (nccl-tests definition).
    """
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    measured = np.asarray(busbw_bytes_per_s, dtype=float)
    train = sizes <= fit_max_bytes
    fit = fit_regimes(sizes[train], times[train], op, num_ranks)
    factor = float(bus_factor(normalize_kind(op), num_ranks))
    rows = []
    for size, bw in zip(sizes[sizes >= test_min_bytes], measured[sizes >= test_min_bytes], strict=True):
        predicted = size * factor / fit.predict(op, size)
        rows.append({"size_bytes": float(size), "busbw_measured_bytes_per_s": float(bw),
                     "busbw_predicted_bytes_per_s": float(predicted),
                     "error_pct": float((predicted - bw) / bw * 100.0)})
    return rows
