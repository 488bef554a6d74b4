"""``validate --serving`` on the shipped serving set: the criteria of issue 16, and the known gap as a bound."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tierwise.cli import app


def test_validate_serving_json_and_criteria():
    r = CliRunner().invoke(app, ["validate", "--serving", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    thr = doc["summary"]["throughput"]
    assert thr["rows"] >= 40
    assert thr["median"] <= 15.0
    assert thr["p90"] <= 35.0
    assert all(r["predicted"] is not None for r in doc["rows"] if r["metric"] == "output_tokens_per_s_total")
