"""The commands as a user runs them (in-process): design, trend, topo keys, estimate/plan cost blocks and levers."""



from tierwise.cli import app

from ._cli import cli_json as _json
from ._cli import runner


def test_topo_stable_keys_and_cluster():
    d = _json(["topo", "fat-tree", "--gpus", "256", "--cluster", "gb200-nvl72", "--json"])
    for key in ("num_switches", "switch_radix", "switch_ports_used", "network_capex_usd", "network_power_w",
                "network_share_of_capex"):
        assert key in d
    assert d["servers"]["price_key"] == "rack_gb200_nvl72_usd"
    roce = _json(["topo", "fat-tree", "--gpus", "256", "--fabric", "roce", "--json"])
    ib = _json(["topo", "fat-tree", "--gpus", "256", "--json"])
    assert roce["network_capex_usd"] != ib["network_capex_usd"]


def test_plan_ranks_with_levers_and_reports_cost():
    base = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "128",
            "--seq", "4096", "--top", "2", "--zero", "0", "--json", "--tokens", "1e11"]
    plain = _json(base)
    lever = _json(base + ["--reduce-dtype", "bf16", "--sync-every", "4"])
    assert "not modelled" in lever["levers"]["convergence"]
    assert plain["economics"]["time_to_train_s"] > 0
    assert plain["plans"][0]["usd_per_million_tokens"] > 0
    dp = lambda doc: doc["plans"][0]["estimate"]["breakdown"]["per_axis"]["dp"]["bytes"]  # noqa: E731
    if plain["plans"][0]["dp"] > 1 and lever["plans"][0]["dp"] > 1:
        assert dp(lever) < dp(plain)


def test_design_and_trend_json(tmp_path):
    bad = runner.invoke(app, ["design", "--model", "llama3.1-8b", "--gpus", "64", "--precision", "fp4"])
    assert bad.exit_code != 0
    d = _json(["trend", "--model", "llama3.1-8b", "--gpus", "144", "--global-batch", "144", "--seq", "2048",
               "--json"])
    assert len(d["generations"]) == 5 and d["summary"]


def test_estimate_reports_cost_and_levers(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 16\n"
                 "plan: {tp: 8, dp: 2, global_batch_size: 16, seq_length: 4096, zero_stage: 0}\n")
    plain = _json(["estimate", str(f), "--json", "--tokens", "1e10"])["results"][0]
    bf16 = _json(["estimate", str(f), "--json", "--reduce-dtype", "bf16"])["results"][0]
    assert plain["economics"]["time_to_train_s"] == 1e10 / plain["tokens_per_s"]
    dp = lambda d: d["breakdown"]["per_axis"]["dp"]["bytes"]  # noqa: E731
    assert dp(bf16) == dp(plain) / 2  # ZeRO 0: the all-reduce of fp32 gradients becomes bf16
    assert any("bf16" in a for a in bf16["assumed"])
