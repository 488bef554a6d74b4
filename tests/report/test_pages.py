"""The ``--html`` pages of plan, scale, simulate and sweep show: built from the command's ``--json`` document,
self-contained, with the plot data in them; refused before the work where they cannot be written. (The pages
are opened in a real browser by browser_tests/, CI step .ci/browser.)"""

from __future__ import annotations

import html
import json
import re

import pytest

pytest.importorskip("plotly")

from tierwise.cli import main  # noqa: E402


def _run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _plot_ids(text: str) -> list[str]:
    return re.findall(r'<div id="([a-z]+)" class="plotly-graph-div"', text)


def test_plan_page_ranks_plans_with_breakdown_and_tiers(tmp_path, capsys):
    page = tmp_path / "plan.html"
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "64", "--top",
                      "4", "--max-mbs", "2", "--max-vpp", "2", "--json", "--html", str(page))
    assert rc == 0
    doc = json.loads(out)
    text = page.read_text(encoding="utf-8")
    assert doc["html"] == str(page) and _plot_ids(text) == ["breakdown", "tiers"]
    assert len(text) > 1_000_000 and "Plotly.newPlot" in text and "<script src" not in text  # plotly.js inlined
    for p in doc["plans"]:
        assert f"{p['estimate']['tokens_per_s']:,.0f}" in text  # every ranked plan is in the table
    assert "exposed scale_out" in text and "scale_up" in text


def test_scale_page_marks_the_knee(tmp_path, capsys):
    page = tmp_path / "scale.html"
    rc, out, _ = _run(capsys, "scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--global-batch", "128",
                      "--seq", "4096", "--gpus", "128:1024", "--json", "--html", str(page))
    assert rc == 0
    doc = json.loads(out)
    assert doc["knee_num_gpus"] == 512  # this model, batch and range have a knee (planner/answer.py _knee)
    text = page.read_text(encoding="utf-8")
    assert _plot_ids(text) == ["scale"] and f"knee: {doc['knee_num_gpus']} GPUs" in text


def test_simulate_page_and_the_utilisation_histogram(tmp_path, capsys):
    page = tmp_path / "sim.html"
    rc, out, _ = _run(capsys, "simulate", "all-reduce", "--gpus", "128", "--radix", "16", "--tiers", "2",
                      "--size", "256MB", "--fail-links", "3", "--json", "--html", str(page))
    assert rc == 0
    doc = json.loads(out)
    hist = doc["link_utilization"]
    assert sum(hist["counts"]) + hist["idle_links"] == hist["links"] > 0
    assert len(hist["edges"]) == len(hist["counts"]) + 1 and hist["edges"][0] == 0 and hist["edges"][-1] == 1
    assert hist["counts"][-1] >= 1  # the bottleneck links are saturated (utilisation 1 falls in the last bin)
    text = page.read_text(encoding="utf-8")
    assert _plot_ids(text) == ["utilization", "bottlenecks", "failures"]
    assert html.escape(doc["bottleneck_links"][0]["link"]) in text


def test_sweep_page(tmp_path, capsys):
    pytest.importorskip("duckdb")
    grid = tmp_path / "grid.yaml"
    grid.write_text("studies:\n"
                    "  - {kind: estimate, model: llama3.1-8b, cluster: dgx-h100, gpus: [16, 32], plan: {tp: 8}}\n"
                    "  - {kind: simulate, topology: {family: fat-tree, gpus: 32, radix: 8, tiers: 2},"
                    " pattern: all-reduce, size: 16MB}\n")
    assert main(["sweep", "run", str(grid), "--out", str(tmp_path / "res")]) == 0
    capsys.readouterr()
    page = tmp_path / "sweep.html"
    rc, out, _ = _run(capsys, "sweep", "show", str(tmp_path / "res"), "--json", "--html", str(page))
    assert rc == 0
    doc = json.loads(out)
    assert set(doc["views"]) == {"status", "training", "simulate", "wall"}
    assert _plot_ids(page.read_text(encoding="utf-8")) == ["status", "training", "simulate", "wall"]


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"],
    ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8:16"],
    ["simulate", "all-reduce", "--gpus", "64", "--radix", "16", "--size", "1MB"],
])
def test_html_without_plotly_or_into_a_missing_dir_is_one_line(argv, tmp_path, capsys, monkeypatch):
    rc, out, err = _run(capsys, *argv, "--html", str(tmp_path / "nope" / "x.html"))
    assert rc == 2 and not out and err.count("\n") == 1 and "--html" in err
    import builtins

    real_import = builtins.__import__

    def no_plotly(name, *args, **kwargs):
        if name == "plotly" or name.startswith("plotly."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_plotly)
    rc, out, err = _run(capsys, *argv, "--html", str(tmp_path / "x.html"))
    assert rc == 2 and "tierwise[report]" in err and not (tmp_path / "x.html").exists()


def test_progress_bars_stay_off_stdout_and_off_non_terminals(capsys, monkeypatch):
    from tierwise.cli import _progress

    monkeypatch.delenv("TIERWISE_PROGRESS", raising=False)
    assert not _progress.enabled()  # captured stderr is not a terminal
    monkeypatch.setattr(_progress.sys.stderr, "isatty", lambda: True, raising=False)
    assert _progress.enabled()
    monkeypatch.setenv("TIERWISE_PROGRESS", "0")
    assert not _progress.enabled()
    monkeypatch.setenv("TIERWISE_PROGRESS", "1")
    rc, out, _ = _run(capsys, "plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--top", "1",
                      "--json")
    assert rc == 0 and json.loads(out)["plans"]  # stdout is one JSON document with the bar drawn on stderr
