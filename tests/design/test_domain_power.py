"""``design --domain-sweep`` and ``design --power`` (issue 33, parts 2 and 3)."""


import pytest

from tierwise.design.domain import domain_cluster
from tierwise.design.power import parse_power
from tierwise.design.scaleup import load_figures, scale_up_extra
from tierwise.specs.cluster import load_cluster

from ._cli import cli_json as _json


@pytest.fixture(scope="module")
def sweep():
    return _json(["design", "--model", "llama3.1-405b", "--gpus", "16384", "--domain-sweep", "--json"])


def test_domain_sweep_rows_and_knee(sweep):
    rows = {r["domain"]: r for r in sweep["rows"]}
    assert list(rows) == ["NVL8", "NVL16", "NVL36", "NVL72", "NVL144", "NVL576", "UALink 1024"]
    assert all(r["fits"] for r in rows.values())
    # a larger NVLink domain never slows the step of the best plan by more than noise, and NVL72 beats NVL8
    assert rows["NVL72"]["step_time_s"] < 0.9 * rows["NVL8"]["step_time_s"]
    # the fault unit grows with the domain: spare GPUs (p99) are whole domains
    assert rows["NVL576"]["spare_gpus_p99"] % 576 == 0 and rows["NVL576"]["spare_gpus_p99"] > rows["NVL72"][
        "spare_gpus_p99"]
    # beyond a rack the spine's optics cost: 2 x 7.2 Tb/s / 800G = 18 pluggable ports per GPU at 17 W
    extra = rows["NVL144"]["scale_up_extra"]
    assert extra["optical_ports_per_gpu"] == pytest.approx(18)
    assert extra["w_per_gpu"] == pytest.approx(18 * 17 + 747 / 8)
    assert rows["NVL144"]["capex_usd"] > 1.3 * rows["NVL72"]["capex_usd"]
    # the knee: the most goodput tokens per dollar, explained
    assert sweep["knee"] == "NVL72"
    assert "knee at NVL72" in sweep["explanation"] and "NVL144" in sweep["explanation"]
    assert 0.5 < rows["NVL72"]["ettr"] < 1.0


def test_cpo_shrinks_the_spine_penalty():
    c = domain_cluster(load_cluster("gb200-nvl72"), 576)
    f = load_figures()
    plug, cpo = scale_up_extra(c, 576, f, "pluggable"), scale_up_extra(c, 576, f, "cpo")
    assert cpo.w_per_gpu < plug.w_per_gpu - 18 * (17 - 4.9) + 1e-6
    assert (plug.optics, cpo.optics) == ("pluggable", "cpo")
    in_rack = scale_up_extra(c, 72, f)
    assert in_rack.usd_per_gpu == 0.0 and in_rack.optics is None and "optics" not in in_rack.as_dict()


def test_domain_the_accelerator_cannot_build(cli_error):
    assert "at most 576" in cli_error(["design", "--model", "llama3.1-405b", "--gpus", "16384", "--domain-sweep",
                                       "--domains", "72,1152"])
    assert "multiple of 4" in cli_error(["design", "--model", "llama3.1-405b", "--gpus", "16384", "--domain-sweep",
                                         "--domains", "10"])


@pytest.fixture(scope="module")
def power50():
    return _json(["design", "--model", "llama3.1-405b", "--power", "50MW", "--json"])


def test_power_capped_design(power50):
    d = power50
    assert d["facility_budget_w"] == 50e6 and d["it_budget_w"] == pytest.approx(50e6 / 1.3)
    ok = [r for r in d["rows"] if r["fits"]]
    assert {r["optics"] for r in ok} == {"pluggable", "lpo", "cpo"}
    assert any(r["design"].startswith("MI355X") for r in ok)
    for r in ok:
        assert r["facility_w"] <= 50e6 and r["facility_w"] > 0.9 * 50e6
        assert r["job_gpus"] <= r["gpus"]
    # per design, CPO (4.9 W per 800G port) saves more network watts than LPO (8.5 W), and both buy >= GPUs
    for name in {r["design"] for r in ok}:
        mine = {r["optics"]: r for r in ok if r["design"] == name}
        assert mine["cpo"]["network_w_saved_vs_pluggable"] > mine["lpo"]["network_w_saved_vs_pluggable"] > 0
        assert mine["cpo"]["gpus"] >= mine["pluggable"]["gpus"]
    # the best cluster is a rack-scale Blackwell design (most tokens/s under the same watts)
    assert d["best"]["design"].startswith("GB200")


def test_power_parse_and_bad_budget(cli_error):
    assert parse_power("50MW") == 50e6 and parse_power("800 kW") == 800e3
    assert "below one server or rack" in cli_error(["design", "--model", "llama3.1-405b", "--power", "5kW"])
    assert "--power" in cli_error(["design", "--model", "llama3.1-405b", "--power", "fifty"])
    assert "--gpus" in cli_error(["design", "--model", "llama3.1-405b", "--power", "50MW", "--gpus", "8"])


def test_open_standard_and_amd_designs_in_the_comparison():
    d = _json(["design", "--model", "llama3.1-70b", "--gpus", "1024", "--global-batch", "512", "--json"])
    rows = {r["name"]: r for r in d["designs"]}
    for name, cluster in (("MI355X 8-GPU, RoCE 400G, rail-optimized", "mi355x-8"),
                          ("MI355X 8-GPU, Ultra Ethernet 400G", "mi355x-8-uec"),
                          ("MI355X-class UALink 1,024 pod, Ultra Ethernet 400G", "ualink-pod-1024")):
        assert rows[name]["cluster"] == cluster and rows[name]["fits"]
        assert load_cluster(cluster).source  # every preset says where its figures come from
    pod = load_cluster("ualink-pod-1024")
    # 7 UALink x4 ports x 800 Gb/s x 93% effective (network.csv ualink_1_0), one way
    assert pod.scale_up_bytes_per_s == pytest.approx(7 * 800e9 / 8 * 0.93, rel=1e-3)
    assert pod.scale_up_domain == 1024
    # the pod's spine (switches and optics past a rack) is priced: 14 optical ports per GPU
    assert rows["MI355X-class UALink 1,024 pod, Ultra Ethernet 400G"]["economics"]["capex_usd"][
        "network_scale_up_spine"] > 1024 * 14 * 1250
    # UEC is priced and stepped as Ethernet: the same figures as the RoCE design
    assert rows["MI355X 8-GPU, Ultra Ethernet 400G"]["tokens_per_s"] == rows[
        "MI355X 8-GPU, RoCE 400G, rail-optimized"]["tokens_per_s"]


def test_topo_nvl72_implies_the_rack_part(cli_error):
    one = _json(["topo", "nvl72", "--gpus", "72", "--json"])
    assert one["cluster"] == "gb200-nvl72"
    assert one["servers"]["units"] == 1 and one["servers"]["gpus_per_unit"] == 72
    big = _json(["topo", "nvl72", "--gpus", "1152", "--json"])
    assert big["servers"]["units"] == 16 and big["servers"]["price_key"] == "rack_gb200_nvl72_usd"
    # the seeds' 130 TB/s: 72 GPUs x 1.8 TB/s bidirectional
    dom = big["scale_up_domain"]
    assert dom["aggregate_bidirectional_bytes_per_s"] == pytest.approx(129.6e12)
    assert dom["bisection_bytes_per_s"] == pytest.approx(36 * 900e9)
    assert "rack part" in cli_error(["topo", "nvl72", "--gpus", "1152", "--cluster", "dgx-h100"])


def test_tiers_show_the_scale_up_domain():
    rows = _json(["tiers", "gb200-nvl72", "--json"])["tiers"]
    up = next(r for r in rows if r["name"] == "scale_up")
    assert up["domain_aggregate_bidirectional_bytes_per_s"] == pytest.approx(129.6e12)
    mesh = next(r for r in _json(["tiers", "mi300x-8", "--json"])["tiers"] if r["name"] == "scale_up")
    # full mesh of 8: 16 links cross the cut, each at the per-peer one-way rate
    assert mesh["domain_bisection_bytes_per_s"] == pytest.approx(16 * load_cluster("mi300x-8").scale_up_p2p_bytes_per_s)


def test_html_pages(tmp_path):
    pytest.importorskip("plotly")
    for args, name in ((["design", "--model", "llama3.1-70b", "--gpus", "1152", "--global-batch", "512",
                         "--domain-sweep", "--domains", "8,72,144"], "domain.html"),
                       (["design", "--model", "llama3.1-70b", "--power", "5MW", "--global-batch", "512"], "power.html"),
                       (["bandwidth", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "256",
                         "--global-batch", "256"], "bw.html")):
        out = tmp_path / name
        doc = _json([*args, "--html", str(out), "--json"])
        text = out.read_text()
        assert doc["html"] and "plotly" in text.lower()
        assert "<table" in text or name == "bw.html"  # the bandwidth page is one plot
