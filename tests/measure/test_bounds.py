"""measure collective / measure ddp refuse, before spawning anything, a run whose estimated floor is past
MAX_RUN_S (issue 32: every command finishes or refuses within a documented bound)."""

import pytest

from tierwise.cli import main
from tierwise.measure.bench import parse_sizes
from tierwise.measure.bounds import MAX_RUN_S, collective_floor_s, ddp_floor_s


@pytest.mark.parametrize("argv,flag", [
    (["measure", "collective", "--iters", "100000"], "--iters"),
    (["measure", "collective", "--sizes", "1GiB:64GiB", "--rounds", "100"], "--rounds"),
    (["measure", "ddp", "--steps", "100000"], "--steps"),
    (["measure", "ddp", "--width", "65536"], "--width"),
])
def test_a_run_past_the_bound_is_one_line_naming_the_flag(capsys, argv, flag):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: this ") and len(err.splitlines()) == 1
    assert f"{MAX_RUN_S / 60:.0f} min" in err and flag in err


def test_the_defaults_and_the_tests_runs_are_well_inside_the_bound():
    assert collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce",), 20, 5, 1, "gloo") < 10
    # the interrupted-run test's sweep (tests/measure/test_measure_bench.py) takes minutes on a 2-core host
    assert collective_floor_s(parse_sizes("4KiB:256MiB"), ("all-reduce",), 200, 5, 1, "gloo") < MAX_RUN_S / 10
    assert ddp_floor_s(7, 2, 1024, 6, 32) < 5


def test_the_floor_grows_with_every_count():
    base = collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce",), 20, 5, 1, "gloo")
    assert collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce",), 40, 5, 1, "gloo") > base
    assert collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce", "all-gather"), 20, 5, 1, "gloo") > base
    assert collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce",), 20, 5, 2, "gloo") == pytest.approx(2 * base)
    assert collective_floor_s(parse_sizes("1KiB:64MiB"), ("all-reduce",), 20, 5, 1, "nccl") < base
