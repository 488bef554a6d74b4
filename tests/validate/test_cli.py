"""``tierwise validate`` in-process: JSON, HTML, errors as one line with exit code 2."""

from __future__ import annotations

import json

from tierwise.cli import main
from tierwise.validate import default_dataset_path


def run_json(capsys, *args):
    rc = main(["validate", "--json", *args])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def test_json_document(capsys):
    doc = run_json(capsys)
    assert doc["summary"]["rows"] == 161
    assert len(doc["rows"]) == 161
    used = [r for r in doc["rows"] if not r["skipped"]]
    for r in used:
        assert r["measured_tokens_per_s_per_gpu"] > 0 and r["predicted_tokens_per_s_per_gpu"] > 0
        assert r["flop_rule"] and r["metric"]
        assert abs(sum(r["step_shares"].values()) - 1.0) < 1e-6
    assert doc["summary"]["skipped"] == [] and doc["summary"]["used"] == 161  # none refused (issue 14)
    assert {r["group"] for r in doc["rows"]} >= {"hopper/nemo-24.07", "ampere/megatron-lm-2021"}
    assert all(isinstance(r["fits"], bool) for r in doc["rows"])
    assert doc["worst_rows"] and doc["worst_rows"][0]["dominant_term"]
    assert "attention_efficiency_cudnn" in doc["parameters"]


def test_source_filter(capsys):
    doc = run_json(capsys, "--source", "korthikanti2022")
    assert {r["source_id"] for r in doc["rows"]} == {"korthikanti2022"}
    assert list(doc["summary"]["per_source"]) == ["korthikanti2022"]


def test_table_output(capsys):
    assert main(["validate", "--source", "narayanan2021_t1"]) == 0
    out = capsys.readouterr().out
    assert "median of per-source medians" in out and "GPT 1.7B" in out


def test_html_report_is_self_contained_with_plot_data(tmp_path, capsys):
    page = tmp_path / "report.html"
    assert main(["validate", "--source", "nemo_2407_perf", "--html", str(page)]) == 0
    text = page.read_text()
    assert "<script src=" not in text  # plotly.js inlined, works offline
    assert "Plotly.newPlot" in text and "nemo_2407_perf" in text
    assert "Llama-2 70B" in text  # hover text / table rows
    assert '"x":[' in text.replace(" ", "")  # the scatter's data


def test_html_has_the_group_scatter_and_table(tmp_path):
    from tierwise.validate.report import html_report

    doc = json.loads(_doc_json())
    doc["cross_validation_groups"] = {
        "grouping": "generation / stack", "median_of_group_medians": 6.0, "p90": 15.0, "max": 30.0,
        "per_group": {"hopper/nemo-24.07": {"rows": 12, "median": 5.0, "p90": 13.0, "max": 15.0,
                                            "sources": ["nemo_2407_perf"], "params_at_bounds": {"x": "lower"}}}}
    text = html_report(doc)
    assert "scatter-groups" in text and "hardware generation x software stack" in text
    assert "Leave-one-(hardware x software-stack)-out" in text and "x (lower)" in text


def _doc_json() -> str:
    from tierwise.validate import validation_document

    return json.dumps(validation_document(source="nemo_2407_perf"))


def test_unknown_source_is_one_line_exit_2(capsys):
    assert main(["validate", "--source", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown source 'nope'" in err


def test_missing_dataset_exit_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_wrong_columns_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["validate", str(bad)]) == 2
    assert "lacks columns" in capsys.readouterr().err


def test_users_own_csv(tmp_path, capsys):
    lines = default_dataset_path().read_text().splitlines()
    mine = tmp_path / "mine.csv"
    mine.write_text("\n".join(lines[:4]) + "\n")
    doc = run_json(capsys, str(mine))
    assert doc["summary"]["rows"] == 3


def test_write_parameters_keeps_comments(tmp_path):
    from tierwise.specs.catalog import entries
    from tierwise.validate.fit import write_parameters

    src = default_dataset_path().parents[1] / "specs" / "catalog" / "parameters.yaml"
    copy = tmp_path / "parameters.yaml"
    copy.write_text(src.read_text())
    # a key of the section is replaced in place; a known key not yet in the file (issue 32: every key has a
    # range, so an unknown one would not load) is appended
    write_parameters({"attention_efficiency_flash2": 0.3333, "matmul_efficiency_max": 0.7}, "a note", path=copy)
    text = copy.read_text()
    assert "attention_efficiency_flash2: 0.3333" in text and "matmul_efficiency_max: 0.7" in text
    assert 'fit: "a note"' in text
    assert text.count("#") == src.read_text().count("#")
    entries.cache_clear()
