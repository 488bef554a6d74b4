"""``tierwise topo`` and ``tierwise simulate`` run in-process: JSON keys, emitted cluster, exit code 2."""

import json

import pytest
import yaml

from tierwise.cli import main


def _json(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def test_topo_fat_tree_json(capsys):
    r = _json(capsys, ["topo", "fat-tree", "--gpus", "1024", "--radix", "32", "--tiers", "3", "--json"])
    for key in ("num_switches", "num_links", "bisection_bytes_per_s", "diameter_hops", "network_capex_usd",
                "network_power_w", "switches_per_tier", "cables_by_speed", "transceivers_by_speed", "avg_hops",
                "network_share_of_capex", "cost_assumptions"):
        assert key in r
    assert r["bisection_bytes_per_s"] == pytest.approx(1024 / 2 * 50e9)
    assert r["diameter_hops"] == 6
    assert "gpu_cost" in r["cost_assumptions"]


@pytest.mark.parametrize("family", ["rail-optimized", "rail-only", "dragonfly", "nvl72", "torus"])
def test_topo_families_print(capsys, family):
    gpus = "144" if family == "nvl72" else "64"
    rc = main(["topo", family, "--gpus", gpus, "--radix", "16"])
    assert rc == 0
    assert "bisection" in capsys.readouterr().out


def test_simulate_json(capsys):
    r = _json(capsys, ["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "8",
                       "--size", "1GB", "--algorithm", "ring", "--json"])
    for key in ("time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "analytic_time_s", "bottleneck_links"):
        assert key in r
    assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"] * 2 * 63 / 64)
    assert r["time_s"] == pytest.approx(r["analytic_time_s"], rel=0.02)


def test_simulate_with_failures_reports_healthy_time(capsys):
    r = _json(capsys, ["simulate", "all-to-all", "--gpus", "64", "--radix", "8", "--fail-links", "2%",
                       "--routing", "ecmp", "--json"])
    assert "healthy_time_s" in r and r["failures"]["failed_cables"] > 0


def test_emit_cluster(tmp_path, capsys):
    out = tmp_path / "c.yaml"
    rc = main(["simulate", "all-reduce", "--gpus", "64", "--radix", "8", "--routing", "ecmp",
               "--emit-cluster", str(out)])
    assert rc == 0
    data = yaml.safe_load(out.read_text())
    assert set(data) == {"base", "name", "gpus_per_node", "scale_up_domain", "nics_per_node", "nic_bandwidth",
                         "efficiency", "source"}
    assert 0 < data["efficiency"]["scale_out"] <= 1
    assert data["nic_bandwidth"] == "400 Gb/s"
    assert "seed 1" in data["source"]
    # estimate and plan accept it: the simulated ECMP loss lowers the scale-out rate the collectives see
    from tierwise.collectives.model import collective_cost
    from tierwise.hierarchy import group_span
    from tierwise.specs.cluster import load_cluster

    emitted, base = load_cluster(str(out)), load_cluster("dgx-h100")
    assert emitted.efficiency["scale_out"] == data["efficiency"]["scale_out"]
    t = [float(collective_cost("all-reduce", 1e9, group_span(c, 64, 1), c).time_s) for c in (emitted, base)]
    assert t[0] >= t[1]


def test_topology_yaml(tmp_path, capsys):
    f = tmp_path / "t.yaml"
    f.write_text("family: fat-tree\ngpus: 32\nradix: 8\ntiers: 2\n")
    r = _json(capsys, ["simulate", "permutation", "--topology", str(f), "--json"])
    assert r["topology"] == "fat-tree" and r["num_ranks"] == 32


def _error(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
    return err


def test_radix_too_small_exit_2(capsys):
    err = _error(capsys, ["topo", "fat-tree", "--gpus", "16384", "--radix", "16", "--tiers", "3"])
    assert "radix 16 is too small for 16384 GPUs in a 3-tier fat tree (max 1024); use --radix >=" in err


def test_oversubscription_below_one_exit_2(capsys):
    err = _error(capsys, ["topo", "fat-tree", "--gpus", "64", "--radix", "8", "--oversubscription", "0.5"])
    assert "--oversubscription 0.5 is out of range; use 1 <= --oversubscription <= 1,024" in err


def test_failing_more_links_than_exist_exit_2(capsys):
    err = _error(capsys, ["simulate", "all-reduce", "--gpus", "16", "--gpus-per-node", "1", "--radix", "4",
                          "--fail-links", "1000"])
    assert "asks to fail 1000 scale-out cables but the fabric has only 48" in err


def test_topology_yaml_unknown_key_exit_2(tmp_path, capsys):
    f = tmp_path / "t.yaml"
    f.write_text("family: fat-tree\ngpus: 64\nradixx: 8\n")
    err = _error(capsys, ["simulate", "all-reduce", "--topology", str(f)])
    assert "unknown key 'radixx'" in err and "did you mean 'radix'" in err


def test_price_file_override_and_unknown_key(tmp_path, capsys):
    p = tmp_path / "p.yaml"
    p.write_text("switch_usd: {value: 60000, source: quote}\n")
    base = _json(capsys, ["topo", "fat-tree", "--gpus", "64", "--radix", "8", "--json"])
    more = _json(capsys, ["topo", "fat-tree", "--gpus", "64", "--radix", "8", "--prices", str(p), "--json"])
    assert more["capex_by_part_usd"]["switches"] == pytest.approx(2 * base["capex_by_part_usd"]["switches"])
    p.write_text("switch_price: 1\n")
    err = _error(capsys, ["topo", "fat-tree", "--gpus", "64", "--radix", "8", "--prices", str(p)])
    assert "unknown key 'switch_price'" in err
