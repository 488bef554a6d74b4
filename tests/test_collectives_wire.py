"""Wire-bytes invariant for every collective kind: no algorithm or protocol beats the bytes a rank must move.

The lower bound per rank is the ring-equivalent volume of :func:`tierwise.collectives.volumes.bytes_per_rank`
(each rank's (n-1)/n S of contributions must leave it, or its (n-1)/n S of others' data must reach it; an
all-reduce moves 2 (n-1)/n S per rank whatever the algorithm, Patarasuk & Yuan 2009; a broadcast or a
send/recv delivers all of S to a rank). The one exception is in-switch reduction (NVLS): the switch reduces,
so a rank need only send its (n-1)/n S once. The rate is the one-way line rate of every link the group may
use at the same time: the scale-up link where a domain holds >= 2 members, plus the rank's share of its host's
NICs (or its host link on a PCIe server) where the group spans >= 2 domains. Efficiency, protocol overheads
and latencies only add time, so the bound must hold for every algorithm ``auto`` chooses among.
"""

import numpy as np
import pytest

from tierwise.collectives.model import algorithms_for, collective_cost
from tierwise.collectives.volumes import KINDS, bytes_per_rank
from tierwise.errors import SpecError
from tierwise.hierarchy import TierCode, group_span
from tierwise.specs.cluster import load_cluster

CLUSTERS = ("dgx-h100", "dgx-a100", "gb200-nvl72", "mi300x-8", "dgx-b200")
SIZES = np.array([1024.0, 2.0**20, 64 * 2.0**20, 2.0**30, 16 * 2.0**30])
# (ranks, stride): inside one domain, a full node, across nodes with 8 or 1 member per domain, large groups
GROUPS = ((2, 1), (8, 1), (16, 1), (2, 8), (16, 8), (64, 1), (1024, 1), (1024, 8), (72, 1), (144, 1))


def _line_rate(cluster, span):
    """One-way bytes/s a rank can drive at once over the links its group spans (no efficiency applied)."""
    rate = cluster.scale_up_bytes_per_s if int(span.ranks_per_domain) > 1 else 0.0
    if int(span.num_domains) > 1:
        rate += cluster.host_bytes_per_s if int(span.tier) == TierCode.HOST else cluster.scale_out_bytes_per_s
    return rate


def _must_move(kind, size, n, algorithm):
    if kind == "all-reduce" and algorithm == "nvls":
        return bytes_per_rank("reduce-scatter", size, n)  # in-switch reduction: each contribution sent once
    return bytes_per_rank(kind, size, n)


def _cases():
    for kind in KINDS:
        for name in CLUSTERS:
            for n, stride in GROUPS:
                if kind == "send-recv" and n != 2:
                    continue  # one transfer between two ranks
                yield pytest.param(kind, name, n, stride, id=f"{kind}-{name}-{n}x{stride}")


@pytest.mark.parametrize("kind, name, n, stride", list(_cases()))
def test_time_at_least_the_bytes_each_rank_must_move_over_its_line_rate(kind, name, n, stride):
    cluster = load_cluster(name)
    span = group_span(cluster, n, stride)
    rate = _line_rate(cluster, span)
    assert rate > 0
    for algorithm in ("auto", *algorithms_for(kind)):
        try:
            cost = collective_cost(kind, SIZES, span, cluster, algorithm)
        except SpecError:
            continue  # the algorithm does not apply to this group (nvls, hierarchical)
        chosen = list(cost.algorithm)
        np.testing.assert_allclose(cost.bytes_per_rank, bytes_per_rank(kind, SIZES, n))
        floor = np.array([_must_move(kind, s, n, a) for s, a in zip(SIZES, chosen, strict=True)])
        bound = floor / rate
        assert np.all(bound > 0)
        assert np.all(cost.time_s >= bound * (1 - 1e-9)), (algorithm, chosen, cost.time_s / bound)
        # the wire bytes the chosen algorithm reports cover what must move (in-switch reduction aside)
        wire = np.asarray(cost.scale_up_bytes) + np.asarray(cost.scale_out_bytes)
        assert np.all(wire >= floor * (1 - 1e-9)), (algorithm, chosen, wire / floor)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", CLUSTERS)
def test_one_rank_moves_nothing(kind, name):
    cluster = load_cluster(name)
    cost = collective_cost(kind, SIZES, group_span(cluster, 1, 1), cluster)
    assert np.all(cost.time_s == 0)
    assert np.all(cost.bytes_per_rank == 0)
    assert np.all(np.asarray(cost.scale_up_bytes) == 0) and np.all(np.asarray(cost.scale_out_bytes) == 0)
