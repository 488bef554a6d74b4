"""planner.space._divisors: O(sqrt n) trial division agrees with the naive O(n) definition (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.planner.space import _divisors


def _naive(n: int) -> list[int]:
    """Every d in 1..n with n % d == 0 (the O(n) definition, as numpy array arithmetic for speed)."""
    d = np.arange(1, n + 1)
    return d[n % d == 0].tolist()


def test_matches_the_naive_form_up_to_10000():
    for n in range(1, 10_001):
        assert _divisors(n) == _naive(n), n


@pytest.mark.parametrize("n, count", [(131_072, 18), (2**40, 41), (720_720, 240), (999_983, 2),
                                      (999_983 * 999_979, 4), (10**12, 169)])
def test_large_n(n, count):
    d = _divisors(n)
    assert len(d) == count
    assert d == sorted(set(d)) and d[0] == 1 and d[-1] == n
    assert all(n % x == 0 for x in d)
    # every divisor pair (x, n / x) is present
    assert all(n // x in d for x in d)
