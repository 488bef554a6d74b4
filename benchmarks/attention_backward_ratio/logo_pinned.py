"""Diagnostic for docs/validation.md "The attention backward ratio: what the fit absorbs" (issue 29); run with PYTHONPATH=$PWD/src from the repo root."""

import sys
import time

import tierwise.validate.fit as F
from tierwise.validate import load_cases

cases = load_cases()
if sys.argv[1] == "pin":
    F.FITTED["attention_backward_ratio"] = (0.85, 0.85 + 1e-6)
    F.START["attention_backward_ratio"] = 0.85
t = time.time()
r = F.cross_validate_groups(cases, workers=1)
print(
    sys.argv[1],
    "LOGO median of group medians {:.2f} p90 {:.2f} overall median {:.2f} max {:.2f} ({:.0f}s)".format(r["median_of_group_medians"], r["p90"], r["overall_median"], r["max"], time.time() - t),
)
for g, v in r["per_group"].items():
    print(f"  {g:<40} n={v['rows']:3d} median {v['median']:.1f}")
