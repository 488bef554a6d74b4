"""A testbed run at absurd sizes is refused before any rank starts, with the estimate (issue 32, hangs)."""

from __future__ import annotations

import pytest

from tierwise.cli import main
from tierwise.testbed.run import MAX_TESTBED_BUFFER_BYTES, check_ddp_memory, check_sweep_budget
from tierwise.testbed.spec import TestbedError

from .test_damaged_state import SPEC, _testbed


def test_a_sweep_longer_than_its_limit_is_refused_with_the_estimate():
    cases = [{"op": "all-reduce", "algorithm": "gloo", "size_bytes": 2**30}]
    with pytest.raises(TestbedError, match=r"about .* past the 30 minutes limit") as err:
        check_sweep_budget(SPEC, cases, iters=100_000, warmup=0, timeout_s=1800)
    assert "1 Gb/s" in str(err.value) and "--iters" in str(err.value)
    check_sweep_budget(SPEC, cases, iters=5, warmup=1, timeout_s=1800)  # 12 GiB at 125 MB/s: ~100 s, fine


def test_a_buffer_past_the_memory_bound_is_refused():
    cases = [{"op": "all-reduce", "algorithm": "gloo", "size_bytes": 2 * MAX_TESTBED_BUFFER_BYTES}]
    with pytest.raises(TestbedError, match="1 GiB"):
        check_sweep_budget(SPEC, cases, iters=1, warmup=0, timeout_s=1e9)


def test_a_ddp_model_past_half_the_memory_is_refused():
    with pytest.raises(TestbedError, match=r"--width 65536 x --layers 1024 on 4 ranks needs about"):
        check_ddp_memory(SPEC, ["--width", "65536", "--layers", "1024"])
    check_ddp_memory(SPEC, ["--width", "1024", "--layers", "6"])


@pytest.mark.parametrize(("argv", "word"), [
    (["run", "--sizes", "1GiB:1TiB"], "1 GiB"),
    (["run", "--sizes", "512MiB", "--iters", "100000"], "past the 30 minutes limit"),
    (["ddp", "--width", "65536", "--layers", "1024"], "--width 65536"),
])
def test_the_cli_refuses_before_any_rank_starts(tmp_path, capsys, argv, word):
    folder = _testbed(tmp_path / "tb")
    assert main(["testbed", *argv, "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err
