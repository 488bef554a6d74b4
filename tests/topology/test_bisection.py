"""Bisection (one-way): closed forms equal the min cut of the canonical partition, and no random balanced
partition cuts less (Al-Fares et al. 2008; Kim et al. 2008; Dally & Towles 2004)."""

import numpy as np
import pytest

from tierwise.topology import TopologySpec, build_fabric
from tierwise.topology.graph import Fabric
from tierwise.topology.metrics import bisection_bytes_per_s, canonical_partition, endpoints


def min_cut(fab: Fabric, side_a: np.ndarray) -> float:
    """Max flow (= min cut) in bytes/s from endpoints in ``side_a`` to the others, over scale-out links.

    networkx's max flow, a test-only oracle (networkx is in the ``test`` extra, not a runtime dependency).
    """
    nx = pytest.importorskip("networkx")

    keep = fab.link_tier >= (2 if fab.family == "torus" else 1)
    g = nx.DiGraph()
    for s, d, c in zip(fab.link_src[keep].tolist(), fab.link_dst[keep].tolist(), fab.link_cap[keep].tolist(),
                       strict=True):
        if g.has_edge(s, d):
            g[s][d]["capacity"] += c
        else:
            g.add_edge(s, d, capacity=c)
    ep = endpoints(fab)
    for e in ep[side_a].tolist():
        g.add_edge("S", e)  # no capacity attribute = infinite
    for e in ep[~side_a].tolist():
        g.add_edge(e, "T")
    value, _ = nx.maximum_flow(g, "S", "T")
    return float(value)



CASES = [
    TopologySpec(family="fat-tree", gpus=16, gpus_per_node=1, radix=4, tiers=3),  # k=4 full 3-tier
    TopologySpec(family="fat-tree", gpus=32, gpus_per_node=1, radix=8, tiers=2),  # k=8 full 2-tier
    TopologySpec(family="fat-tree", gpus=36, gpus_per_node=1, radix=8, tiers=2, oversubscription=3),
    TopologySpec(family="fat-tree", gpus=64, gpus_per_node=2, radix=8, tiers=3),  # 2 pods, trimmed core
    TopologySpec(family="fat-tree", gpus=48, gpus_per_node=1, radix=6, tiers=3, oversubscription=2),
    TopologySpec(family="rail-optimized", gpus=64, gpus_per_node=4, radix=8, tiers=3),
    TopologySpec(family="torus", gpus=16, dims="4x4"),
    TopologySpec(family="torus", gpus=32, dims="4x4x2"),
    TopologySpec(family="dragonfly", gpus=64, gpus_per_node=2, radix=8),
]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: f"{s.family}-{s.gpus}-{s.radix}-{s.oversubscription}")
def test_closed_form_is_the_min_over_balanced_cuts(spec):
    fab = build_fabric(spec)
    closed = bisection_bytes_per_s(fab)
    assert closed > 0
    canonical = canonical_partition(fab)
    assert canonical.sum() * 2 == canonical.size
    assert min_cut(fab, canonical) == pytest.approx(closed, rel=1e-9)
    rng = np.random.default_rng(5)
    n = fab.num_nics
    for _ in range(25):
        side = np.zeros(n, dtype=bool)
        side[rng.permutation(n)[: n // 2]] = True
        assert min_cut(fab, side) >= closed * (1 - 1e-9)


def test_oversubscription_halves_bisection():
    full = build_fabric(TopologySpec(family="fat-tree", gpus=192, radix=12, tiers=3))
    half = build_fabric(TopologySpec(family="fat-tree", gpus=192, radix=12, tiers=3, oversubscription=2))
    assert bisection_bytes_per_s(half) == pytest.approx(bisection_bytes_per_s(full) / 2)
