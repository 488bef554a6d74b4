"""Diagnostic for docs/validation.md "The attention backward ratio: what the fit absorbs" (issue 29); run with PYTHONPATH=$PWD/src from the repo root."""

from collections import defaultdict
from types import SimpleNamespace

import numpy as np

from tierwise.estimate.compute import compute_params
from tierwise.pricing.kernels import attention_kernel_rates, attention_time, compute_rates
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.parameters import load_parameters
from tierwise.validate.run import load_cases, predict

P = load_parameters()
base = compute_params(P)
cases = load_cases()
meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])
pred, T = predict(cases, base, parameters=P)
# model / microbench ratio per family on H200 at 16k (shipped)
acc = load_accelerator("h200-sxm")
shape = SimpleNamespace(qk_head_dim=128, v_head_dim=128)
s = 16384
F = 4 * s * s * 16 * 128 / 2
for fam, (mf, mb) in {"flash2": (324.771, 305.18), "cudnn": (673, 579)}.items():
    r = compute_rates(acc, base)
    eff, ov = attention_kernel_rates([fam], np.array([0]), r)
    f, b = attention_time(F, shape, r, seq_len=s, eff=eff[0], overlap=ov[0])
    print(
        fam,
        f"model fwd {F / f / 1e12:.0f} bwd {2.5 * F / b / 1e12:.0f} TFLOP/s; model/microbench time {(f + b) / (F / mf / 1e12 + 2.5 * F / mb / 1e12):.2f}",
    )
g = defaultdict(list)
for i, c in enumerate(cases):
    if not c.used or c.confidence not in ("high", "medium"):
        continue
    a = T["attention_s"][i] / T["step_time_s"][i]
    if a < 0.15:
        continue
    e = pred[i] / meas[i] - 1
    g[
        (
            c.source_id,
            c.plan.attention_kernel,
            c.cluster.accelerator.generation if hasattr(c.cluster, "accelerator") else "",
        )
    ].append((a, 1 + e / a))
for k, v in sorted(g.items()):
    v = np.array(v)
    print(
        k,
        f"n={len(v)} att share med {np.median(v[:, 0]):.2f}  implied attention time / model's: median "
        f"{np.median(v[:, 1]):.2f} (min {v[:, 1].min():.2f} max {v[:, 1].max():.2f})",
    )
