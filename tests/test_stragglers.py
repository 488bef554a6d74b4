"""Stragglers (issue 34): the expected step of a synchronous job with a share of slow GPUs, opt-in."""

import json
from pathlib import Path

import pytest

from tierwise.cli import main
from tierwise.errors import SpecError
from tierwise.estimate.stragglers import straggler_block, straggler_slowdown

SCENARIO = str(Path(__file__).resolve().parents[1] / "examples" / "llama3.1-70b-dgx-h100.yaml")


def test_slowdown_grows_with_ranks_and_saturates_at_one_plus_s():
    # 5 per 10,000 GPUs slow by 25%: 8 GPUs almost never wait, 8,192 almost always (P(any) = 98.3%)
    assert straggler_slowdown(8, 5e-4, 0.25) == pytest.approx(1 + 0.25 * (1 - (1 - 5e-4) ** 8), rel=1e-12)
    assert straggler_slowdown(8, 5e-4, 0.25) < 1.001
    assert straggler_slowdown(8192, 5e-4, 0.25) == pytest.approx(1.2459, abs=1e-4)
    assert straggler_slowdown(10**6, 5e-4, 0.25) == pytest.approx(1.25, abs=1e-9)
    assert straggler_slowdown(8192, 0.0, 0.4) == 1.0


def test_detection_and_eviction_buy_back_most_of_the_step():
    b = straggler_block(1024, 10.0, 1e6, 5e-4, 0.25, detect_share=0.1)
    assert b["step_factor"] == pytest.approx(1 + 0.25 * (1 - (1 - 5e-4) ** 1024))  # 1.100
    assert b["step_time_s"] == pytest.approx(10.0 * b["step_factor"])
    assert 1.0 < b["detect_step_factor"] < 1.02 < b["step_factor"]
    assert b["evict_spares"] == 1


@pytest.mark.parametrize("rate, slow", [(-0.1, 0.25), (1.5, 0.25), (float("nan"), 0.25), (0.01, -1), (0.01, 11)])
def test_bad_values_name_the_flag(rate, slow):
    with pytest.raises(SpecError, match="--straggler"):
        straggler_slowdown(100, rate, slow)


def test_estimate_opt_in_moves_only_the_straggler_block(capsys):
    assert main(["estimate", SCENARIO, "--json"]) == 0
    base = json.loads(capsys.readouterr().out)["results"][0]
    assert "stragglers" not in base
    assert main(["estimate", SCENARIO, "--json", "--straggler-rate", "0.0005", "--straggler-slowdown", "0.3"]) == 0
    doc = json.loads(capsys.readouterr().out)["results"][0]
    assert doc["step_time_s"] == base["step_time_s"]  # default figures do not move
    st = doc["stragglers"]
    assert st["step_time_s"] == pytest.approx(base["step_time_s"] * (1 + 0.3 * (1 - (1 - 5e-4) ** 1024)))
    assert st["tokens_per_s"] < base["tokens_per_s"]


def test_estimate_bad_straggler_rate_is_one_line_exit_2(capsys):
    assert main(["estimate", SCENARIO, "--straggler-rate", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--straggler-rate" in err[0]
