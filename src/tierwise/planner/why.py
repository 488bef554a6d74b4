"""Why the winner recomputes or offloads what it does: its memory choice against the others the search allowed,
each on the winner's own structure and switches, in the estimator's figures (issue 29: "inferred recompute
lists what it chose and why").

The choices are the recompute granularities the search allowed (none < selective < full, the order the
frameworks' recipes turn them on in: Korthikanti et al. 2022 section 5) and, where the space searches it,
no recompute with the fewest offloaded layers that fit (:mod:`tierwise.planner.offload`; Megatron-Core
``cpu_offloading_num_layers``). The fewest layers are found here by estimating every layer count ``1 .. L - 1``
of the winner (one vectorized call), independently of the planner's interpolation.
"""

from __future__ import annotations

import numpy as np

from tierwise.estimate import estimate
from tierwise.specs.parameters import Parameters
from tierwise.specs.plan import RECOMPUTE, PlanBatch
from tierwise.units import format_bytes

__all__ = ["memory_choice"]


def _fewest_offload(model, cluster, plan, parameters: Parameters) -> tuple[int, object | None]:
    """(k, estimate of the k layer counts) with k the fewest offloaded layers that fit ``plan`` without
    recompute (0: none fits)."""
    ks = list(range(1, model.num_layers))
    cands = [plan.replace(recompute="none", activation_offload_layers=k) for k in ks]
    est = estimate(model, cluster, PlanBatch.from_plans(cands), parameters=parameters)
    fits = np.asarray(est.memory["fits"], dtype=bool)
    return (ks[int(np.argmax(fits))] if fits.any() else 0), est


def _option(label: str, step: float, fits: bool, mem: float, winner: float) -> str:
    gap = step / winner - 1
    return f"{label} {gap:+.1%} step" + ("" if fits else f" but needs {mem:.0%} of memory")


def memory_choice(model, cluster, plan, space, *, parameters: Parameters) -> str:
    """One line: the winner's recompute / offload, and what each alternative on its structure would give."""
    allowed = [RECOMPUTE[r] for r in space.recompute]
    base = [plan.replace(recompute=r, activation_offload_layers=0) for r in allowed]
    est = estimate(model, cluster, PlanBatch.from_plans([plan, *base]), parameters=parameters)
    step = float(est.step_time_s[0])
    mem = est.memory["per_gpu_bytes"] / est.memory["capacity_bytes"]
    k = plan.activation_offload_layers
    others = [_option(f"{r} recompute" if r != "none" else "no recompute", float(est.step_time_s[i + 1]),
                      bool(est.memory["fits"][i + 1]), float(mem[i + 1]), step)
              for i, r in enumerate(allowed) if r != plan.recompute or k]
    if k:
        link = cluster.accelerator.host_link_name or "the host link"
        head = (f"recompute: none, with the activations of {k} of {model.num_layers} layers offloaded to the host "
                f"over {link} (Megatron-Core cpu_offloading_num_layers), the fewest that fit ({mem[0]:.0%} of "
                f"memory; a larger count is never faster, each layer's copy adds its exposed part): "
                f"{format_bytes(float(est.offload_host_bytes[0]))} per GPU each way per step, "
                f"{float(est.offload_exposed_s[0]):.3g} s exposed ({float(est.offload_exposed_s[0]) / step:.1%} "
                "of the step)")
    else:
        head = (f"recompute: {plan.recompute}, " + ("the cheapest that fits" if plan.recompute != "none"
                                                     else "nothing recomputed or offloaded")
                + f" ({mem[0]:.0%} of memory)")
        others += _offload_option(model, cluster, plan, space, step, parameters)
    return head + ("; instead: " + ", ".join(others) if others else "")


def _offload_option(model, cluster, plan, space, step: float, parameters: Parameters) -> list[str]:
    """What offload would give a winner that recomputes (nothing for one that fits without either)."""
    if plan.recompute == "none":
        return []
    if not space.offload:
        return []
    if plan.pp > 1:
        return ["no recompute with activation offload: not with pp > 1 (Megatron-Core has no CPU offloading "
                "with pipeline parallelism)"]
    k, est = _fewest_offload(model, cluster, plan, parameters)
    if not k:
        return [f"no recompute with activation offload: even {model.num_layers - 1} offloaded layers do not fit"]
    return [f"no recompute with {k} layers offloaded {float(est.step_time_s[k - 1]) / step - 1:+.1%} step"]
