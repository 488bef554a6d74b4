"""Max-min fairness: a hand-checked example and the defining properties on random instances."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.netsim.maxmin import incidence, max_min_rates


def test_textbook_example():
    # Bertsekas & Gallager section 6.5.2 style: links A (cap 1) and B (cap 2); flows 0,1 on A; 1,2,3 on B
    unit = np.array([0, 1, 1, 2, 3])
    res = np.array([0, 0, 1, 1, 1])
    rate = max_min_rates(incidence(unit, res, 4, 2), np.array([1.0, 2.0]))
    assert rate == pytest.approx([0.5, 0.5, 0.75, 0.75])


def test_multiplicity_counts_twice():
    rate = max_min_rates(incidence(np.array([0, 0]), np.array([0, 0]), 1, 1), np.array([10.0]))
    assert rate == pytest.approx([5.0])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_feasible_and_every_unit_has_a_bottleneck(num_units, num_res, seed):
    rng = np.random.default_rng(seed)
    hops = rng.integers(1, 4, num_units)
    unit = np.repeat(np.arange(num_units), hops)
    res = rng.integers(0, num_res, unit.size)
    cap = rng.uniform(1, 10, num_res)
    A = incidence(unit, res, num_units, num_res)
    rate = max_min_rates(A, cap)
    load = A @ rate
    assert np.all(load <= cap * (1 + 1e-9))
    saturated = load >= cap * (1 - 1e-9)
    # max-min: each unit crosses a saturated resource on which no unit is faster than it
    for u in range(num_units):
        rs = np.unique(res[unit == u])
        ok = False
        for r in rs[saturated[rs]]:
            others = np.unique(unit[res == r])
            if rate[others].max() <= rate[u] * (1 + 1e-9):
                ok = True
        assert ok
