"""`goodput` prices the useful work (issue 17 part 1): cost and energy at the goodput throughput, on the GPUs
of the job plus the spares it holds."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tierwise.cli import app


def _run(*args):
    result = CliRunner().invoke(app, ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "256",
                                      "--global-batch", "256", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cost_per_token_is_the_hourly_cost_over_the_goodput():
    doc = _run("--tokens", "1e11")
    e = doc["economics"]
    assert e["usd_per_million_tokens"] > 0
    # the same dollars per hour spread over fewer useful tokens: cost per token = $/s / goodput
    assert abs(e["usd_per_hour"] / 3600 / doc["goodput_tokens_per_s"] * 1e6 - e["usd_per_million_tokens"]) \
        < 1e-9 * e["usd_per_million_tokens"]
    assert e["time_to_train_s"] > 1e11 / doc["tokens_per_s"]  # failures make it longer than the failure-free time
    assert any("goodput" in a for a in e["assumed"])


def test_more_failures_cost_more_per_token():
    calm = _run("--node-failure-rate", "0.001")["economics"]["usd_per_million_tokens"]
    rough = _run("--node-failure-rate", "0.05")["economics"]["usd_per_million_tokens"]
    assert rough > calm
