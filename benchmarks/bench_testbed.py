"""Figures of docs/testbed.md: the testbed (4 nodes x 2 ranks at 1 Gbit/s) against the model.

Run as root: ``python benchmarks/bench_testbed.py [--sizes 4MiB,16MiB] [--iters 5]``. Prints, as JSON lines:

1. gloo all-reduce, all-gather, reduce-scatter, broadcast, all-to-all, contiguous layout: measured vs
   analytic vs simulated (``testbed check`` rows);
2. flat ring vs hierarchical all-reduce with ranks interleaved across nodes: measured and predicted factor;
3. the node-boundary cliff: a 2-rank all-reduce inside one node (1 node x 2 ranks) vs across two nodes
   (2 nodes x 1 rank), same bytes;
4. all-to-all with the uplink oversubscribed 2:1 and 4:1 vs a single leaf: measured and predicted slowdown.

Every testbed is taken down at the end (and on error or Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile

from tierwise.measure.bench import parse_sizes
from tierwise.testbed.check import predict_rows
from tierwise.testbed.run import bring_up, run_sweep, take_down
from tierwise.testbed.spec import parse_spec

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all")


def _print(kind: str, **data) -> None:
    print(json.dumps({"figure": kind, **data}), flush=True)


def _rows(folder, cases, layout, iters, repeats):
    """Median over ``repeats`` sweeps of each case's median (interleaved so load drifts hit all alike)."""
    runs = [run_sweep(folder, cases, layout=layout, iters=iters) for _ in range(repeats)]
    rows = []
    for i in range(len(cases)):
        values = [run[i]["measured_s"] for run in runs]
        rows.append({**runs[0][i], "measured_s": statistics.median(values), "repeats_s": values})
    return predict_rows(folder, rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4MiB,16MiB")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--link", default="1Gbit/s")
    ap.add_argument("--only", default="ops,hier,cliff,over")
    args = ap.parse_args()
    sizes = parse_sizes(args.sizes)
    only = args.only.split(",")
    name = "bench"
    with tempfile.TemporaryDirectory(prefix="twtb-bench-") as folder:
        try:
            spec = parse_spec(nodes=4, ranks_per_node=2, link=args.link, name=name)
            state = bring_up(spec, folder)
            _print("probes", **state["probes"])
            base_a2a = {}
            if "ops" in only or "over" in only:
                cases = [{"op": op, "algorithm": "gloo", "size_bytes": s} for s in sizes for op in OPS]
                for row in _rows(folder, cases, "contiguous", args.iters, args.repeats):
                    _print("ops", **row)
                    if row["op"] == "all-to-all":
                        base_a2a[row["size_bytes"]] = row
            if "hier" in only:
                cases = [{"op": "all-reduce", "algorithm": a, "size_bytes": s} for s in sizes
                         for a in ("ring", "hierarchical", "gloo")]
                rows = _rows(folder, cases, "interleaved", args.iters, args.repeats)
                for row in rows:
                    _print("hier", **row)
                for s in sizes:
                    ring = next(r for r in rows if r["size_bytes"] == s and r["algorithm"] == "ring")
                    hier = next(r for r in rows if r["size_bytes"] == s and r["algorithm"] == "hierarchical")
                    _print("hier-factor", size_bytes=s, measured=ring["measured_s"] / hier["measured_s"],
                           analytic=ring["analytic_s"] / hier["analytic_s"],
                           simulated=ring["simulated_s"] / hier["simulated_s"])
            if "over" in only:
                for over in (2.0, 4.0):
                    spec = parse_spec(nodes=4, ranks_per_node=2, link=args.link, oversubscription=over, name=name)
                    bring_up(spec, folder)
                    cases = [{"op": "all-to-all", "algorithm": "gloo", "size_bytes": s} for s in sizes]
                    for row in _rows(folder, cases, "contiguous", args.iters, args.repeats):
                        base = base_a2a[row["size_bytes"]]
                        _print("over", oversubscription=over, **row,
                               measured_factor=row["measured_s"] / base["measured_s"],
                               analytic_factor=row["analytic_s"] / base["analytic_s"],
                               simulated_factor=row["simulated_s"] / base["simulated_s"])
            if "cliff" in only:
                cliff_sizes = parse_sizes("64KiB:16MiB", 4.0)
                cases = [{"op": "all-reduce", "algorithm": "gloo", "size_bytes": s} for s in cliff_sizes]
                got = {}
                for where, nodes, rpn in (("inside", 1, 2), ("across", 2, 1)):
                    bring_up(parse_spec(nodes=nodes, ranks_per_node=rpn, link=args.link, name=name), folder)
                    got[where] = _rows(folder, cases, "contiguous", args.iters, args.repeats)
                for a, b in zip(got["inside"], got["across"], strict=True):
                    _print("cliff", size_bytes=a["size_bytes"], inside_s=a["measured_s"], across_s=b["measured_s"],
                           measured_ratio=b["measured_s"] / a["measured_s"],
                           inside_analytic_s=a["analytic_s"], across_analytic_s=b["analytic_s"],
                           analytic_ratio=b["analytic_s"] / a["analytic_s"])
        finally:
            take_down(name)


if __name__ == "__main__":
    main()
