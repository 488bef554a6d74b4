"""Shared-host cost model of gloo collectives (all ranks on one host, TCP loopback): copy work and steps.

Why a second model. On one host there are no per-rank links: gloo's TCP transport over loopback moves
every byte with two CPU memory copies, user -> kernel on the sender (``send``/``writev`` copies the user
buffer into socket buffers) and kernel -> user on the receiver (``recv``/``read``); loopback hands the
socket buffers over without a further copy of the data. A reduction reads two operands and writes one.
The cost of a collective is therefore the memory traffic (bytes read + bytes written) of the busiest
rank's CPU, plus a latency per sequential algorithm step, not nccl-tests' bus bytes over a link bandwidth
(:mod:`tierwise.measure.fit`; docs/measure.md "gloo calibration on this machine")::

    t(op, S, n) = step_latency_s x latency_steps(op, n) + copy_s_per_byte x ring_work_bytes(op, S, n)
                  + memory_s_per_byte x outside_copy_bytes(op, S, n)

Both fitted parameters come from the all-reduce sweep only (per size regime, :func:`fit_host_copy`); every
other op is predicted from its own work and steps. ``ring_work_bytes`` is what gloo's algorithm does (its
socket copies and, for the all-reduce, its pipelined reduction: the work an all-reduce sweep measures);
``outside_copy_bytes`` is what torch and gloo copy before or after the algorithm runs (the all-gather's own
block into a flat buffer and the flat buffer into the result; reduce-scatter's clone and own chunk), which
the all-reduce does not do and so cannot price. Those copies run at the host's memory rate:
``memory_s_per_byte`` is *measured*, not fitted, by the host memory probe of ``tierwise measure
collective`` (:func:`tierwise.measure.bench._host_memory_probe`: a streaming ``copy_`` of buffers 4x the
last-level cache on every rank at once, before every round) and recorded on every row as
``host_memory_s_per_byte``. The DRAM rate, not a warm cache's, because the socket path streams the payload
through the shared cache between the copies (``benchmarks/bench_gloo_anatomy.py``, docs/measure.md
"Anatomy": inside the all-gather its two copies cost 0.8-4.2x the same copies timed alone at the swept
size, which stay cache-resident below 8 MiB). A result without the measured rate (recorded before the
probe existed) prices the outside copies at ``copy_s_per_byte`` like every other byte (the first version
of this model, ``copy_s_per_byte x copy_work_bytes``), and ``tierwise calibrate`` says so.

Why not split the ring's work too (socket bytes at one fitted rate, the reduction at the memory rate)?
It was tried (docs/measure.md): the ring's time beyond its exchanges is small and noisy, and pricing
the reduction at the memory rate moves the rest onto the socket bytes, which then over-predicts the
broadcast (a one-way stream measured 0.80-1.03x one exchange of the same bytes per rank) at 4-16 MiB by up
to 67%, beyond 25% on 6 of 8 sweeps. The form above leaves the broadcast's prediction as it was (it has no
outside copy).

The time assumes each rank has a core of its own
(``n`` <= cores) so that ranks copy in parallel and the busiest rank sets the time; at ``n`` = 2 every op
below is symmetric (both ranks do the same work).

Sizes follow nccl-tests (``S`` = the buffer for all-reduce and broadcast, the gathered output for
all-gather, the input for reduce-scatter); ``f = (n - 1) / n``. What runs, in torch 2.13 (CPU tensors):

* **all-reduce**: ``ProcessGroupGloo::allreduce`` -> ``AsyncAllreduceWork`` (ProcessGroupGlooDetail.hpp,
  shipped in the wheel's include/) calls ``gloo::allreduce`` without choosing an algorithm, which runs
  ``ring`` (gloo/allreduce.cc: ``UNSPECIFIED`` and ``RING`` -> ``ring``; ``nm -C libtorch_cpu.so`` shows
  ``gloo::(anonymous namespace)::ring`` and no shared-memory variant). In place on the one output, so the
  local reduce/broadcast functions are no-ops. Reduce-scatter phase: each rank sends ``f S`` and receives
  ``f S`` into a scratch buffer, then reduces it into the output (read 2, write 1); all-gather phase: sends
  ``f S`` and receives ``f S`` straight into the output. Work ``2 x 2fS`` (send copies) ``+ 2 x 2fS``
  (receive copies) ``+ 3 fS`` (reductions) ``= 11 f S`` (5.5 S at n = 2), all of it ring work.
  Steps: ``2 (n - 1)`` (the ring's reduce-scatter and all-gather phases). gloo cuts the buffer into
  ``roundUp(max(ceil(S / 1 MiB), 2n), n)`` segments (``kMaxSegmentSize``, gloo/allreduce.h) and sends them
  two in flight, so above ``2n`` MiB the number of *messages* grows with ``S``; that per-message overhead is
  then proportional to ``S`` and indistinguishable from copy work on an all-reduce sweep, so it is left in
  the per-byte cost (counting it as latency makes the fit's two parameters collinear in that regime).
* **all-gather** (``all_gather_single`` / ``all_gather_into_tensor``): ``ProcessGroupGloo::_allgather_base``
  chunks the output into ``n`` views and calls ``allgather``; ``AsyncAllgatherWork`` flattens the single
  input (a view, no copy: ``flattenDenseTensors``, c10d/Utils.hpp), allocates a flat output
  (``newLikeFlat``), runs ``gloo::allgather`` and copies the flat output into the views (``copy_``: read S,
  write S). ``gloo::allgather`` (gloo/allgather.cc) first copies the rank's input into its block of the
  output (``memcpy`` of S/n), then runs a ring of ``n - 1`` steps, each block sent as two halves. Ring
  work ``2fS + 2fS`` (send and receive copies); outside copies ``2 S / n`` (own block) ``+ 2 S``
  (unflatten) (2 S and 3 S at n = 2). Steps: ``n - 1``.
* **broadcast**: ``AsyncBroadcastWork`` calls ``gloo::broadcast`` in place on the one tensor (no extra
  copy with one tensor per rank). gloo/broadcast.cc is a binomial tree of ``ceil(log2 n)`` rounds; the
  root sends the whole buffer in every round, so the root is the busiest rank: work ``2 S ceil(log2 n)``
  (2 S at n = 2: the root's send copy; the receiver's receive copy, 2 S too, runs on the other core), all
  ring work. Steps: ``ceil(log2 n)``.
* **reduce-scatter** (gloo has none; reported, never fitted): ``ProcessGroupGloo::_reduce_scatter_base``
  -> ``reduce_scatter_tensor_coalesced`` clones the input (read S, write S), all-reduces the clone (the ring
  above, on S) and copies the rank's chunk into the output (2 S / n). Ring work ``11 f S``; outside copies
  ``2 S + 2 S / n`` (5.5 S and 3 S at n = 2); steps: the all-reduce's.

Not modelled: fresh pages. A temporary of at least glibc's largest dynamic mmap threshold (32 MiB on
64-bit, ``DEFAULT_MMAP_THRESHOLD_MAX``) is mmapped anew on every call and page-faulted in, which is extra
work the counts above do not include (all-gather's flat output from 32 MiB, reduce-scatter's clone).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives.volumes import normalize_kind
from tierwise.errors import MeasureError

__all__ = ["MODEL", "HOST_COPY_OPS", "EMULATED_OPS", "ring_work_bytes", "outside_copy_bytes", "copy_work_bytes",
           "latency_steps", "host_copy_time", "fit_host_copy", "HostCopyFit"]

MODEL = "host-copy"
"""Value of the ``model:`` key of a fitted tier that predicts with this module."""
HOST_COPY_OPS = ("all-reduce", "all-gather", "broadcast", "reduce-scatter")
EMULATED_OPS = ("reduce-scatter",)
"""Ops gloo does not implement (torch emulates them): predicted for the report, never fitted."""


def _check(op: str, num_ranks) -> tuple[str, np.ndarray]:
    kind = normalize_kind(op)
    if kind not in HOST_COPY_OPS:
        raise MeasureError(f"no host-copy work count for {kind!r}; the shared-host model covers "
                           f"{', '.join(HOST_COPY_OPS)}")
    n = np.asarray(num_ranks, dtype=float)
    if np.any(n < 2):
        raise MeasureError(f"num_ranks={num_ranks}: a collective needs >= 2 ranks")
    return kind, n


def _ceil_log2(n: np.ndarray) -> np.ndarray:
    return np.ceil(np.log2(n) - 1e-12)


def ring_work_bytes(op: str, size_bytes, num_ranks):
    """Memory traffic (bytes read + written) of the busiest rank inside gloo's algorithm for ``op`` of
    ``size_bytes`` (nccl-tests size) on ``num_ranks`` ranks of one host: socket copies and reductions,
    priced at the all-reduce's fitted ``copy_s_per_byte``; derivation and sources in the module docstring.

    >>> [float(ring_work_bytes(op, 1.0, 2)) for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter")]
    [5.5, 2.0, 2.0, 5.5]
    """
    kind, n = _check(op, num_ranks)
    size = np.asarray(size_bytes, dtype=float)
    f = (n - 1.0) / n
    if kind in ("all-reduce", "reduce-scatter"):  # torch's reduce-scatter runs the all-reduce's ring on S
        work = 11.0 * f * size
    elif kind == "all-gather":
        work = 4.0 * f * size
    else:  # broadcast
        work = 2.0 * size * _ceil_log2(n)
    return float(work) if np.ndim(work) == 0 else work


def outside_copy_bytes(op: str, size_bytes, num_ranks):
    """Memory traffic of the busiest rank's copies before or after gloo's algorithm (torch's flat buffers,
    gloo's own-block ``memcpy``, reduce-scatter's clone and own chunk), priced at the measured memory rate;
    zero for all-reduce and broadcast (module docstring).

    >>> [float(outside_copy_bytes(op, 1.0, 2)) for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter")]
    [0.0, 3.0, 0.0, 3.0]
    """
    kind, n = _check(op, num_ranks)
    size = np.asarray(size_bytes, dtype=float)
    if kind == "all-gather":
        work = 2.0 * size / n + 2.0 * size
    elif kind == "reduce-scatter":
        work = 2.0 * size + 2.0 * size / n
    else:
        work = 0.0 * size * n
    return float(work) if np.ndim(work) == 0 else work


def copy_work_bytes(op: str, size_bytes, num_ranks):
    """All the busiest rank's memory traffic, ``ring_work_bytes + outside_copy_bytes``: what a result without
    the measured memory rate prices at the one fitted ``copy_s_per_byte`` (module docstring).

    >>> [float(copy_work_bytes(op, 1.0, 2)) for op in ("all-reduce", "all-gather", "broadcast", "reduce-scatter")]
    [5.5, 5.0, 2.0, 8.5]
    """
    work = np.asarray(ring_work_bytes(op, size_bytes, num_ranks)) + np.asarray(
        outside_copy_bytes(op, size_bytes, num_ranks))
    return float(work) if np.ndim(work) == 0 else work


def latency_steps(op: str, num_ranks):
    """Sequential algorithm steps of ``op`` on ``num_ranks`` ranks (module docstring): the latency term's
    multiplier. Ring all-reduce (and torch's reduce-scatter over it) ``2 (n - 1)``, ring all-gather ``n - 1``,
    binomial-tree broadcast ``ceil(log2 n)``.

    >>> [float(latency_steps(op, 2)) for op in ("all-reduce", "all-gather", "broadcast")]
    [2.0, 1.0, 1.0]
    """
    kind, n = _check(op, num_ranks)
    if kind in ("all-reduce", "reduce-scatter"):
        steps = 2.0 * (n - 1.0)
    elif kind == "all-gather":
        steps = n - 1.0
    else:
        steps = _ceil_log2(n)
    return float(steps) if np.ndim(steps) == 0 else steps


def host_copy_time(op: str, size_bytes, num_ranks, step_latency_s: float, copy_s_per_byte: float,
                   memory_s_per_byte: float | None = None):
    """``step_latency_s x latency_steps + copy_s_per_byte x ring_work_bytes + memory_s_per_byte x
    outside_copy_bytes``; with ``memory_s_per_byte`` None (a result without the measured memory rate) the
    outside copies are priced at ``copy_s_per_byte`` too (module docstring).

    >>> round(host_copy_time("broadcast", 2**20, 2, 10e-6, 1e-10) * 1e6, 2)  # 10 us + 2 MiB x 0.1 ns
    219.72
    >>> round(host_copy_time("all-gather", 2**20, 2, 10e-6, 1e-10) * 1e6, 2)  # 10 us + 5 MiB x 0.1 ns
    534.29
    >>> round(host_copy_time("all-gather", 2**20, 2, 10e-6, 1e-10, 2e-11) * 1e6, 2)  # + 2 MiB x 0.1 + 3 MiB x 0.02
    282.63
    """
    outside = copy_s_per_byte if memory_s_per_byte is None else memory_s_per_byte
    return (step_latency_s * latency_steps(op, num_ranks)
            + copy_s_per_byte * ring_work_bytes(op, size_bytes, num_ranks)
            + outside * outside_copy_bytes(op, size_bytes, num_ranks))


@dataclass(frozen=True, kw_only=True)
class HostCopyFit:
    """The two host-copy parameters of one size regime, fitted on all-reduce rows in it."""

    step_latency_s: float
    copy_s_per_byte: float


def fit_host_copy(sizes_bytes, times_s, num_ranks: int, ranges: Sequence[tuple[float, float | None]],
                  op: str = "all-reduce") -> tuple[HostCopyFit, ...]:
    """Per size range ``(min_bytes, max_bytes or None)``: the non-negative least squares of the relative
    error ``sum_i ((a steps_i + c work_i - t_i) / t_i)^2`` over the rows in the range (the same criterion
    as :func:`tierwise.measure.fit.fit_regimes`, with ``steps`` in place of 1 and ``work`` in place of the
    bus bytes). The step count does not depend on ``S``, so this is the regime's own line re-expressed:
    ``a = latency_s / steps`` and ``c = slope / (work per byte)``.

    Raises :class:`MeasureError` when a range holds no row or the sweep is not an all-reduce.
    """
    from scipy.optimize import nnls

    kind = normalize_kind(op)
    if kind != "all-reduce":
        raise MeasureError(f"the host-copy model is fitted on all-reduce rows only, not {kind}")
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    out = []
    for lo, hi in ranges:
        top = math.inf if hi is None else float(hi)
        keep = (sizes >= float(lo or 0.0)) & (sizes <= top)
        if not np.any(keep):
            raise MeasureError(f"no all-reduce row between {lo} and {hi} bytes to fit the host-copy model on")
        s, t = sizes[keep], times[keep]
        design = np.column_stack([np.full_like(t, latency_steps(kind, num_ranks)) / t,
                                  np.atleast_1d(copy_work_bytes(kind, s, num_ranks)) / t])
        (a, c), _ = nnls(design, np.ones_like(t))
        out.append(HostCopyFit(step_latency_s=float(a), copy_s_per_byte=float(c)))
    return tuple(out)


def predict_host_copy(regimes: Sequence, op: str, size_bytes, num_ranks, get) -> np.ndarray:
    """Minimum over the regimes covering each size of :func:`host_copy_time` (NaN where none covers it).
    ``get(regime, key)`` reads a regime (object or YAML mapping)."""
    size = np.asarray(size_bytes, dtype=float)
    best = np.full(np.broadcast(size, np.asarray(num_ranks)).shape, np.inf)
    for regime in regimes:
        a, c = get(regime, "step_latency_s"), get(regime, "copy_s_per_byte")
        if a is None or c is None:
            name = get(regime, "name") or "?"
            raise MeasureError(f"regime {name!r} of a host-copy tier lacks step_latency_s or copy_s_per_byte; "
                               "run tierwise calibrate again")
        lo = float(get(regime, "min_bytes") or 0.0)
        hi = get(regime, "max_bytes")
        hi = math.inf if hi is None else float(hi)
        m = get(regime, "memory_s_per_byte")
        t = host_copy_time(op, size, num_ranks, float(a), float(c), None if m is None else float(m))
        covered = (size >= lo) & (size <= hi)
        best = np.where(covered, np.minimum(best, t), best)
    return np.where(np.isfinite(best), best, np.nan)


def is_host_copy(tier: Mapping | object) -> bool:
    """Whether a fitted tier (YAML mapping or :class:`tierwise.specs.cluster.FittedTier`) uses this model."""
    model = tier.get("model") if isinstance(tier, Mapping) else getattr(tier, "model", None)
    return model == MODEL
