"""Prediction from fitted collective regimes (``tierwise calibrate``): the one rule every reader uses.

A calibrated tier (``fitted:`` in a cluster YAML, :class:`tierwise.specs.cluster.FittedTier`; or a
:class:`tierwise.measure.fit.RegimeFit` before it is written) holds size regimes fitted on one op over
``fit_ranks`` ranks. :func:`predict_fitted` turns them into the time of any op on any group size; the
estimator's collective model (:mod:`tierwise.collectives.model`) and the measure rung's report
(:func:`tierwise.measure.fit.predict_time`, ``tierwise calibrate``) both call it, so a calibrated cluster
predicts the same time wherever it is read. ``measure`` keeps only the fitting and imports this downward.

Two rules, by the tier's ``model``:

* ``bus-factor`` (the default; NCCL or multi-host sweeps): each regime is the line ``latency_s x
  (n - 1) / (fit_ranks - 1) + S x bus_factor(op, n) / busbw`` (nccl-tests' bus factor,
  :func:`tierwise.collectives.volumes.bus_factor`; :mod:`tierwise.measure.fit`). The latency was fitted
  for ``fit_ranks`` ranks; a ring's sequential steps grow as ``n - 1``, so it scales by the ratio of ring
  steps (NCCL's ring latency is per step, ``tuning.cc``; collectives-notes.md section 4.1). The time is the
  minimum over the regimes covering ``S`` (NCCL's minimum over protocols).
* ``host-copy`` (a gloo sweep with every rank on one host): the shared-host model below, for the ops it has
  work counts for; other ops use the bus-factor line of the same regimes. Its step counts already depend
  on ``n``: no latency scaling.

A size outside every regime's range (fitted sweeps start at 0 and leave the last range open, so only a
hand-written file has one) takes the nearest regime: the first below the ranges, the last above.

The shared-host (host-copy) model, whose two parameters per regime ``tierwise calibrate`` fits
(:mod:`tierwise.measure.hostcopy`): copy work and steps of gloo collectives with all ranks on one host.

Why a second model. On one host there are no per-rank links: gloo's TCP transport over loopback moves
every byte with two CPU memory copies, user -> kernel on the sender (``send``/``writev`` copies the user
buffer into socket buffers) and kernel -> user on the receiver (``recv``/``read``); loopback hands the
socket buffers over without a further copy of the data. A reduction reads two operands and writes one.
The cost of a collective is therefore the memory traffic (bytes read + bytes written) of the busiest
rank's CPU, plus a latency per sequential algorithm step, not nccl-tests' bus bytes over a link bandwidth
(:mod:`tierwise.measure.fit`)::

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
``host_memory_s_per_byte``: the DRAM rate, not a warm cache's, because the socket path streams the payload
through the shared cache between the copies. Without a measured rate, the outside copies are priced at
``copy_s_per_byte`` like every other byte. The measurements behind these choices, and the history of the
model, are in docs/measure.md ("gloo calibration on this machine").

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

import numpy as np

from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import MeasureError

__all__ = ["BUS_FACTOR", "HOST_COPY", "HOST_COPY_OPS", "EMULATED_OPS", "predict_fitted", "regime_value",
           "ring_work_bytes", "outside_copy_bytes", "copy_work_bytes", "latency_steps", "host_copy_time"]

BUS_FACTOR = "bus-factor"
HOST_COPY = "host-copy"
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


def regime_value(regime, key: str):
    """One field of a regime: a :class:`~tierwise.measure.fit.Regime` or
    :class:`~tierwise.specs.cluster.FittedRegime` (attribute) or a calibrated YAML mapping (key)."""
    return regime.get(key) if isinstance(regime, Mapping) else getattr(regime, key, None)


def predict_fitted(regimes: Sequence, op: str, size_bytes, num_ranks, *, fit_ranks=None,
                   model: str | None = None) -> np.ndarray:
    """Seconds of ``op`` on ``size_bytes`` (nccl-tests size) over ``num_ranks`` ranks from fitted
    ``regimes`` (module docstring). ``fit_ranks``: the rank count the regimes were fitted on (None: the
    same as ``num_ranks``, no latency scaling). Arrays broadcast; ``num_ranks`` >= 2.

    >>> class R:  # one regime: 10 us + S / (10 GB/s) bus bytes, fitted on 8 ranks
    ...     name, min_bytes, max_bytes, latency_s, busbw_bytes_per_s = "all", 0, None, 1e-5, 1e10
    >>> round(float(predict_fitted([R], "all-reduce", 1e6, 2)) * 1e6, 3)  # 10 us + 1 MB x 2(1)/2 / 10 GB/s
    110.0
    >>> round(float(predict_fitted([R], "all-reduce", 1e6, 16, fit_ranks=8)) * 1e6, 3)  # 15/7 x 10 us + 187.5 us
    208.929
    """
    kind = normalize_kind(op)
    if model not in (None, BUS_FACTOR, HOST_COPY):
        raise MeasureError(f"unknown fitted model {model!r}; use {BUS_FACTOR} (default) or {HOST_COPY}")
    size = np.asarray(size_bytes, dtype=float)
    n = np.asarray(num_ranks, dtype=float)
    shape = np.broadcast(size, n).shape
    host = model == HOST_COPY and kind in HOST_COPY_OPS

    def line(regime):
        if host:
            a, c = regime_value(regime, "step_latency_s"), regime_value(regime, "copy_s_per_byte")
            if a is None or c is None:
                name = regime_value(regime, "name") or "?"
                raise MeasureError(f"regime {name!r} of a host-copy tier lacks step_latency_s or copy_s_per_byte; "
                                   "run tierwise calibrate again")
            m = regime_value(regime, "memory_s_per_byte")
            return np.broadcast_to(host_copy_time(kind, size, n, float(a), float(c),
                                                  None if m is None else float(m)), shape)
        scale = 1.0 if fit_ranks is None else (n - 1.0) / max(float(fit_ranks) - 1.0, 1.0)
        busbw = regime_value(regime, "busbw_bytes_per_s")
        bus = size * bus_factor(kind, n) / float(busbw) if busbw else 0.0 * size * n
        return np.broadcast_to(float(regime_value(regime, "latency_s")) * scale + bus, shape)

    best = np.full(shape, np.inf)
    lows, highs = [], []
    for regime in regimes:
        lo = float(regime_value(regime, "min_bytes") or 0.0)
        hi = regime_value(regime, "max_bytes")
        hi = math.inf if hi is None else float(hi)
        lows.append(lo)
        highs.append(hi)
        covered = (size >= lo) & (size <= hi)
        best = np.where(covered, np.minimum(best, line(regime)), best)
    if regimes and np.any(np.isinf(best)):
        first = int(np.argmin(lows))
        last = int(np.argmax(highs))
        nearest = np.where(size < min(lows), line(regimes[first]), line(regimes[last]))
        best = np.where(np.isinf(best), nearest, best)
    return best
