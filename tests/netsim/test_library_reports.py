"""The library functions behind ``tierwise collective`` and ``simulate --emit-cluster``, called directly."""

import pytest
import yaml

from tierwise.errors import CatalogError, OutputError, SpecError
from tierwise.netsim import simulate
from tierwise.netsim.collective_report import collective_report
from tierwise.netsim.emit import write_cluster
from tierwise.specs.cluster import load_cluster
from tierwise.topology import TopologySpec, build_fabric


def test_collective_report_on_a_cluster():
    r = collective_report("all-reduce", "1GB", 16, None, "ring", "dgx-h100", None)
    assert (r["op"], r["num_ranks"], r["ranks_per_node"], r["tier"], r["algorithm"]) == (
        "all-reduce", 16, 8, "scale_out", "ring")
    assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"] * 2 * 15 / 16)
    assert "cluster_time_s" not in r
    assert any("tierwise simulate" in note for note in r["notes"])  # a ring is compared with the simulator


def test_collective_report_refuses_a_group_the_nodes_cannot_hold():
    with pytest.raises(SpecError, match=r"use 1 <= --ranks-per-node <= 8 \(the 8 GPUs per node of"):
        collective_report("all-reduce", "1GB", 16, 9, "auto", "dgx-h100", None)
    with pytest.raises(SpecError, match="send-recv is between two ranks"):
        collective_report("send-recv", "1GB", 3, None, "auto", "dgx-h100", None)


@pytest.fixture(scope="module")
def simulated():
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=64, radix=8, tiers=3))
    return fab, simulate(fab, "all-reduce", 1e9, algorithm="ring", routing="ecmp")


def test_write_cluster_writes_a_cluster_the_loader_accepts(tmp_path, simulated):
    fab, result = simulated
    out = tmp_path / "c.yaml"
    out.write_text("old")  # replaced whole
    assert write_cluster(str(out), fab, result, "simulate all-reduce", base="dgx-h100") == str(out)
    data = yaml.safe_load(out.read_text())
    assert data["base"] == "dgx-h100" and data["name"] == "fat-tree-64-simulated"
    assert data["source"] == f"tierwise simulate all-reduce (seed {result['seed']})"
    assert 0 < data["efficiency"]["scale_out"] <= 1
    assert load_cluster(str(out)).efficiency["scale_out"] == data["efficiency"]["scale_out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]  # no temporary file left


def test_write_cluster_fails_cleanly(tmp_path, simulated):
    fab, result = simulated
    with pytest.raises(CatalogError, match="nosuch"):  # the base is checked before anything is written
        write_cluster(str(tmp_path / "c.yaml"), fab, result, "x", base="nosuch")
    with pytest.raises(OutputError, match="--emit-cluster"):
        write_cluster(str(tmp_path / "no" / "c.yaml"), fab, result, "x")
    assert list(tmp_path.iterdir()) == []
