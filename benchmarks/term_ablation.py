"""What each issue-14 term buys, one at a time, on the full calibration set (docs/validation.md).

For each term the model is run with that one term switched off (everything else as shipped), the global
parameters are refitted on every row (``validate.fit.fit_parameters``), and the in-sample figures (median of
per-source medians, overall median, p90, max) and the leave-one-(hardware x stack)-out figures (median of
group medians, p90 over held-out rows) are printed. "shipped" is the model with every term on.

Switching a term off means (each by patching one function for the run, nothing in the package changes):

* ``layouts``: layers that do not divide pp x vpp are refused again (those rows are left out of the scores);
* ``framework defaults``: plans built without the row's framework (tierwise's own defaults);
* ``per-generation GEMM/HBM``: every accelerator uses the H100 SXM's measured fractions (one global fraction);
* ``clock factor``: no sustained-clock reduction under a power cap;
* ``exp2 roofline``: the softmax exponentials cost nothing (attention is its GEMMs only);
* ``kernel families``: one attention efficiency and no overlap for every kernel (FA2 structure everywhere);
* ``MoE model``: MoE rows mapped as dense models (issue 14's integration defect 2);
* ``tile quantization``: grouped-GEMM efficiency 1 whatever the rows per expert and expert width;
* ``launch-bound``: no host launch floor of MoE layers;
* ``imbalance``: ``moe_load_imbalance`` 1;
* ``DeepEP node dedup``: DeepEP's dispatch priced as a plain all-to-all across scale-up domains.

Run: ``PYTHONPATH=src python benchmarks/term_ablation.py [--no-logo] [TERM ...]`` (about 3 minutes a term
with the leave-one-group-out refits on 2 cores). Prints one markdown row per term as it finishes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from unittest import mock

import numpy as np


def _profile_patch(**changes):
    import tierwise.estimate.step as st

    real = st.compute_profile

    def patched(acc):
        return dataclasses.replace(real(acc), **changes)

    return mock.patch.object(st, "compute_profile", patched)


def _one_gemm_hbm():
    import tierwise.estimate.step as st
    from tierwise.specs import catalog
    from tierwise.specs.accelerator import load_accelerator

    real = st.compute_profile
    ref = real(load_accelerator("h100-sxm"))
    del catalog

    def patched(acc):
        return dataclasses.replace(real(acc), gemm_fraction=ref.gemm_fraction, hbm_fraction=ref.hbm_fraction)

    return mock.patch.object(st, "compute_profile", patched)


def _params_patch(**changes):
    import tierwise.estimate.step as st
    import tierwise.validate.fit as fit

    real = st._compute_params

    def patched():
        return {**real(), **changes}

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(st, "_compute_params", patched))
    stack.enter_context(mock.patch.object(fit, "_compute_params", patched))
    return stack


def _one_kernel():
    import tierwise.estimate.step as st

    def patched(plans, generation, cparams):
        n = len(plans)
        return np.full(n, cparams["attention_efficiency_flash2"]), np.zeros(n)

    return mock.patch.object(st, "_attention_kernels", patched)


def _no_framework():
    import tierwise.validate.mapping as mp

    real = mp.plan_from_mapping

    def patched(data, **kw):
        kw["framework"] = None
        return real(data, **kw)

    return mock.patch.object(mp, "plan_from_mapping", patched)


def _dense_moe():
    import tierwise.validate.mapping as mp

    return mock.patch.object(mp, "_moe_from_row", lambda row, filled: None)


def _no_tiles():
    import tierwise.estimate.step as st

    return mock.patch.object(st, "grouped_gemm_efficiency", lambda *a, **k: 1.0)


def _no_dedup():
    import tierwise.estimate.step as st

    return mock.patch.object(st, "_deepep_node_dedup", lambda model, plans, span: np.ones(len(plans)))


def _no_launch():
    import tierwise.estimate.step as st

    return mock.patch.object(st, "_dispatcher_kernels", lambda plans: (np.zeros(len(plans)), np.zeros(len(plans))))


TERMS = {
    "shipped": contextlib.nullcontext,
    "layouts": contextlib.nullcontext,  # handled in run(): rows with an uneven layout are dropped
    "framework defaults": _no_framework,
    "per-generation GEMM/HBM": _one_gemm_hbm,
    "clock factor": lambda: _profile_patch(clock_factor=1.0),
    "exp2 roofline": lambda: _profile_patch(exp2_per_clock_per_sm=10**9),
    "kernel families": _one_kernel,
    "MoE model": _dense_moe,
    "tile quantization": _no_tiles,
    "launch-bound": _no_launch,
    "imbalance": lambda: _params_patch(moe_load_imbalance=1.0),
    "DeepEP node dedup": _no_dedup,
}


def run(term: str, logo: bool = True) -> dict:
    from tierwise.estimate.compute import compute_params
    from tierwise.pricing.comm import comm_memo
    from tierwise.validate.fit import cross_validate_groups, fit_parameters
    from tierwise.validate.run import load_cases, predict, summarize

    with TERMS[term]():
        cases = load_cases()
        if term == "layouts":
            cases = [c for c in cases if not c.used or c.plan.pp == 1
                     or c.model.num_layers % (c.plan.pp * c.plan.vpp) == 0]
        fitted, _ = fit_parameters(cases)
        with comm_memo():
            pred, _ = predict(cases, {**compute_params(), **fitted})
        meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])
        s = summarize(cases, (pred - meas) / meas * 100.0)
        out = {"term": term, "rows": s["scored"], "mosm": s["median_of_source_medians"],
               "median": s["overall"]["median"], "p90": s["overall"]["p90"], "max": s["overall"]["max"]}
        if logo:
            cv = cross_validate_groups(cases, workers=2)
            out.update(logo_mogm=cv["median_of_group_medians"], logo_p90=cv["p90"], logo_max=cv["max"])
    return out


def main(argv: list[str]) -> None:
    logo = "--no-logo" not in argv
    terms = [a for a in argv if not a.startswith("--")] or list(TERMS)
    print("| term switched off | scored rows | median of source medians | median | p90 | max "
          "| LOGO median of group medians | LOGO p90 |")
    print("|---|---|---|---|---|---|---|---|")
    for term in terms:
        r = run(term, logo)
        lg = (f"{r['logo_mogm']:.1f} | {r['logo_p90']:.1f}" if "logo_mogm" in r else "- | -")
        print(f"| {term} | {r['rows']} | {r['mosm']:.1f} | {r['median']:.1f} | {r['p90']:.1f} | {r['max']:.1f} | {lg} |",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
