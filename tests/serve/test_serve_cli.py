"""serve and serve-plan through the CLI, in process."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tierwise.cli import app


def test_serve_and_plan_cli_json():
    runner = CliRunner()
    r = runner.invoke(app, ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1",
                            "--input-len", "512", "--output-len", "128", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["kv_bytes_per_token"] == 131072
    r = runner.invoke(app, ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8",
                            "--input-len", "512", "--output-len", "128", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["best"]


def test_serve_html_page(tmp_path):
    import pytest

    pytest.importorskip("plotly")
    out = tmp_path / "serve.html"
    r = CliRunner().invoke(app, ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1",
                                 "--input-len", "512", "--output-len", "128", "--html", str(out), "--json"])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "tierwise serve: llama3.1-8b" in text and "phase times" in text


def test_engine_flag_sets_host_time_and_default_is_assumed(capsys):
    """``--engine`` prices the engine's host time per step: batch-1 Llama-3.1-8B on an H100 spends 8.1 ms more per
    step on vLLM v0.5 (the v0.5.3 profile's 62% of a 13 ms step) than its kernels, under 2 ms on the V1 default
    (named under ``assumed``); a patch version resolves to its catalog entry; an unknown version is one line."""
    from tierwise.cli import main

    base = ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--batching", "static",
            "--batch", "1", "--input-len", "512", "--output-len", "128", "--json"]
    docs = {}
    for eng in (None, "vllm@0.5.4", "sglang"):
        r = CliRunner().invoke(app, base + ([] if eng is None else ["--engine", eng]))
        assert r.exit_code == 0, r.output
        docs[eng] = json.loads(r.output)
    assert docs[None]["engine"] == "vllm@0.8" and any("engine vllm@0.8" in a for a in docs[None]["assumed"])
    assert docs["vllm@0.5.4"]["engine"] == "vllm@0.5"
    over = {k: d["phases"]["decode_overhead_s"] for k, d in docs.items()}
    assert 8.1e-3 < over["vllm@0.5.4"] < 9.5e-3
    assert over[None] < 2.5e-3 and over["sglang"] < over[None]  # SGLang hides its host work behind the step
    assert docs["vllm@0.5.4"]["tpot_s"] > docs[None]["tpot_s"] + 6e-3
    assert main(base[:-1] + ["--engine", "trtllm@0.1"]) == 2
    err = capsys.readouterr().err
    assert "trtllm@0.12" in err and len(err.strip().splitlines()) == 1


def test_heterogeneous_pd_pools(capsys):
    """Prefill on H100, decode on A100 (Splitwise's heterogeneous pools): the decode step is priced on the A100
    (slower at the same batch), the KV crosses the scale-out network at the slower end of the link, ``auto``
    says so; scale-up across clusters and --decode-cluster without pools are one line each, exit 2."""
    from tierwise.cli import main
    from tierwise.serve.api import ServeConfig, serve_estimate
    from tierwise.serve.simulate import SimRequest, simulation_block

    kw = dict(model="llama3.1-70b", cluster="dgx-h100", prefill_gpus=8, decode_gpus=8, prefill_tp=4, decode_tp=4,
              input_len=2000, output_len=256, batch=64)
    same = serve_estimate(ServeConfig(**kw))
    het = serve_estimate(ServeConfig(**kw, decode_cluster="dgx-a100"))
    assert het["decode_cluster"] == "dgx-a100" and same["decode_cluster"] is None
    assert het["tpot_s"] > 1.3 * same["tpot_s"]  # A100 HBM 2.0 TB/s against H100's 3.35
    assert het["phases"]["prefill_s"] == same["phases"]["prefill_s"]
    assert het["kv_transfer_s"] > 1.5 * same["kv_transfer_s"]  # the A100 node's NICs are the slower end
    assert any("different clusters" in a for a in het["assumed"])
    sim = simulation_block(ServeConfig(**{**kw, "batch": 0}, decode_cluster="dgx-a100", rate=2.0),
                           SimRequest(requests=300))["simulation"]
    assert sim["served"] == 300
    base = ["serve", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--decode-cluster", "dgx-a100"]
    assert main(base + ["--prefill-gpus", "4", "--decode-gpus", "4", "--kv-link", "scale_up"]) == 2
    assert "another cluster" in capsys.readouterr().err
    assert main(base + ["--gpus", "8"]) == 2
    assert "--decode-cluster is for disaggregated" in capsys.readouterr().err


def test_serve_plan_searches_heterogeneous_pairs(capsys):
    """serve-plan --decode-cluster A,B: every split with the decode pool on each cluster, ranked together."""
    from tierwise.cli import main
    from tierwise.serve.api import ServeConfig, serve_plan_document

    doc = serve_plan_document(ServeConfig(model="llama3.1-70b", cluster="dgx-h100", num_gpus=16, input_len=2000,
                                          output_len=256, decode_cluster="dgx-a100, hgx-h200"), top=50)
    best = doc["best"]
    assert best and all(b["mode"] == "disaggregated" for b in best)
    assert {b["decode_cluster"] for b in best} == {"dgx-a100", "hgx-h200"}
    per_gpu = [b["output_tokens_per_s_per_gpu"] for b in best]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert any("decode on dgx-a100, hgx-h200" in a for a in doc["assumed"])
    # each pool's GPUs at its own cluster's server price (serve/cost.py): the A100 pair and the H200 pair differ
    from tierwise.serve.cost import gpu_usd_per_s
    from tierwise.specs.cluster import load_cluster

    rate = {n: gpu_usd_per_s(load_cluster(n))[0] for n in ("dgx-h100", "dgx-a100", "hgx-h200")}
    for b in best:
        want = (b["prefill_gpus"] * rate["dgx-h100"] + b["decode_gpus"] * rate[b["decode_cluster"]]) \
            / b["output_tokens_per_s"] * 1e6
        assert b["usd_per_million_output_tokens"] == pytest.approx(want)
        assert b["gpu_usd_per_hour"]["decode"] == pytest.approx(rate[b["decode_cluster"]] * 3600)
    # an H100 GPU of a $190k server over 5 years, 1,275 W at PUE 1.3 and $0.08/kWh: $0.54 + $0.13 an hour
    assert rate["dgx-h100"] * 3600 == pytest.approx(190000 / 8 / (5 * 8766) + 1.275 * 1.3 * 0.08, rel=1e-3)
    assert rate["dgx-a100"] != rate["dgx-h100"]
    assert any("GPU cost (serve/cost.py) dgx-a100" in a and "server_a100_usd" in a for a in doc["assumed"])
    assert main(["serve-plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "16",
                 "--decode-cluster", "dgx-a100", "--modes", "aggregated"]) == 2
    assert "drop --modes aggregated" in capsys.readouterr().err
