"""Units and human numbers on every ``--html`` page (issue 32): every axis a trace uses has a title, and one
that carries numbers names its unit in parentheses or brackets; no label (axis title, legend entry, category,
table header, a metric | value table's row names) is a raw snake_case key with a unit in it; no number in a
label or a table's value cell is in e-notation. Each page is written by its real command and read back from the HTML."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from tierwise.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# a key with a unit in it (restart_s, TPOT_mean_ms, output_tokens_per_s_total); names that are identifiers in
# the data (a source id such as automodel_2510, the tiers scale_up / scale_out) are not keys with units
SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*_(?:s|ms|us|ns|bytes|pct|usd|w|j|gbps|per)(?:_[A-Za-z0-9]+)*\b",
                   re.IGNORECASE)
E_NOTATION = re.compile(r"\b\d+(?:\.\d+)?[eE][+-]?\d+\b")
UNIT = re.compile(r"\(.+\)|\[.+\]")

PAGES = {
    "goodput": ["goodput", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1024", "--runs", "5"],
    "scale": ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8,64,512", "--global-batch",
              "512", "--seq", "4096"],
    "plan": ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "128",
             "--seq", "4096"],
    "design": ["design", "--model", "llama3.1-70b", "--gpus", "1024"],
    "design-domain-sweep": ["design", "--model", "llama3.1-70b", "--gpus", "1024", "--domain-sweep"],
    "design-power": ["design", "--model", "llama3.1-70b", "--power", "20MW"],
    "trend": ["trend", "--model", "llama3.1-70b", "--gpus", "1024"],
    "bandwidth": ["bandwidth", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1024"],
    "simulate": ["simulate", "all-reduce", "--gpus", "64", "--radix", "8", "--fail-links", "2"],
    "serve": ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--simulate", "--rate", "5",
              "--requests", "300"],
    "validate": ["validate"],
    "validate-serving": ["validate", "--serving"],
    "sweep": ["sweep", "show", "{tmp}/sweep"],
}


class _Tables(HTMLParser):
    """Every table of a page: its header cells and its rows of data cells, as text."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            text = " ".join("".join(self._cell).split())
            head, rows = self.tables[-1]
            (head if tag == "th" else rows[-1]).append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _figures(text: str) -> list[tuple[list[dict], dict]]:
    """The (data, layout) of every ``Plotly.newPlot`` call of the page."""
    decoder = json.JSONDecoder()
    out = []
    for m in re.finditer(r"Plotly\.newPlot\(\s*\"[^\"]*\",\s*", text):
        data, end = decoder.raw_decode(text, m.end())
        layout, _ = decoder.raw_decode(text, re.compile(r"\s*,\s*").match(text, end).end())
        out.append((data, layout))
    return out


def _title(axis: dict) -> str:
    title = axis.get("title")
    return (title.get("text") or "") if isinstance(title, dict) else (title or "")


def _categorical(values) -> bool:
    return isinstance(values, list) and any(isinstance(v, str) for v in values)


def _labels(data: list[dict], layout: dict) -> list[str]:
    """Axis titles, legend entries and categories of one figure, checking its axes on the way."""
    labels = []
    for trace in data:
        for letter in ("x", "y"):
            ref = trace.get(f"{letter}axis", letter)
            axis = layout.get(f"{letter}axis{ref[1:]}", {})
            title, values = _title(axis), trace.get(letter)
            if values is None and trace.get("type") != "histogram":
                continue  # not a coordinate of this trace (a histogram counts on its other axis)
            assert title, f"an axis of {trace.get('type')} {trace.get('name')!r} has no title"
            labels.append(title)
            if _categorical(values):
                labels += [v for v in values if isinstance(v, str)]
            else:
                assert UNIT.search(title), f"axis {title!r} carries numbers and names no unit in () or []"
        if trace.get("name") and trace.get("showlegend", True) is not False:
            labels.append(trace["name"])
    return labels


def _check_label(label: str) -> None:
    raw = SNAKE.search(label)
    assert not raw, f"raw key {raw.group(0)!r} in the label {label!r}"
    assert not E_NOTATION.search(label), f"e-notation in the label {label!r}"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    pytest.importorskip("duckdb")
    out = tmp_path_factory.mktemp("pages") / "sweep"
    assert main(["sweep", "run", str(ROOT / "examples" / "sweep" / "grid.yaml"), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_axis_legend_and_table_has_units_and_human_numbers(name, tmp_path, capsys, request):
    argv = PAGES[name]
    if name == "sweep":
        argv = [a.replace("{tmp}/sweep", str(request.getfixturevalue("sweep_dir"))) for a in argv]
    page = tmp_path / f"{name}.html"
    assert main([*argv, "--html", str(page)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    figures = _figures(text)
    assert figures, "no plot on the page"
    for data, layout in figures:
        for label in _labels(data, layout):
            _check_label(label)
    parser = _Tables()
    parser.feed(text)
    assert parser.tables, "no table on the page"
    for head, rows in parser.tables:
        names = [r[0] for r in rows if r] if len(head) == 2 else []  # the row names of a metric | value table
        for label in head + names:
            _check_label(label)
        for row in rows:
            for cell in row:  # a value, not prose (a catalog entry's source quotes its paper: "5.5e-4/day")
                if len(cell.split()) <= 6:
                    assert not E_NOTATION.search(cell), f"e-notation in the cell {cell!r} under {head}"


def test_the_checks_catch_what_issue_32_found():
    """The goodput chart's old ``restart_s`` bar on a minutes axis and the ``1.305e+10`` checkpoint size."""
    with pytest.raises(AssertionError, match="raw key"):
        _check_label("restart_s")
    with pytest.raises(AssertionError, match="e-notation"):
        _check_label("checkpoint 1.305e+10")
    with pytest.raises(AssertionError, match="names no unit"):
        _labels([{"type": "bar", "x": ["a"], "y": [1.0]}], {"xaxis": {"title": {"text": "c"}},
                                                            "yaxis": {"title": {"text": "min/day"}}})


def test_the_scale_page_has_a_plan_column(tmp_path, capsys):
    page = tmp_path / "scale.html"
    assert main([*PAGES["scale"], "--json", "--html", str(page)]) == 0
    doc = json.loads(capsys.readouterr().out)
    parser = _Tables()
    parser.feed(page.read_text(encoding="utf-8"))
    head, rows = next(t for t in parser.tables if "plan" in t[0])
    plans = [r[head.index("plan")] for r in rows if r]
    assert len(plans) == len(doc["points"])
    for cell, point in zip(plans, doc["points"], strict=True):
        assert cell.startswith(f"tp{point['plan']['tp']} pp{point['plan']['pp']} dp{point['plan']['dp']}")
