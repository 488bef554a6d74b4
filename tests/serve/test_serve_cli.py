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
