"""Diagnostic for docs/validation.md "The attention backward ratio: what the fit absorbs" (issue 29); run with PYTHONPATH=$PWD/src from the repo root."""

import json
import time

import numpy as np

from tierwise.estimate.compute import compute_params
from tierwise.specs.parameters import load_parameters
from tierwise.validate.fit import FITTED, fit_parameters
from tierwise.validate.run import load_cases, predict, summarize

P = load_parameters()
cases = load_cases()
base = compute_params(P)
meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])


def run(params, tag):
    pred, terms = predict(cases, params, parameters=P)
    err = (pred / meas - 1) * 100
    s = summarize(cases, err)
    print(
        tag,
        "msm {:.2f} p90 {:.2f} max {:.2f}".format(s["median_of_source_medians"], s["overall"]["p90"], s["overall"]["max"]),
        flush=True,
    )
    return err, s, terms


t = time.time()
e0, s0, T0 = run(dict(base), "shipped")
e1, s1, _ = run({**base, "attention_backward_ratio": 0.85}, "ratio0.85-norefit")
names = [n for n in FITTED if n != "attention_backward_ratio"]
fit, info = fit_parameters(cases, start={"attention_backward_ratio": 0.85}, names=names, parameters=P)
print("refit", {k: round(v, 4) for k, v in fit.items()}, info.get("cost"), time.time() - t, flush=True)
e2, s2, _ = run({**base, **fit, "attention_backward_ratio": 0.85}, "ratio0.85-refit")
rows = []
for i, c in enumerate(cases):
    if not c.used:
        continue
    rows.append(
        dict(
            row=c.row_id,
            src=c.source_id,
            seq=int(getattr(c.plan, "seq_len", 0) or 0),
            conf=c.confidence,
            recompute=str(c.plan.recompute),
            att_share=float(T0["attention_s"][i] / T0["step_time_s"][i]),
            e0=float(e0[i]),
            e1=float(e1[i]),
            e2=float(e2[i]),
        )
    )
with open("/tmp/attention_backward_ratio_pin.json", "w") as out:
    json.dump(dict(rows=rows, fit=fit, s0=s0, s1=s1, s2=s2), out, indent=1, default=str)
for src in sorted(s0["per_source"]):
    a, b, c = s0["per_source"][src], s1["per_source"][src], s2["per_source"][src]
    if a["rows"]:
        print(
            f"{src:40s} n={a['rows']:3d} med {a['median']:6.2f} sgn {a['signed_median']:7.2f} | pin-refit med {c['median']:6.2f} sgn {c['signed_median']:7.2f}"
        )
