"""Optimum checkpoint interval and expected wall-clock time of a job interrupted at random (arrays in, arrays out).

Symbols (Daly 2006, section 2): ``delta`` the time a checkpoint stalls training, ``M`` the mean time to
interrupt (MTTI) of the job, ``R`` the time from an interruption to resumed progress (restart), ``tau`` the
compute time between checkpoints, ``T_s`` the solve time (useful work) of the job.
"""

from __future__ import annotations

import numpy as np

__all__ = ["young_interval", "daly_interval", "daly_wall_time", "daly_ettr", "first_order_ettr"]


def young_interval(delta, mttf):
    """Young's first-order optimum: ``tau = sqrt(2 delta M)``.

    J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974: the
    time lost per failure is ``delta tau^-1 + tau / (2 M)`` to first order; its derivative is zero at
    ``tau = sqrt(2 delta M)``.
    """
    return np.sqrt(2.0 * np.asarray(delta, float) * np.asarray(mttf, float))


def daly_interval(delta, mttf):
    """Daly's higher-order optimum compute time between checkpoints.

    J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3),
    2006 (the perturbation solution, with the first three terms of the series)::

        tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta / (2M)) + 1/9 (delta / (2M))] - delta    for delta < 2M
        tau = M                                                                            for delta >= 2M

    the perturbation solution of d T_w / d tau = 0 for the wall time :func:`daly_wall_time`, to the order
    that reproduces the paper's three simulated validation points (117, 57 and 9.1 minutes for M = 24 h,
    6 h and 15 min with delta = 5 min; ``tests/goodput/test_interval.py``).
    """
    d = np.asarray(delta, float)
    m = np.asarray(mttf, float)
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def daly_wall_time(solve_s, tau, delta, restart, mttf):
    """Expected wall-clock time to finish ``T_s`` of work (Daly 2006, the complete cost model)::

        T_w = M exp(R / M) (exp((tau + delta) / M) - 1) T_s / tau

    Failures are a Poisson process of mean ``M``; each of the ``T_s / tau`` segments of ``tau + delta`` is
    retried until it runs through without a failure, and every failure costs ``R`` (itself interruptible)
    plus the partial segment. The expected time per segment is ``M e^(R/M) (e^((tau+delta)/M) - 1)``.
    """
    m = np.asarray(mttf, float)
    return m * np.exp(np.asarray(restart, float) / m) * np.expm1((np.asarray(tau, float) + delta) / m) * (
        np.asarray(solve_s, float) / np.asarray(tau, float))


def daly_ettr(tau, delta, restart, mttf):
    """Effective training time ratio ``T_s / T_w`` from :func:`daly_wall_time` (independent of ``T_s``)."""
    return 1.0 / daly_wall_time(1.0, tau, delta, restart, mttf)


def first_order_ettr(tau, delta, restart, mttf):
    """First-order ETTR ``1 - delta / tau - (tau / 2 + R) / M`` (Young's waste model, reliability-notes §12).

    Shown beside Daly's form: it splits the lost time into checkpoint stalls, rework and restarts.
    """
    return 1.0 - np.asarray(delta, float) / tau - (np.asarray(tau, float) / 2.0 + restart) / mttf
