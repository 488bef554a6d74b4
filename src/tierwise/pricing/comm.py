"""Traffic priced on the tier its group spans: collective records through :mod:`tierwise.collectives`, groups
placed by :mod:`tierwise.hierarchy`, memoized inside :func:`comm_memo` blocks (a fit re-estimates the same
plans many times with new compute parameters; communication does not depend on them)."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from tierwise.collectives.model import collective_cost as _collective_cost
from tierwise.hierarchy import GroupHops, group_hops, group_span, pair_span
from tierwise.specs.parameters import Parameters

_COMM_MEMO: dict | None = None


def price_collective(kind, size, span, cluster, *, parameters: Parameters):
    """:func:`tierwise.collectives.model.collective_cost` under ``parameters``, memoized inside
    :func:`comm_memo` blocks.

    Communication costs do not depend on the ``compute:`` parameters, so a fit that re-estimates the same
    plans many times with new compute parameters reuses them (a pure speed-up: same results).
    """
    if _COMM_MEMO is None:
        return _collective_cost(kind, size, span, cluster, parameters=parameters)
    size_arr = np.asarray(size, dtype=float)
    key = (kind, cluster.fingerprint, parameters.fingerprint, size_arr.tobytes(), size_arr.shape,
           *(np.asarray(getattr(span, f)).tobytes() for f in span.__dataclass_fields__))
    if key not in _COMM_MEMO:
        _COMM_MEMO[key] = _collective_cost(kind, size, span, cluster, parameters=parameters)
    return _COMM_MEMO[key]


def _memo(key, make):
    """``make()``, memoized under ``key()`` inside :func:`comm_memo` blocks (placement does not depend on the
    ``compute:`` parameters either); outside them the key is never built."""
    if _COMM_MEMO is None:
        return make()
    k = key()
    if k not in _COMM_MEMO:
        _COMM_MEMO[k] = make()
    return _COMM_MEMO[k]


def _arrays_key(*arrays):
    return tuple(x for a in arrays if a is not None for x in (np.asarray(a).tobytes(), np.asarray(a).shape))


def placed_span(cluster, size, stride, outer_size=None, outer_stride=None):
    """:func:`tierwise.hierarchy.group_span`, memoized like :func:`_comm` inside :func:`comm_memo` blocks."""
    return _memo(lambda: ("span", cluster.fingerprint, outer_size is None,
                          *_arrays_key(size, stride, outer_size, outer_stride)),
                 lambda: group_span(cluster, size, stride, outer_size, outer_stride))


def placed_hops(cluster, size, stride, *, ring: bool) -> GroupHops:
    """:func:`tierwise.hierarchy.group_hops`, memoized like :func:`_span`."""
    return _memo(lambda: ("hops", ring, cluster.fingerprint, *_arrays_key(size, stride)),
                 lambda: group_hops(cluster, size, stride, ring=ring))


def hop_times(cluster, msg_bytes, hops: GroupHops, *, parameters: Parameters) -> list[np.ndarray | None]:
    """Seconds of one send/recv of ``msg_bytes`` across a hop of each class of ``hops`` (None for a class no
    group of the batch uses): the transfer priced on the tier that hop crosses."""
    out = []
    for k in range(len(hops.classes)):
        if np.any(hops.hops[k] > 0):
            # one geometry per class: a span of one element, broadcast against the message sizes
            span = pair_span(cluster, [k])
            cost = price_collective("send-recv", msg_bytes, span, cluster, parameters=parameters)
            out.append(np.broadcast_to(cost.time_s, hops.slowest.shape))
        else:
            out.append(None)
    return out


def pick(index, per_class: list[np.ndarray | None]) -> np.ndarray:
    """The entry of ``per_class`` at each element's class ``index`` (0 where the index is -1: one rank)."""
    out = np.zeros(np.shape(index))
    for k, values in enumerate(per_class):
        if values is not None:
            out = np.where(index == k, values, out)
    return out


@contextmanager
def comm_memo():
    """Memoize communication costs for the duration of the block (see :func:`_comm`)."""
    global _COMM_MEMO
    outer = _COMM_MEMO
    _COMM_MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _COMM_MEMO = outer


def price_records(records, span, cluster, n, *, parameters: Parameters):
    """Seconds and ring-equivalent bytes per rank of the collective ``records`` of one axis (all on one
    group ``span``), per layer or micro-batch (each record's calls over every phase), and the seconds of one
    call of each record; a kind no plan of the batch uses is not priced."""
    time, bytes_, one_call = np.zeros(n), np.zeros(n), []
    for r in records:
        if not np.any(r.calls > 0):
            one_call.append(np.zeros(n))
            continue
        cost = price_collective(r.kind, r.bytes, span, cluster, parameters=parameters)
        time = time + r.calls * cost.time_s
        bytes_ = bytes_ + r.calls * cost.bytes_per_rank
        one_call.append(cost.time_s)
    return time, bytes_, one_call


def two_axis_span(cluster, a, stride_a, b, stride_b):
    """Span of the ranks of two axes together (``a`` ranks at ``stride_a`` times ``b`` at ``stride_b``: cp x
    dp, whose ranks hold the same weights). Adjacent in the placement order they form one strided group;
    with another axis between them (``cp-tp-dp-pp``) a two-axis group whose blocks hold the product of the
    two axes' members (:func:`tierwise.hierarchy.group_span`), not ``a x b`` consecutive ranks."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    stride_a, stride_b = np.asarray(stride_a, dtype=np.int64), np.asarray(stride_b, dtype=np.int64)
    if np.all(stride_b == stride_a * a):  # the default orders: b right outside a (also every a = 1 at b's stride)
        return placed_span(cluster, a * b, stride_a)
    a_inner = stride_a <= stride_b
    size_in, stride_in = np.where(a_inner, a, b), np.where(a_inner, stride_a, stride_b)
    size_out, stride_out = np.where(a_inner, b, a), np.where(a_inner, stride_b, stride_a)
    adjacent = (stride_out == stride_in * size_in) | (size_in == 1) | (size_out == 1)
    if np.all(adjacent):  # the default orders (cp and dp next to each other) and every plan without cp
        return placed_span(cluster, size_in * size_out, np.where(size_in == 1, stride_out, stride_in))
    return placed_span(cluster, np.where(adjacent, size_in * size_out, size_in),
                 np.where(size_in == 1, stride_out, stride_in),
                 np.where(adjacent, 1, size_out), np.where(adjacent, 1, stride_out))


_CURVES: dict = {}
GRID_TOKENS = 2.0 ** np.arange(0, 24.125, 0.125)
"""Token counts at which :func:`price_per_token_records` tabulates each record: 1 to 2^24, eight points per
octave. The collective model is a minimum of affine lines (one per algorithm and protocol), so a chord across an
algorithm switch undershoots it; at four points per octave that reached 0.62% (ring LL to NVLS on 16 NVL72 GPUs
at 100 tokens, once the rack's cable latency moved the switch into one cell), at eight it stays under 0.5%."""


def _curve(cluster, kind: str, group: int, stride: int, bytes_per_token: float, parameters: Parameters) -> np.ndarray:
    """Time of ``kind`` over ``group`` ranks at ``stride`` at every :data:`GRID_TOKENS` (one vectorized
    :func:`price_collective` call per geometry, kept for the process, keyed on the cluster's content and the
    ``parameters``' fingerprint: a planner's bisections query the same few geometries hundreds of times)."""
    key = (cluster.fingerprint, kind, group, stride, bytes_per_token, parameters.fingerprint)
    if key not in _CURVES:
        size = GRID_TOKENS * bytes_per_token
        span = group_span(cluster, np.full(size.shape, group), stride)
        _CURVES[key] = _collective_cost(kind, size, span, cluster, parameters=parameters).time_s
    return _CURVES[key]


def _geometries(size, stride, per_token):
    """The distinct (ranks, stride, bytes per token) of a record's groups of more than one rank: one pass over
    the sizes when stride and bytes per token are one value (an inference step's records), else row-unique."""
    flat_s, flat_b = np.ravel(stride), np.ravel(per_token)
    if flat_s.size and np.all(flat_s == flat_s[0]) and np.all(flat_b == flat_b[0]):
        return [(g, flat_s[0], flat_b[0]) for g in np.unique(size) if g > 1]
    rows = np.unique(np.stack([np.ravel(size), flat_s, flat_b], axis=1), axis=0)
    return [tuple(row) for row in rows if row[0] > 1]


def price_per_token_records(records, cluster, tokens, *, parameters: Parameters, launch: float = 0.0) -> np.ndarray:
    """Seconds of ``records`` per their ``per`` (each record's forward calls times one call's time), for the
    record bytes proportional to ``tokens`` (an inference step's records: :func:`tierwise.workload.traffic.
    forward_traffic`), read off a tabulated curve of :func:`tierwise.collectives.model.collective_cost` per group
    geometry (linear between eighth-octave points: the collective model is a minimum of affine lines in the
    size, so the chord is within a fraction of a percent of it), each call less ``launch`` seconds of host
    launch (CUDA graphs replay the step: no per-collective launch from the host)."""
    tokens = np.asarray(tokens, dtype=float)
    out = np.zeros(tokens.shape)
    for r in records:
        calls = np.broadcast_to(r.counts["forward"], tokens.shape)
        if not np.any(calls > 0):
            continue
        per_token = np.round(np.asarray(r.bytes, dtype=float) / np.maximum(tokens, 1e-30), 6)
        size = np.broadcast_to(r.size, tokens.shape)
        stride = np.broadcast_to(r.stride, tokens.shape)
        per_token = np.broadcast_to(per_token, tokens.shape)
        one = np.zeros(tokens.shape)
        for g, s, b in _geometries(size, stride, per_token):
            sel = (size == g) & (stride == s) & (per_token == b)
            t = np.interp(tokens, GRID_TOKENS, _curve(cluster, r.kind, int(g), int(s), float(b), parameters))
            one = np.where(sel, np.maximum(t - launch, 0.0), one)
        out = out + calls * one
    return out
