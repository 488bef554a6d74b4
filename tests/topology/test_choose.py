"""The one fabric chooser (issue 28): fewest tiers of the cluster's switch, then a larger-radix generation, then
planes; the user's overrides; planes as built; one-line errors."""

from __future__ import annotations

import pytest

from tierwise.errors import TopologyError
from tierwise.specs.cluster import load_cluster
from tierwise.topology import TopologySpec, build_fabric
from tierwise.topology.choose import FabricOverrides, choose_fabric, choose_for_spec
from tierwise.topology.costs import by_reach
from tierwise.topology.fat_tree import max_endpoints
from tierwise.topology.metrics import inventory


@pytest.mark.parametrize("cluster, gpus, radix, tiers, planes", [
    ("dgx-h100", 512, 64, 2, 1),          # 512 NICs: 2 tiers of 64 ports hold 2,048
    ("dgx-h100", 65536, 64, 3, 1),        # Quantum-2's 3-tier maximum, k^3/4 (SemiAnalysis)
    ("dgx-h100", 98304, 144, 3, 1),       # past 65,536: Quantum-X800, 144^3/4 = 746,496
    ("dgx-a100", 98304, 128, 3, 1),       # 200G: Quantum-2 as 128 x 200G, 524,288 NICs in 3 tiers
    ("hgx-h100-roce", 98304, 128, 3, 1),  # Ethernet 51.2T: 128 x 400G
    ("hgx-h100-roce", 2**20, 128, 3, 2),  # past 524,288 and no larger Ethernet switch at 400G: 2 planes
    ("dgx-h100", 2**20, 144, 3, 2),       # past 746,496: 2 planes of X800
    ("gb200-nvl72", 98280, 144, 3, 1),    # 1,365 racks, 4 NICs per 4-GPU host
])
def test_fabric_follows_the_gpu_count(cluster, gpus, radix, tiers, planes):
    c = choose_fabric(load_cluster(cluster), gpus)
    assert (c.spec.radix, c.tiers, c.planes) == (radix, tiers, planes)
    nics = c.spec.gpus // c.spec.gpus_per_node * c.spec.nics
    assert max_endpoints(radix, tiers) * planes >= nics
    if planes == 1 and tiers > 1:
        assert max_endpoints(radix, tiers - 1) < nics  # no fewer tiers would do
    assert c.reason and f"radix {radix}" in c.reason


def test_reason_says_why_the_larger_switch():
    c = choose_fabric(load_cluster("dgx-h100"), 98304)
    assert "98,304 NICs exceed Quantum-2 QM9700's 65,536 in 3 tiers" in c.reason
    assert "Quantum-X800" in c.switch


def test_overrides_fix_a_step():
    cl = load_cluster("dgx-h100")
    assert choose_fabric(cl, 4096, FabricOverrides(radix=128)).spec.radix == 128
    assert choose_fabric(cl, 4096, FabricOverrides(fabric="roce")).spec.radix == 128  # Ethernet 128 x 400G
    c = choose_fabric(cl, 4096, FabricOverrides(topology="fat-tree", oversubscription=3.0))
    assert c.spec.family == "fat-tree" and c.spec.oversubscription == 3.0 and "3:1" in c.reason
    assert choose_fabric(cl, 4096, FabricOverrides(tiers=3)).tiers == 3


@pytest.mark.parametrize("overrides, needle", [
    (FabricOverrides(radix=64), "--gpus 1,048,576 (1,048,576 NICs) is more than any fabric of up to 3 tiers and 8 "
                                "planes of radix 64 holds (524,288 NICs); use --radix >= 82"),
    (FabricOverrides(tiers=2), "--tiers 3"),
    (FabricOverrides(tiers=4), "use 1 <= --tiers <= 3"),
    (FabricOverrides(radix=63), "--radix 63 must be an even number"),
    (FabricOverrides(topology="hypercube"), "--topology 'hypercube' is unknown"),
    (FabricOverrides(fabric="myrinet"), "--fabric 'myrinet' is unknown"),
    (FabricOverrides(oversubscription=0.5), "--oversubscription 0.5 is out of range"),
    (FabricOverrides(radix=512), "--radix 512 is more ports at 400 Gb/s than any switch in the catalog offers "
                                 "(Quantum-X800 Q3400: 144); use --radix <= 144"),
])
def test_bad_overrides_are_one_line(overrides, needle):
    with pytest.raises(TopologyError, match=needle.replace("(", r"\(").replace(")", r"\)")) as info:
        choose_fabric(load_cluster("dgx-h100"), 2**20 if overrides.radix == 64 else 98304, overrides)
    assert "\n" not in str(info.value)


def test_radix_64_planes_hold_98304():
    """With --radix 64 fixed, 98,304 NICs need 2 planes of 49,152 (each under 65,536 in 3 tiers)."""
    c = choose_fabric(load_cluster("dgx-h100"), 98304, FabricOverrides(radix=64))
    assert (c.spec.radix, c.planes, c.tiers) == (64, 2, 3)


def test_gpus_past_the_bound():
    with pytest.raises(TopologyError, match="1,179,648 \\(the job's GPUs and their spares\\)"):
        choose_fabric(load_cluster("dgx-h100"), 2**20 + 2**17 + 8)
    assert choose_fabric(load_cluster("dgx-h100"), 2**20 + 2976).planes == 2  # 2^20 GPUs and their spares


def test_planes_as_built():
    """Two planes are two Clos trees over the rails split in halves: each NIC in the tree of its rail, twice the
    switches of one plane of half the NICs, and cross-plane traffic through the scale-up domain (PXN)."""
    spec = TopologySpec(family="rail-optimized", gpus=4096, radix=32, planes=2)
    fab = build_fabric(spec)
    trees = fab.tables["trees"]
    assert len(trees) == 2
    rail = fab.gpu_nic % 8
    assert ((fab.tables["nic_tree"][fab.gpu_nic] == 0) == (rail < 4)).all()
    one = inventory(build_fabric(TopologySpec(family="rail-optimized", gpus=2048, radix=32)))
    both = inventory(fab)
    assert both["num_switches"] == 2 * one["num_switches"]
    assert both["num_cables"] == 2 * one["num_cables"]
    with pytest.raises(TopologyError, match="planes=3 must divide the 8 NICs per node"):
        build_fabric(TopologySpec(family="rail-optimized", gpus=64, radix=32, planes=3))


def test_topo_spec_choice_matches_cluster_choice():
    spec = TopologySpec(family="fat-tree", gpus=100000, nic_bandwidth="400 Gb/s")
    c = choose_for_spec(spec, "ib")
    assert (c.spec.radix, c.tiers, c.planes) == (144, 3, 1)


def test_cables_by_reach_add_up():
    """100,000 GPUs (topo fat-tree --gpus 100000): every cable in one reach class, two optical ends per optical
    cable, and the NIC ends are the NICs (one 400G module each; S21's 100K build: ~98,304 GPU-to-leaf)."""
    c = choose_for_spec(TopologySpec(family="fat-tree", gpus=100000), "ib")
    inv = inventory(build_fabric(c.spec))
    r = by_reach(inv, copper_access=False)
    assert sum(r["cables"].values()) == inv["num_cables"] == 303688
    assert r["cables"] == {"copper": 0, "multimode": 100000 + 100008, "single-mode": 103680}
    assert sum(r["transceiver_ends"].values()) == 2 * inv["num_cables"]
    assert inv["transceivers_nic"] == 100000
    assert "storage" in r["left_out"]
    assert by_reach(inv, copper_access=True)["cables"]["copper"] == 100000


def test_cluster_file_fixes_the_fabric_and_flags_win(tmp_path):
    from tierwise.errors import SpecError

    path = tmp_path / "c.yaml"
    path.write_text("base: dgx-h100\nfabric: {radix: 64, oversubscription: 2}\n")
    cl = load_cluster(str(path))
    c = choose_fabric(cl, 98304)
    assert (c.spec.radix, c.spec.oversubscription) == (64, 2.0) and c.planes >= 2
    assert choose_fabric(cl, 98304, FabricOverrides(radix=144)).spec.radix == 144
    path.write_text("base: dgx-h100\nfabric: {radix: 0}\n")
    with pytest.raises(SpecError, match="radix"):
        load_cluster(str(path))
    path.write_text("base: dgx-h100\nfabric: {switches: 3}\n")
    with pytest.raises(SpecError, match="switches"):
        load_cluster(str(path))
