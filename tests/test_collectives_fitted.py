"""One prediction rule for fitted regimes (``collectives/fitted.py``): ``tierwise calibrate``'s report and the
estimator's collective model agree on a calibrated cluster, at the fitted rank count and beyond it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tierwise.collectives.fitted import predict_fitted
from tierwise.collectives.model import collective_cost
from tierwise.hierarchy import group_span
from tierwise.measure.calibrate import calibrate
from tierwise.measure.fit import predict_tier
from tierwise.specs.cluster import cluster_from_mapping

LOG = Path(__file__).parent / "data" / "nccl-logs" / "h100x32_4node_ib_allreduce_nccl2.24.3_voltagepark.log"
SIZES = np.geomspace(8.0, 8 * 2.0**30, 31)


@pytest.fixture(scope="module")
def calibrated():
    result = calibrate([str(LOG)], cluster="dgx-h100")
    return result, cluster_from_mapping(result.document)


@pytest.mark.parametrize("factor", [1, 2, 4])
@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter"])
def test_calibrate_report_equals_the_estimators_prediction(calibrated, factor, op):
    """The 32-rank IB log fitted, then both readers asked for 32, 64 and 128 ranks (4, 8, 16 DGX nodes):
    calibrate's :meth:`RegimeFit.predict` and :func:`collective_cost` on the calibrated cluster (the
    estimator's path) give the same seconds at every size (they were up to 62% apart at 64 ranks)."""
    result, cluster = calibrated
    fit = result.fits["scale_out"]
    n = fit.num_ranks * factor
    span = group_span(cluster, n, 1)
    assert int(span.tier) == 3  # the fitted tier
    cost = collective_cost(op, SIZES, span, cluster)
    assert np.all(cost.algorithm == "fitted")
    # the written YAML, read back by the measure rung: the same numbers, to the last bit
    written = np.asarray(predict_tier(result.document["fitted"]["scale_out"], op, SIZES, n))
    np.testing.assert_allclose(cost.time_s, written, rtol=1e-12)
    # the in-memory fit behind the report: the same up to the YAML's 4 significant digits per figure
    np.testing.assert_allclose(cost.time_s, np.asarray(fit.predict(op, SIZES, n)), rtol=1e-3)


def test_latency_scales_with_ring_steps_beyond_the_fitted_rank_count(calibrated):
    """Twice the ranks: a small message (latency bound) takes (2n - 1) / (n - 1) of the fitted latency."""
    result, _ = calibrated
    fit = result.fits["scale_out"]
    small = fit.regimes[0]
    n = fit.num_ranks
    t_n = float(predict_fitted(fit.regimes, "all-reduce", 0.0, n, fit_ranks=n))
    t_2n = float(predict_fitted(fit.regimes, "all-reduce", 0.0, 2 * n, fit_ranks=n))
    assert t_n == pytest.approx(small.latency_s)
    assert t_2n == pytest.approx(small.latency_s * (2 * n - 1) / (n - 1))


def test_a_size_outside_every_range_takes_the_nearest_regime():
    class Low:
        name, min_bytes, max_bytes, latency_s, busbw_bytes_per_s = "low", 1e3, 1e6, 1e-5, 1e9

    class High:
        name, min_bytes, max_bytes, latency_s, busbw_bytes_per_s = "high", 1e6, 1e9, 1e-4, 1e10

    t = predict_fitted([Low, High], "broadcast", [10.0, 1e10], 2)
    assert t.tolist() == pytest.approx([1e-5 + 10 / 1e9, 1e-4 + 1e10 / 1e10])
