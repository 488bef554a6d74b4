"""Regenerate the figures of docs/validation.md from ``tierwise validate --json --cross-validate``.

    PYTHONPATH=src python -m tierwise validate --json --cross-validate > /tmp/v.json
    python tools/validation_tables.py /tmp/v.json docs/validation.md

Each table sits between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` markers and is replaced in place.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def tables(doc: dict) -> dict[str, str]:
    s = doc["summary"]
    out = {}
    lines = ["| source | rows scored | median | mean | p90 | max | signed median |", "|---|---|---|---|---|---|---|"]
    for k, v in s["per_source"].items():
        lines.append(f"| {k} | {v['rows']} | {v['median']:.1f} | {v['mean']:.1f} | {v['p90']:.1f} | {v['max']:.1f} | "
                     f"{v['signed_median']:+.1f} |")
    o = s["overall"]
    lines.append(f"| **overall** | {o['rows']} | **{o['median']:.1f}** | {o['mean']:.1f} | **{o['p90']:.1f}** | "
                 f"**{o['max']:.1f}** | |")
    lines.append(f"\nMedian of per-source medians: **{s['median_of_source_medians']:.1f}%** (absolute % error)")
    out["summary"] = "\n".join(lines)
    c = doc["cross_validation"]
    lines = ["| held-out source | rows | median | p90 | max |", "|---|---|---|---|---|"]
    for k, v in c["per_source"].items():
        lines.append(f"| {k} | {v['rows']} | {v['median']:.1f} | {v['p90']:.1f} | {v['max']:.1f} |")
    lines.append(f"\nMedian of held-out source medians **{c['median_of_source_medians']:.1f}%**; median over all "
                 f"held-out rows **{c['overall_median']:.1f}%**.")
    out["loso"] = "\n".join(lines)
    lines = ["| row | source | model | plan | error % | dominant term (share of step) |", "|---|---|---|---|---|---|"]
    for w in doc["worst_rows"]:
        lines.append(f"| {w['row_id']} | {w['source_id']} | {w['model']} | {w['plan']} | {w['error_pct']:+.1f} | "
                     f"{w['dominant_term']} ({w['dominant_share']:.0%}) |")
    out["worst"] = "\n".join(lines)
    fitted = ("matmul_residual", "matmul_memory_weight", "attention_efficiency_flash2",
              "attention_efficiency_cudnn", "attention_backward_ratio", "memory_bound_residual", "torch_op_overhead",
              "overlap_interference")
    lines = ["| parameter | fitted value |", "|---|---|"]
    for k in fitted:
        lines.append(f"| `{k}` | {doc['parameters'][k]:.4g} |")
    out["fit"] = "\n".join(lines)

    def verdict(value: float, bound: float) -> str:
        return f"{value:.1f}% (bound {bound:g}%: {'met' if value <= bound else '**not met**'})"

    g = doc.get("cross_validation_groups")
    if g:
        lines = ["| held-out group | rows | sources | median | p90 | max | parameters at a bound |",
                 "|---|---|---|---|---|---|---|"]
        for k, v in g["per_group"].items():
            bounds = ", ".join(f"{p} ({b})" for p, b in sorted(v["params_at_bounds"].items())) or "-"
            lines.append(f"| {k} | {v['rows']} | {', '.join(v['sources'])} | {v['median']:.1f} | {v['p90']:.1f} | "
                         f"{v['max']:.1f} | {bounds} |")
        lines.append(f"\nMedian of held-out group medians **{g['median_of_group_medians']:.1f}%**; p90 over all "
                     f"held-out rows **{g['p90']:.1f}%**; median over all held-out rows {g['overall_median']:.1f}%; "
                     f"max {g['max']:.1f}%.")
        out["lohso"] = "\n".join(lines)
    # issue 14's bounds ("Done when"): calibration set and leave-one-(hardware x stack)-out
    bounds = [
        f"* calibration: median of per-source medians {verdict(s['median_of_source_medians'], 6)}",
        f"* calibration: 90th percentile {verdict(o['p90'], 15)}",
        f"* calibration: max {verdict(o['max'], 30)}",
        f"* every row predicted: {s['used']} of {s['rows']} ({'met' if s['used'] == s['rows'] else '**not met**'})",
    ]
    if g:
        bounds += [f"* leave-one-(hardware x stack)-out: median of group medians "
                   f"{verdict(g['median_of_group_medians'], 10)}",
                   f"* leave-one-(hardware x stack)-out: 90th percentile {verdict(g['p90'], 25)}"]
    bounds.append(f"* leave-one-source-out (secondary): median of held-out source medians "
                  f"{c['median_of_source_medians']:.1f}%, median over all held-out rows {c['overall_median']:.1f}%")
    out["bounds"] = "\n".join(bounds)
    return out


def main(json_path: str, md_path: str) -> None:
    doc = json.loads(Path(json_path).read_text())
    text = Path(md_path).read_text()
    for name, table in tables(doc).items():
        pat = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
        if not pat.search(text):
            raise SystemExit(f"no markers for {name} in {md_path}")
        text = pat.sub(lambda m, t=table: m.group(1) + t + "\n" + m.group(2), text)
    Path(md_path).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
