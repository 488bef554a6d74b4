"""The issue's accuracy bounds, recomputed on the shipped calibration set (rows of high and medium confidence).

Bounds (issue 3, "Done when"): median of per-source median absolute errors <= 7%, overall median <= 7%,
90th percentile <= 15%, no row above 30%; leave-one-source-out median <= 12%. All six hold (figures in
docs/validation.md); the closest margins are the 90th percentile and the maximum.
"""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.estimate.step import _compute_params
from tierwise.validate import load_cases, validate
from tierwise.validate.fit import cross_validate, fit_parameters, objective_residuals


@pytest.fixture(scope="module")
def cases():
    return load_cases()


@pytest.fixture(scope="module")
def summary(cases):
    return validate(cases=cases).summary


@pytest.fixture(scope="module")
def loso(cases):
    return cross_validate(cases)


def test_median_of_per_source_medians(summary):
    assert summary["median_of_source_medians"] <= 7.0


def test_overall_median(summary):
    assert summary["overall"]["median"] <= 7.0


def test_p90(summary):
    assert summary["overall"]["p90"] <= 15.0


def test_no_row_above_30_percent(summary):
    assert summary["overall"]["max"] <= 30.0


def test_every_source_is_scored(summary):
    assert summary["scored"] >= 120
    for source, stats in summary["per_source"].items():
        assert stats["rows"] >= 9, source


def test_leave_one_source_out_median_of_source_medians(loso):
    assert loso["median_of_source_medians"] <= 12.0


def test_leave_one_source_out_overall_median(loso):
    assert loso["overall_median"] <= 12.0


def test_shipped_parameters_are_the_fit(cases):
    """catalog/parameters.yaml holds what `tierwise validate --fit` finds: refitting does not improve it."""
    shipped = _compute_params()
    fitted, info = fit_parameters(cases)
    cost_shipped = float(np.sum(np.log1p(objective_residuals(cases, shipped) ** 2 / 0.05**2)))
    cost_refit = float(np.sum(np.log1p(objective_residuals(cases, {**shipped, **fitted}) ** 2 / 0.05**2)))
    assert cost_refit >= cost_shipped * 0.98


def test_a_parameter_no_row_informs_keeps_its_start(cases):
    """Without the DeepSpeed ZeRO-3 rows nothing depends on torch_op_overhead: the fit leaves it at its start
    (10 us, inside the public 5-25 us per eager op) instead of letting the optimizer drift it to a bound."""
    from tierwise.validate.fit import START

    others = [c for c in cases if c.source_id != "narayanan2021_t2"]
    fitted, info = fit_parameters(others)
    assert info["not_informed"] == ["attention_efficiency_sdpa", "torch_op_overhead"]
    assert fitted["torch_op_overhead"] == START["torch_op_overhead"]
    _, info_all = fit_parameters(cases)
    assert info_all["not_informed"] == ["attention_efficiency_sdpa"]  # no row runs SDPA by default
