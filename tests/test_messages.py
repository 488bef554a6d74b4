"""Messages clip what the user gave (issue 32): a 100 KB value is echoed as a short word with an ellipsis,
never in full; the CLI prints every error through :func:`tierwise.errors.one_line`."""

from __future__ import annotations

import pytest

from tierwise.cli import main
from tierwise.errors import MAX_MESSAGE, MAX_WORD, UnitError, one_line
from tierwise.units import parse_bandwidth, parse_bytes, parse_count, parse_time


def test_one_line_cuts_long_words_and_long_messages():
    line = one_line("bad --size '" + "x" * 100_000 + "';\n\nuse '1 GB'")
    assert len(line) < 2 * MAX_WORD and line.endswith("use '1 GB'") and "..." in line and "\n" not in line
    assert one_line("a short message; stays") == "a short message; stays"
    path = "/tmp/" + "d" * 120 + "/file.yaml"  # a path under the word limit is kept whole
    assert path in one_line(f"cannot read {path}")
    assert len(one_line("word " * 10_000)) == MAX_MESSAGE


@pytest.mark.parametrize("parse", [parse_bytes, parse_time, parse_bandwidth, parse_count])
def test_unit_parsers_echo_at_most_a_clipped_value(parse):
    with pytest.raises(UnitError) as err:
        parse("7" * 50 + "q" * 100_000)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "m" * 100_000, "--cluster", "dgx-h100", "--gpus", "8"],
    ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "9" * 100_000],
    ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1" + "x" * 100_000],
    ["tiers", "c" * 100_000],
])
def test_the_cli_never_echoes_a_huge_value(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 1000 and max(len(w) for w in err.split()) <= MAX_WORD
