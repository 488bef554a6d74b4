"""serve and serve-plan through the CLI, in process."""

from __future__ import annotations

import json

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
