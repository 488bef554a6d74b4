"""Diagnostic for docs/validation.md "The attention backward ratio: what the fit absorbs" (issue 29); run with PYTHONPATH=$PWD/src from the repo root."""

import numpy as np

from tierwise.estimate.compute import compute_params
from tierwise.specs.parameters import load_parameters
from tierwise.validate.fit import objective_residuals
from tierwise.validate.run import load_cases

P = load_parameters()
base = compute_params(P)
cases = load_cases()
sets = {
    "shipped": {},
    "free refit from START": dict(
        matmul_residual=0.891,
        attention_efficiency_flash2=0.357,
        attention_efficiency_cudnn=0.52,
        memory_bound_residual=0.452,
        attention_backward_ratio=0.53,
        overlap_interference=0.298,
    ),
    "ratio pinned 0.85": dict(
        matmul_residual=0.8907,
        attention_efficiency_flash2=0.2613,
        attention_efficiency_cudnn=0.3598,
        memory_bound_residual=0.449,
        overlap_interference=0.2956,
        attention_backward_ratio=0.85,
    ),
}
for k, v in sets.items():
    r = objective_residuals(cases, {**base, **v}, parameters=P)
    print(k, f"robust cost sum log1p(r^2/0.05^2) = {np.sum(np.log1p(r**2 / 0.05**2)):.2f}")
