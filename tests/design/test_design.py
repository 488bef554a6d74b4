"""Cost model, design comparison and the generation trend (issue 17)."""

import json
from pathlib import Path

import pytest

from tierwise.design.cost import economics, fabric_cost
from tierwise.design.designs import compare_designs, pareto_front
from tierwise.design.trend import generation_trend
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.topology.costs import load_prices


@pytest.fixture(scope="module")
def designs():
    return compare_designs(load_model("llama3.1-70b"), 576, global_batch=512, seq=4096, tokens=1e12, budget=2e7)


@pytest.fixture(scope="module")
def trend():
    return generation_trend(load_model("llama3.1-70b"), 576, global_batch=512, seq=4096)


def test_economics_follows_its_formula():
    cl = load_cluster("dgx-h100")
    prices = load_prices()
    e = economics(1e6, cl, 1024, prices, tokens=1e12, life_years=4, pue=1.2, usd_per_kwh=0.1)
    usd_per_s = e["capex_usd"]["total"] / (4 * 365.25 * 86400) + e["power_w"]["it"] * 1.2 * 0.1 / 3.6e6
    assert e["usd_per_million_tokens"] == pytest.approx(usd_per_s / 1e6 * 1e6)
    assert e["joules_per_token"] == pytest.approx(e["power_w"]["it"] * 1.2 / 1e6)
    assert e["time_to_train_s"] == pytest.approx(1e6)
    assert e["capex_usd"]["servers"] == 128 * prices["server_h100_usd"]["value"]
    assert e["power_w"]["servers"] == pytest.approx(1024 * (700 + 575))
    assert not any(a.startswith("pue") for a in e["assumed"])  # given, so not assumed
    assert any(a.startswith("pue") for a in economics(1e6, cl, 1024, prices)["assumed"])


def test_nvl72_is_priced_as_racks():
    net = fabric_cost(load_cluster("gb200-nvl72"), 144, load_prices())
    assert net["servers"]["units"] == 2 and net["servers"]["price_key"] == "rack_gb200_nvl72_usd"


def test_compare_designs(designs):
    rows = designs["designs"]
    assert len(rows) >= 6
    assert {r["fabric"] for r in rows} == {"ib", "roce"}
    assert {r["topology"] for r in rows} >= {"rail-optimized", "rail-only", "fat-tree", "dragonfly", "nvl72"}
    ok = [r for r in rows if r["fits"]]
    front = [r for r in ok if r["pareto"]]
    assert front
    for r in front:  # nothing beats a front point on both axes
        assert not any(o["tokens_per_s"] > r["tokens_per_s"] and o["tokens_per_usd"] > r["tokens_per_usd"]
                       for o in ok)
    for r in ok:
        assert 0 < r["network_share_of_capex"] < 1
        assert r["tokens_per_usd"] == pytest.approx(r["tokens_per_s"] / (r["economics"]["usd_per_hour"] / 3600))
    rs = designs["right_size"]
    best = min(s["step_time_s"] for s in rs["sweep"] if s["step_time_s"])
    slow = next(s for s in rs["sweep"] if s["nic_gbps"] == rs["slowest_gbps_within"])
    assert slow["step_time_s"] <= best * 1.05
    slower = [s for s in rs["sweep"] if s["nic_gbps"] < rs["slowest_gbps_within"] and s["step_time_s"]]
    assert all(s["step_time_s"] > best * 1.05 for s in slower)
    over = [r for r in ok if r["capex_usd"] > 2e7]
    assert all(not r["within_budget"] for r in over)
    json.dumps(designs)


def test_pareto_front_small():
    assert pareto_front([(1, 1), (2, 0.5), (0.5, 0.5), (2, 1)]) == [3]


def test_trend_comm_share_grows_and_says_by_how_much(trend):
    rows = [r for r in trend["generations"] if r["fits"]]
    assert [r["accelerator"] for r in rows][:3] == ["a100-sxm-80gb", "h100-sxm", "b200"]
    s = trend["summary"]
    shares = s["fixed_domain_8_shares"]
    assert len(shares) == 5  # every generation with 8-GPU domains (own or other)
    assert s["fixed_domain_growth"] == pytest.approx(max(shares.values()) / shares["dgx-a100"])
    assert s["fixed_domain_growth"] > 1.2
    assert "grows" in s["sentence"]
    assert s["comm_share_ratio"] == pytest.approx(s["comm_share_to"] / s["comm_share_from"])
    # FLOPS per scale-out byte rises from A100 to B200 (same 8 NICs per server, faster chips)
    fpb = [r["flops_per_scale_out_byte"] for r in rows[:3]]
    assert fpb == sorted(fpb)
    # a 72-GPU domain on B200 hides more communication than 8-GPU servers
    b200 = rows[2]
    assert b200["other_domain"]["scale_up_domain"] == 72
    assert b200["other_domain"]["comm_share"] < b200["comm_share"]


def test_html_pages_from_the_json(designs, trend, tmp_path):
    pytest.importorskip("plotly")
    from tierwise.report import write_page
    from tierwise.report.design import design_page, trend_page

    d = write_page(tmp_path / "d.html", design_page(json.loads(json.dumps(designs))))
    t = write_page(tmp_path / "t.html", trend_page(json.loads(json.dumps(trend))))
    texts = [Path(p).read_text(encoding="utf-8") for p in (d, t)]
    assert all("<html>" in x and "plotly" in x for x in texts)
    assert "Pareto front" in texts[0]
