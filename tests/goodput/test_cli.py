"""The goodput command and plan/scale --goodput, in-process and through the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tierwise.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_goodput_json_planner_best(capsys):
    code, out, _ = _run(capsys, "goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64",
                        "--global-batch", "64", "--seq", "4096", "--node-failure-rate", "0.1", "--runs", "20",
                        "--json")
    assert code == 0
    doc = json.loads(out)
    assert "planner's best plan" in doc["plan_source"]
    assert doc["mtti_s"] == pytest.approx(86400 / (8 * 0.1))
    assert doc["ettr_simulated"]["runs"] == 20


def test_goodput_scenario_and_human_view(capsys, tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\nplan: {tp: 8, global_batch_size: 8, "
                 "seq_length: 2048}\n")
    code, out, _ = _run(capsys, "goodput", str(s), "--checkpoint-interval", "20 min", "--restart-time", "5 min")
    assert code == 0 and "ETTR" in out and "scenario file" in out


@pytest.mark.parametrize("argv, needle", [
    (["--node-failure-rate", "-1"], "--node-failure-rate"),
    (["--gpus", "0"], "--gpus"),
    (["--checkpoint-write", "sync", "--checkpoint-interval", "1 ms"], "--checkpoint-interval"),
    (["--storage-bandwidth", "0 GB/s"], "--storage-bandwidth"),
    (["--runs", "-3"], "--runs"),
    (["--checkpoint-write", "often"], "--checkpoint-write"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    base = ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8",
            "--seq", "2048"]
    if "--gpus" in argv:
        base = base[:5] + base[7:]
    code, _, err = _run(capsys, *base, *argv)
    assert code == 2
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_plan_goodput_ranks(capsys):
    code, out, _ = _run(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                        "--global-batch", "32", "--seq", "4096", "--goodput", "--top", "3", "--json")
    assert code == 0
    doc = json.loads(out)
    adjusted = [p["goodput"]["adjusted_tokens_per_s"] for p in doc["plans"]]
    assert adjusted == sorted(adjusted, reverse=True) and len(adjusted) == 3


def test_plan_goodput_prices_the_useful_work(capsys):
    # plan --goodput prices each plan at its goodput on the GPUs it holds (spares at p99 included), as the
    # goodput command does: at a high failure rate that costs more per token than the raw throughput
    argv = ("plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64",
            "--seq", "4096", "--top", "3", "--json")
    raw = json.loads(_run(capsys, *argv)[1])
    code, out, _ = _run(capsys, *argv, "--goodput", "--node-failure-rate", "1")
    assert code == 0
    doc = json.loads(out)
    best = doc["plans"][0]
    g = best["goodput"]
    assert g["goodput_tokens_per_s"] < best["estimate"]["tokens_per_s"] and g["spare_gpus_p99"] > 0
    assert doc["economics"]["assumed"][0].startswith("priced at the goodput")
    assert doc["economics"]["usd_per_million_tokens"] == pytest.approx(best["usd_per_million_tokens"])
    raw_cost = {json.dumps(p["estimate"]["plan"], sort_keys=True): p["usd_per_million_tokens"] for p in raw["plans"]}
    key = json.dumps(best["estimate"]["plan"], sort_keys=True)
    # the same plan leads both rankings here; its goodput price exceeds the raw one by more than the lost throughput
    ratio = best["estimate"]["tokens_per_s"] / g["goodput_tokens_per_s"]
    assert best["usd_per_million_tokens"] > raw_cost[key] * ratio


def test_scale_goodput(capsys):
    code, out, _ = _run(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:32",
                        "--global-batch", "64", "--seq", "4096", "--goodput", "--node-failure-rate", "1", "--json")
    assert code == 0
    doc = json.loads(out)
    ettr = [p["goodput"]["ettr"] for p in doc["points"]]
    assert ettr == sorted(ettr, reverse=True)  # more nodes, more interruptions
    assert "goodput_knee_num_gpus" in doc


def test_entry_point_subprocess():
    r = subprocess.run([sys.executable, "-m", "tierwise", "goodput", "--model", "llama3.1-8b", "--cluster",
                        "dgx-h100", "--gpus", "8", "--node-failure-rate", "nan"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("error:") and r.stderr.count("\n") == 1


def test_html_page(capsys, tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "g.html"
    code, _, _ = _run(capsys, "goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                      "--global-batch", "16", "--seq", "2048", "--runs", "5", "--html", str(out))
    assert code == 0
    text = out.read_text()
    assert "interruptions per day by component" in text and "fault domain" in text and "plotly" in text


def test_html_unwritable_path_before_the_work(capsys, tmp_path):
    pytest.importorskip("plotly")
    code, _, err = _run(capsys, "goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8",
                        "--html", str(tmp_path / "missing" / "g.html"))
    assert code == 2 and "--html" in err
