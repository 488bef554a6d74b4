"""The closed-form Clos inventory equals the built graph's (issue 28: the economics block counts 2^20-GPU fabrics
without building them)."""

from __future__ import annotations

import itertools

import pytest

from tierwise.errors import TopologyError
from tierwise.topology import TopologySpec, build_fabric
from tierwise.topology.counts import clos_inventory
from tierwise.topology.metrics import inventory

CASES = [
    dict(family=f, gpus=g, radix=k, oversubscription=o, planes=p, tiers=t)
    for f, g, k, o, p, t in itertools.product(
        ("fat-tree", "rail-optimized"), (64, 200, 1024, 3000, 8192), (8, 16, 32), (1.0, 3.0), (1, 2), (None, 3))
]


@pytest.mark.parametrize("kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_counts_equal_the_graph(kw):
    spec = TopologySpec(**kw)
    try:
        fab = build_fabric(spec)
    except TopologyError as exc:
        with pytest.raises(TopologyError) as info:
            clos_inventory(spec, 400)
        assert str(info.value).split(" (")[0] == str(exc).split(" (")[0]
        return
    got = clos_inventory(spec, 400)
    want = inventory(fab)
    assert {k: v for k, v in got.items() if k != "tiers_built"} == want
    assert got["tiers_built"] == fab.params["tiers_built"]


@pytest.mark.parametrize("kw", [
    dict(family="nvl72", gpus=72 * 16, gpus_per_node=4, radix=64, nic_bandwidth="400 Gb/s"),
    dict(family="nvl72", gpus=72 * 40, gpus_per_node=4, radix=32, planes=2),
    dict(family="rail-optimized", gpus=98304, radix=144),
    dict(family="fat-tree", gpus=512, radix=16, scale_up="mesh"),
    dict(family="fat-tree", gpus=512, radix=16, scale_up="none", nics_per_node=4),
])
def test_counts_equal_the_graph_at_scale_and_scale_up(kw):
    spec = TopologySpec(**kw)
    got = clos_inventory(spec, 400)
    assert {k: v for k, v in got.items() if k != "tiers_built"} == inventory(build_fabric(spec))


def test_other_families_are_not_counted():
    assert clos_inventory(TopologySpec(family="dragonfly", gpus=256, radix=16), 400) is None


@pytest.mark.parametrize("cluster, gpus", [("dgx-h100", 4096), ("gb200-nvl72", 72 * 30), ("hgx-h100-roce", 98304),
                                           ("dgx-a100", 1024)])
def test_counted_report_prices_as_the_graph(cluster, gpus):
    """The economics block's figures from the closed-form counts equal those of the built graph's report."""
    from tierwise.specs.cluster import load_cluster
    from tierwise.topology.choose import choose_fabric
    from tierwise.topology.costs import load_prices
    from tierwise.topology.metrics import counted_report, topology_report

    cl = load_cluster(cluster)
    c = choose_fabric(cl, gpus)
    prices = load_prices()
    kw = dict(accelerator=cl.accelerator.name, gpu_power_w=cl.accelerator.power_w, fabric=c.fabric)
    graph = topology_report(build_fabric(c.spec), prices, **kw)
    counted = counted_report(c.spec, clos_inventory(c.spec, cl.nic_bytes_per_s * 8 / 1e9), prices, **kw)
    for key in ("network_capex_usd", "network_power_w", "capex_by_part_usd", "power_by_part_w", "num_switches",
                "switches_per_tier", "num_links", "bisection_bytes_per_s", "diameter_hops", "network_share_range",
                "by_reach", "links_by_medium", "servers", "topology", "switch_radix"):
        assert counted[key] == graph[key], key
    assert {k: v for k, v in counted["params"].items()} == graph["params"]
