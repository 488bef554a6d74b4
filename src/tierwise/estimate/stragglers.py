"""Stragglers: a synchronous step waits for its slowest rank (closed form, opt-in).

A data-parallel step ends with a collective every rank joins, and each replica waits for its slowest
tensor/pipeline member, so one slow GPU or link stretches the step of the whole job. Let each of the
job's ``N`` GPUs be a straggler independently with probability ``p`` (the share of slow parts at any
moment), slowed by the factor ``1 + s``. The step takes ``T0 (1 + s)`` when at least one rank is slow,
else ``T0``, so its expectation is

    E[T] / T0 = 1 + s (1 - (1 - p)^N)

(the maximum of N rank times whose slow ranks all run at ``1 + s``: the max is ``1 + s`` as soon as one is
slow). ``pN`` stragglers are expected at a time; at ``pN >> 1`` the job almost always runs at ``1 + s``.

Published figures: MegaScale (Jiang et al., NSDI'24, sec. 5 / arXiv 2402.15627) found about 0.5% of
machines substantially slower, setting the cluster's MFU until excluded; Falcon (Wu et al., arXiv
2410.12588, sec. 1 and 3) measured fail-slows on a >10,000-GPU production cluster lasting tens of seconds to
about ten hours and delaying the average job by 1.34x, and its detection and mitigation recovered 60.1% of
the slowdown. The issue's range "each 10-40% slow" gives the default ``s = 0.25`` (its midpoint, an
assumption); "a single slow GPU link ... can reduce cluster performance by up to 40%" (Meta via Cisco,
/work/shared/data/reliability/reliability-notes.md sec. 10) is the upper end.

Detection and eviction: swapping each straggler for a hot spare restores ``T0`` at the cost of ``pN``
spares on average (a share ``p`` of the fleet); detection that takes ``d`` of an episode lasting ``D``
leaves the job slow for the share ``d / D`` of each episode, i.e. straggler rate ``p d / D``.
Left out: several slowness levels at once (the max of unequal factors), correlated stragglers (a slow
switch slowing a rack), and the time the eviction itself costs (a restart; :mod:`tierwise.goodput`).
"""

from __future__ import annotations

import math

from tierwise.errors import SpecError

__all__ = ["DEFAULT_SLOWDOWN", "check_stragglers", "straggler_slowdown", "straggler_block"]

DEFAULT_SLOWDOWN = 0.25
"""Default slowdown of a straggler: midpoint of the issue's published 10-40% (an assumption)."""


def straggler_slowdown(num_ranks: int, rate: float, slowdown: float) -> float:
    """Expected step-time factor ``1 + s (1 - (1 - p)^N)`` of a synchronous step (module docstring)."""
    if num_ranks < 1:
        raise SpecError(f"stragglers need at least 1 rank, got {num_ranks}")
    check_stragglers(rate, slowdown)
    p_any = -math.expm1(num_ranks * math.log1p(-rate)) if rate < 1 else 1.0
    return 1.0 + slowdown * p_any


def check_stragglers(rate: float, slowdown: float, detect_share: float | None = None) -> None:
    """One clear error naming the flag for a rate, slowdown or detection share out of range."""
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and 0.0 <= rate <= 1.0):
        raise SpecError(f"--straggler-rate {rate!r} must be a share between 0 and 1 (e.g. 0.0005: 5 per 10,000)")
    if not (isinstance(slowdown, (int, float)) and math.isfinite(slowdown) and 0.0 <= slowdown <= 10.0):
        raise SpecError(f"--straggler-slowdown {slowdown!r} must be between 0 and 10 (0.25: a slow rank takes "
                        f"1.25x as long)")
    if detect_share is not None and not (isinstance(detect_share, (int, float)) and math.isfinite(detect_share)
                                         and 0.0 <= detect_share <= 1.0):
        raise SpecError(f"--straggler-detect {detect_share!r} must be a share between 0 and 1 of an episode")


def straggler_block(num_gpus: int, step_time_s: float, tokens_per_s: float, rate: float,
                    slowdown: float = DEFAULT_SLOWDOWN, detect_share: float | None = None) -> dict:
    """The estimate document's ``stragglers`` block: expected step and throughput with stragglers, and
    what eviction buys (hot spares, or detection after ``detect_share`` of an episode)."""
    factor = straggler_slowdown(num_gpus, rate, slowdown)
    out = {
        "rate": rate, "slowdown": slowdown, "num_gpus": num_gpus,
        "expected_stragglers": rate * num_gpus,
        "p_any_slow": (factor - 1.0) / slowdown if slowdown > 0 else 0.0,
        "step_factor": factor,
        "step_time_s": step_time_s * factor,
        "tokens_per_s": tokens_per_s / factor,
        "evict_spares": math.ceil(rate * num_gpus),
    }
    check_stragglers(rate, slowdown, detect_share)
    if detect_share is not None:
        f_det = straggler_slowdown(num_gpus, rate * detect_share, slowdown)
        out.update(detect_share=detect_share, detect_step_factor=f_det, detect_tokens_per_s=tokens_per_s / f_det)
    return out
