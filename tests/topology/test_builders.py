"""Fabric builders: counts against the papers' closed forms, path validity in every family, bad input."""

import numpy as np
import pytest

from tierwise.errors import TopologyError
from tierwise.netsim.routing import route
from tierwise.topology import TopologySpec, build_fabric, spec_from_mapping
from tierwise.topology.metrics import inventory

FAMILY_SPECS = [
    TopologySpec(family="fat-tree", gpus=128, radix=8, tiers=3),
    TopologySpec(family="fat-tree", gpus=48, radix=8, tiers=2, oversubscription=3, gpus_per_node=4),
    TopologySpec(family="rail-optimized", gpus=128, radix=8, tiers=3),
    TopologySpec(family="rail-only", gpus=128, radix=8),
    TopologySpec(family="dragonfly", gpus=64, radix=8, gpus_per_node=2),
    TopologySpec(family="torus", gpus=64, dims="4x4x4", gpus_per_node=1),
    TopologySpec(family="nvl72", gpus=144, radix=16, tiers=3, gpus_per_node=4),
    TopologySpec(family="fat-tree", gpus=64, radix=8, tiers=3, scale_up="mesh"),
    TopologySpec(family="fat-tree", gpus=64, radix=8, tiers=3, nics_per_node=2),
]


@pytest.mark.parametrize("k", [4, 8])
def test_k_ary_fat_tree_counts_match_al_fares(k):
    # Al-Fares et al. 2008 section 3: k^3/4 hosts, 5k^2/4 switches, k^3/4 links per tier
    hosts = k**3 // 4
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=hosts, gpus_per_node=1, radix=k, tiers=3))
    inv = inventory(fab)
    assert inv["num_switches"] == 5 * k * k // 4
    assert inv["switches_per_tier"] == {"tier1": k * k // 2, "tier2": k * k // 2, "tier3": k * k // 4}
    assert inv["cables_by_tier"] == {"access": hosts, "tier2": hosts, "tier3": hosts}


def test_trimmed_core_keeps_every_port():
    # 2 pods of a radix-8 tree: cores trimmed to fewer switches with parallel links, same uplink count
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=64, gpus_per_node=8, radix=8, tiers=3))
    inv = inventory(fab)
    assert inv["cables_by_tier"]["tier3"] == inv["cables_by_tier"]["tier2"] == 64
    assert inv["switches_per_tier"]["tier3"] < 16


@pytest.mark.parametrize("spec", FAMILY_SPECS, ids=lambda s: f"{s.family}-{s.scale_up}-{s.oversubscription}")
def test_every_path_is_a_chain_from_source_to_destination(spec):
    fab = build_fabric(spec)
    rng = np.random.default_rng(0)
    s = rng.integers(0, fab.num_gpus, 400)
    d = rng.integers(0, fab.num_gpus, 400)
    keep = s != d
    s, d = s[keep], d[keep]
    paths, ok = route(fab, s, d, seed=3)
    assert ok.all()
    # a GPU reaches the fabric through its NIC (no explicit GPU-NIC link): identify the two nodes
    same = np.arange(fab.num_nodes)
    if fab.family != "torus":
        same[: fab.num_gpus] = fab.nic_node[fab.gpu_nic]
        s_end, d_end = same[s], same[d]
    else:
        s_end, d_end = s, d
    for i in range(s.size):
        links = paths[i][paths[i] >= 0]
        assert links.size >= 1
        assert same[fab.link_src[links[0]]] == s_end[i]
        assert same[fab.link_dst[links[-1]]] == d_end[i]
        assert np.all(same[fab.link_dst[links[:-1]]] == same[fab.link_src[links[1:]]])


def test_rail_only_crosses_rails_over_scale_up_first():
    fab = build_fabric(TopologySpec(family="rail-only", gpus=64, radix=8))
    paths, _ = route(fab, np.array([0]), np.array([8 + 3]))  # node 0 rail 0 -> node 1 rail 3
    links = paths[0][paths[0] >= 0]
    assert fab.link_tier[links[0]] == 0 and fab.link_dst[links[1]] == 3  # forwarded to GPU 3 of node 0


def test_131k_gpus_build_in_arrays():
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=131072, radix=128, tiers=3))
    assert fab.num_nics == 131072
    assert inventory(fab)["switches_per_tier"] == {"tier1": 2048, "tier2": 2048, "tier3": 1024}


def test_radix_too_small_names_values_and_fix():
    with pytest.raises(TopologyError, match=r"radix 16 is too small for 16384 GPUs in a 3-tier fat tree "
                                            r"\(max 1024\); use --radix >= \d+"):
        build_fabric(TopologySpec(family="fat-tree", gpus=16384, radix=16, tiers=3))


def test_oversubscription_below_one():
    with pytest.raises(TopologyError, match="oversubscription 0.5 is below 1"):
        build_fabric(TopologySpec(family="fat-tree", gpus=64, radix=8, oversubscription=0.5))


def test_unknown_topology_key():
    with pytest.raises(TopologyError, match="unknown key 'radixx'.*did you mean 'radix'"):
        spec_from_mapping({"family": "fat-tree", "radixx": 8})


def test_torus_dims_must_hold_the_gpus():
    with pytest.raises(TopologyError, match="hold 16 GPUs"):
        build_fabric(TopologySpec(family="torus", gpus=64, dims="4x4"))


def test_hops_fat_tree_average_matches_pair_counting():
    from tierwise.netsim.routing import route
    from tierwise.topology.metrics import hops

    # k=4 3-tier, one GPU per node: 16 NICs, 2 per leaf, 4 per pod. From any NIC: 1 at 2 hops,
    # 2 at 4 hops, 12 at 6 hops -> (2 + 8 + 72) / 15
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=16, gpus_per_node=1, radix=4, tiers=3))
    h = hops(fab, route)
    assert h["diameter_hops"] == 6 and h["max_hops_seen"] == 6
    assert h["avg_hops"] == pytest.approx(82 / 15)
    assert hops(fab)["avg_hops"] is None


def test_topology_does_not_import_netsim():
    import pathlib

    import tierwise.topology

    for path in pathlib.Path(tierwise.topology.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "import tierwise.netsim" not in text and "from tierwise.netsim" not in text, path.name
