"""validate --fit never writes the installed parameters: it writes --fit-out FILE, numbers read back as
numbers, an unusable fit is refused, and TIERWISE_PARAMETERS=FILE makes estimate/plan use the file."""

from __future__ import annotations

import hashlib
import math

import pytest
import yaml

from tierwise.cli import main
from tierwise.errors import OutputError, SpecError, TierwiseError
from tierwise.specs.parameters import PARAMETERS_ENV, load_parameters, parameters_file
from tierwise.validate.fit import check_fitted, installed_parameters_path, write_parameters, yaml_number


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(autouse=True)
def _fresh_parameters(monkeypatch):
    monkeypatch.delenv(PARAMETERS_ENV, raising=False)
    load_parameters.cache_clear()
    yield
    load_parameters.cache_clear()


@pytest.mark.parametrize("value", [1e-5, 1.394e-05, 0.7641, 3.749e-05, 2.0, 0.0, 1e20, 12345678.0])
def test_yaml_number_reads_back_as_the_float(value):
    back = yaml.safe_load(f"x: {yaml_number(value)}")["x"]
    assert isinstance(back, float) and back == pytest.approx(value, rel=1e-3)


def test_fit_to_a_user_path_leaves_the_installed_file_byte_identical(tmp_path):
    installed = installed_parameters_path()
    before = _digest(installed)
    out = tmp_path / "fitted.yaml"
    fitted = {"matmul_efficiency_max": 0.71, "torch_op_overhead": 1e-5, "attention_efficiency_flash2": 0.2}
    assert write_parameters(fitted, "a test fit", out=out) == str(out)
    assert _digest(installed) == before
    compute = yaml.safe_load(out.read_text())["compute"]
    assert compute["torch_op_overhead"] == pytest.approx(1e-5) and isinstance(compute["torch_op_overhead"], float)
    assert compute["matmul_efficiency_max"] == 0.71 and compute["fit"] == "a test fit"
    assert parameters_file(out).compute["torch_op_overhead"] == pytest.approx(1e-5)
    assert load_parameters().compute["torch_op_overhead"] != pytest.approx(1e-5)  # the run's stay the installed
    assert [p.name for p in tmp_path.iterdir()] == ["fitted.yaml"]


def test_without_an_output_path_nothing_is_written():
    before = _digest(installed_parameters_path())
    with pytest.raises(OutputError, match="--fit-out"):
        write_parameters({"matmul_efficiency_max": 0.7}, "note")
    with pytest.raises(OutputError, match="installed parameters file"):
        write_parameters({"matmul_efficiency_max": 0.7}, "note", out=installed_parameters_path())
    assert _digest(installed_parameters_path()) == before


@pytest.mark.parametrize("fitted", [
    {"matmul_efficiency_max": math.nan},
    {"attention_efficiency": math.inf},
    {"memory_bound_efficiency": 1.5},
    {"attention_efficiency": 0.0},
    {"overlap_interference": -0.2},
    {"torch_op_overhead": "fast"},
])
def test_an_unusable_fit_is_refused_and_writes_nothing(tmp_path, fitted):
    out = tmp_path / "fitted.yaml"
    with pytest.raises(TierwiseError, match="nothing was written"):
        write_parameters(fitted, "note", out=out)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_check_fitted_accepts_the_shipped_values():
    shipped = load_parameters().compute
    from tierwise.validate.fit import FITTED

    check_fitted({k: shipped[k] for k in FITTED})


def test_the_env_var_points_estimate_at_a_parameters_file(tmp_path, monkeypatch, capsys):
    import json

    scenario = "examples/llama3.1-70b-dgx-h100.yaml"
    from pathlib import Path

    scenario = str(Path(__file__).resolve().parents[2] / scenario)
    assert main(["estimate", scenario, "--json"]) == 0
    base = json.loads(capsys.readouterr().out)
    slow = tmp_path / "slow.yaml"
    slow.write_text("compute:\n  matmul_efficiency_max: 0.3\n")
    monkeypatch.setenv(PARAMETERS_ENV, str(slow))
    assert main(["estimate", scenario, "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)

    def step(doc):
        return doc["results"][0]["step_time_s"]

    assert step(mine) > step(base) * 1.3


@pytest.mark.parametrize("text, needle", [
    ("compute:\n  torch_op_overhead: 1e-05\n", "not a finite number"),
    ("compute:\n  matmul_efficiency_max: .nan\n", "not a finite number"),
    ("- 1\n- 2\n", "must be a mapping"),
    ("computer:\n  x: 1\n", "unknown section"),
    ("compute: 3\n", "must be a mapping"),
])
def test_a_broken_parameters_file_is_one_clear_error(tmp_path, monkeypatch, text, needle):
    bad = tmp_path / "p.yaml"
    bad.write_text(text)
    monkeypatch.setenv(PARAMETERS_ENV, str(bad))
    with pytest.raises(SpecError, match=needle):
        load_parameters()


def test_validate_fit_without_fit_out_is_one_line_and_touches_nothing(capsys):
    before = _digest(installed_parameters_path())
    assert main(["validate", "--fit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fit-out" in err[0]
    assert _digest(installed_parameters_path()) == before


def test_validate_fit_writes_the_user_file_and_validates_with_it(tmp_path, capsys):
    import json

    before = _digest(installed_parameters_path())
    out = tmp_path / "fitted.yaml"
    assert main(["validate", "--source", "nemo_2407_perf", "--fit", "--fit-out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert _digest(installed_parameters_path()) == before
    assert doc["fit"]["written_to"] == str(out)
    compute = yaml.safe_load(out.read_text())["compute"]
    for key, value in doc["fit"]["parameters"].items():
        assert isinstance(compute[key], float) and compute[key] == pytest.approx(value, rel=1e-3)
        assert doc["parameters"][key] == compute[key]  # the rows were estimated with the written file
    assert [p.name for p in tmp_path.iterdir()] == ["fitted.yaml"]
