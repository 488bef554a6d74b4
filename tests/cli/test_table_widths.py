"""One rule for every table at a given width (issue 32): at COLUMNS=80 and 60 no number is cut to an
ellipsis or split across lines, no header ends in an ellipsis, and a column that does not fit is named in a
note. Generic over the commands that print tables: each is run wide (COLUMNS=1000, the reference) and narrow."""

import re
from pathlib import Path

import pytest

from tierwise.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "llama3.1-70b-dgx-h100.yaml")
BOX = "│┃┆┊║|"  # rich's vertical rules
ELLIPSIS = re.compile(r"(\d(…|\.\.\.))|((…|\.\.\.)\d)")
NOTE = re.compile(r"columns? '.*? not shown at \d+ columns; .*?\(COLUMNS=\d+\)")
TIMING = re.compile(r"\b\d+ ms\)")  # serve-plan's search time in its title varies from run to run

COMMANDS = {
    "design": ["design", "--model", "llama3.1-70b", "--gpus", "1024"],
    "plan": ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "128",
             "--seq", "4096", "--top", "3"],
    "scale": ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8,64,512",
              "--global-batch", "512", "--seq", "4096"],
    "estimate": ["estimate", EXAMPLE],
    "serve": ["serve", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--prefill-gpus", "4", "--decode-gpus",
              "4", "--input-len", "2000", "--output-len", "256"],
    "serve-plan": ["serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    "goodput": ["goodput", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1024", "--runs", "5",
                "--seed", "0"],
    "tiers": ["tiers", "gb200-nvl72"],
    "topo": ["topo", "fat-tree", "--gpus", "1024", "--radix", "64"],
    "simulate": ["simulate", "all-reduce", "--gpus", "64", "--radix", "8", "--fail-links", "2"],
    "collective": ["collective", "all-reduce", "--size", "1GiB", "--ranks", "32", "--cluster", "dgx-h100"],
    "validate": ["validate"],
    "bandwidth": ["bandwidth", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1024"],
    "trend": ["trend", "--model", "llama3.1-70b", "--gpus", "1024"],
    "catalog": ["catalog", "list"],
}


def _render(capsys, monkeypatch, argv, columns: int) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return TIMING.sub("ms)", captured.out)


def _digit_words(text: str) -> set[str]:
    for ch in BOX:
        text = text.replace(ch, " ")
    return {w for w in text.split() if any(c.isdigit() for c in w)}


def _check(wide: str, narrow: str, columns: int) -> None:
    assert all(len(line) <= columns for line in narrow.splitlines())
    bad = [line for line in narrow.splitlines() if ELLIPSIS.search(line)]
    assert not bad, "a number cut to an ellipsis:\n" + "\n".join(bad)
    assert "…" not in narrow, "a header or cell cut to an ellipsis"
    # every number printed narrow is a whole number of the wide output: none is split across lines
    notes = " ".join(NOTE.findall(" ".join(narrow.split())))
    split = _digit_words(narrow) - _digit_words(wide) - _digit_words(notes)
    assert not split, f"numbers split or cut at COLUMNS={columns}: {sorted(split)[:10]}"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    pytest.importorskip("duckdb")
    out = tmp_path_factory.mktemp("tables") / "sweep"
    assert main(["sweep", "run", str(ROOT / "examples" / "sweep" / "grid.yaml"), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", [*sorted(COMMANDS), "sweep show"])
def test_no_number_is_cut_at_80_or_60_columns(capsys, monkeypatch, name, request):
    argv = (["sweep", "show", str(request.getfixturevalue("sweep_dir")), "--query",
             "SELECT point_id, kind, status, wall_s, tokens_per_s FROM results ORDER BY point_id LIMIT 20"]
            if name == "sweep show" else COMMANDS[name])
    wide = _render(capsys, monkeypatch, argv, 1000)
    for columns in (80, 60):
        _check(wide, _render(capsys, monkeypatch, argv, columns), columns)


def test_a_column_that_cannot_fit_is_named_in_a_note(capsys, monkeypatch):
    narrow = _render(capsys, monkeypatch, COMMANDS["design"], 60)
    note = NOTE.search(" ".join(narrow.split())).group(0)
    assert "'Pareto'" in note and "not shown at 60 columns; see --json" in note
    needed = int(re.search(r"COLUMNS=(\d+)", note).group(1))
    wider = _render(capsys, monkeypatch, COMMANDS["design"], needed)
    assert "not shown at" not in wider  # the width the note names shows every column


def test_the_json_does_not_depend_on_the_width(capsys, monkeypatch):
    argv = [*COMMANDS["tiers"], "--json"]
    assert _render(capsys, monkeypatch, argv, 40) == _render(capsys, monkeypatch, argv, 1000)
