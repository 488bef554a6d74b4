"""Diagnostic for docs/validation.md "The attention backward ratio: what the fit absorbs" (issue 29); run with PYTHONPATH=$PWD/src from the repo root."""

from types import SimpleNamespace

import numpy as np

from tierwise.estimate.compute import compute_params
from tierwise.pricing.kernels import attention_kernel_rates, attention_time, compute_rates
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.parameters import load_parameters

P = load_parameters()
base = compute_params(P)
acc = load_accelerator("h200-sxm")
shape = SimpleNamespace(qk_head_dim=128, v_head_dim=128)
s = 16384
h = 16
F = 4 * s * s * h * 128 / 2  # causal forward FLOPs, batch 1
fits = {
    "shipped": {},
    "free fit from START": dict(attention_efficiency_flash2=0.357, attention_backward_ratio=0.53),
    "ratio pinned 0.85, refit": dict(attention_efficiency_flash2=0.2613, attention_backward_ratio=0.85),
    "no llm-foundry, free fit": dict(attention_efficiency_flash2=0.312, attention_backward_ratio=0.727),
}
for k, v in fits.items():
    r = compute_rates(acc, {**base, **v})
    eff, ov = attention_kernel_rates(["flash2"], np.array([0]), r)
    f, b = attention_time(F, shape, r, seq_len=s, eff=eff[0], overlap=ov[0])
    print(
        f"{k:28s} fwd {F / f / 1e12:6.1f} bwd {2.5 * F / b / 1e12:6.1f} TFLOP/s  fwd+bwd {(f + b) * 1e3:6.2f} ms  (measured 324.8 / 305.2 -> {(F / 324.771e12 + 2.5 * F / 305.18e12) * 1e3:.2f} ms)"
    )
