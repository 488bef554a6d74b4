"""The installed ``tierwise`` entry point, run as a user runs it (a subprocess), not in-process.

In-process tests cannot see a broken console script or a CLI library that fails at start-up (typer >= 0.26
bundles click, so an ``import click`` in the error path crashed every usage error). ``.ci/deps-bounds`` runs
this file at the lowest and highest allowed typer/click/rich.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from corpus.harness import tierwise_command


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(tierwise_command() + list(argv), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("argv", "needle"), [
    (["estimate", "--modle", "x"], "--modle"),
    (["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "eight"], "--gpus"),
    (["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100"], "--gpus"),
    (["estimat"], "estimat"),
    (["catalog", "shw"], "shw"),
    (["tiers", "no-such-cluster"], "no-such-cluster"),
])
def test_usage_error_is_one_line_exit_2(argv, needle):
    proc = _run(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_unknown_option_suggests_the_right_one():
    proc = _run("plan", "--modle", "x")
    assert "did you mean '--model'" in proc.stderr


def test_a_good_command_still_works():
    proc = _run("tiers", "dgx-h100", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [t["name"] for t in json.loads(proc.stdout)["tiers"]][:2] == ["hbm", "scale_up"]


def test_megatron_style_flag_names():
    proc = _run("plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size",
                "64", "--seq-length", "2048", "--micro-batch-size", "2", "--top", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["global_batch_size"], doc["seq_length"], doc["plans"][0]["micro_batch_size"]) == (64, 2048, 2)


@pytest.mark.parametrize("argv", [[], ["catalog"], ["measure"]])
def test_a_bare_group_prints_its_help(argv):
    proc = _run(*argv)
    assert proc.returncode == 0 and "Usage" in proc.stdout and proc.stderr == ""
