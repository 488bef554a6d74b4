"""Accelerator, cluster and network catalogs: every entry loads and names its source; the factor-of-2 traps."""

import pytest

from tierwise.errors import CatalogError, SpecError
from tierwise.specs import catalog
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.cluster import cluster_from_mapping, load_cluster


@pytest.mark.parametrize("kind", ["accelerators", "clusters", "network"])
def test_every_entry_has_a_source(kind):
    for name, entry in catalog.entries(kind).items():
        assert str(entry.get("source", "")).strip(), f"{kind}/{name} has no source"


@pytest.mark.parametrize("name", catalog.names("accelerators"))
def test_accelerators_load(name):
    acc = load_accelerator(name)
    assert acc.peak_flops_per_s("bf16") > 0
    assert acc.scale_up_bidirectional_bytes_per_s == pytest.approx(2 * acc.scale_up_bytes_per_s)


@pytest.mark.parametrize("name", catalog.names("clusters"))
def test_clusters_load(name):
    c = load_cluster(name)
    assert c.scale_out_bytes_per_s > 0 and c.scale_up_domain >= 1


def test_dense_not_sparse_and_one_way_not_bidirectional():
    h100 = load_accelerator("h100-sxm")
    assert h100.peak_flops_per_s("bf16") == 989e12  # the 1979 on NVIDIA's sheet is with 2:4 sparsity
    assert h100.scale_up_bytes_per_s == 450e9  # NVLink 4's 900 GB/s counts both directions
    gb200 = load_accelerator("gb200")
    assert gb200.peak_flops_per_s("bf16") == 2500e12  # 360 PF per NVL72 rack is sparse: /72/2
    assert load_cluster("dgx-a100").nic_bytes_per_s == 25e9  # 200 Gb/s HDR


def test_cluster_shapes():
    assert (load_cluster("gb200-nvl72").gpus_per_node, load_cluster("gb200-nvl72").scale_up_domain) == (4, 72)
    mi = load_cluster("mi300x-8")
    assert mi.scale_up_topology == "mesh"
    assert mi.scale_up_p2p_bytes_per_s == pytest.approx(mi.scale_up_bytes_per_s / 7)


def test_override_and_errors():
    c = cluster_from_mapping({"base": "dgx-h100", "nic_bandwidth": "200 Gb/s", "nics_per_node": 4})
    assert c.scale_out_bytes_per_s == pytest.approx(4 * 25e9 / 8)
    with pytest.raises(CatalogError, match="did you mean 'dgx-h100'"):
        load_cluster("dgx-h10")
    with pytest.raises(SpecError, match="unknown key 'nic_speed'"):
        cluster_from_mapping({"base": "dgx-h100", "nic_speed": "400 Gb/s"})
    with pytest.raises(SpecError, match="gpus_per_node=0 in cluster is out of range; use 1 <= gpus_per_node"):
        cluster_from_mapping({"base": "dgx-h100", "gpus_per_node": 0})
    with pytest.raises(SpecError, match="no bf16|no fp8"):
        load_accelerator("a100-sxm-80gb").peak_flops_per_s("fp8")


def test_cluster_file_with_fitted_regimes(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("""
base: dgx-h100
name: calibrated
fitted:
  scale_out:
    num_ranks: 32
    ranks_per_domain: 8
    op: all-reduce
    regimes:
      - {name: small, min_bytes: 0, max_bytes: 65536, latency_s: 3.7e-05, busbw_bytes_per_s: 2.0e+10}
      - {name: large, min_bytes: 65536, max_bytes: null, latency_s: 4.2e-04, busbw_bytes_per_s: 3.3e+11}
""")
    c = load_cluster(str(path))
    assert c.name == "calibrated" and len(c.fitted["scale_out"].regimes) == 2
    from tierwise.collectives.model import collective_cost
    from tierwise.hierarchy import group_span

    cost = collective_cost("all-reduce", 8 * 2**30, group_span(c, 32, 1), c)
    assert cost.algorithm == "fitted"
    busbw = 8 * 2**30 * 2 * 31 / 32 / float(cost.time_s)
    assert busbw == pytest.approx(3.3e11, rel=0.01)
