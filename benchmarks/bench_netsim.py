"""Simulator scale benchmark (issues 5 and 19): prints wall seconds and peak memory; not a timed test.

Run on one core: ``OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_netsim.py [--quick] [--a2a-only]``.

All-to-all (issue 19): ``tierwise simulate all-to-all ... --json`` as a child process (start-up, fabric
build, simulation and JSON output together), on a 3-tier fat tree (radix 64; radix 128 for 131,072 GPUs,
beyond radix 64's 65,536) and a radix-64 dragonfly, adaptive and ECMP, at 1,024 / 4,096 / 16,384 /
131,072 GPUs: median wall time of ``--repeats`` runs (one run at 131,072) and the child's peak RSS
(``os.wait4`` rusage), with the child's CPU seconds (user + system), which the shared machine's load
inflates less than the wall time. Targets: 16,384 GPUs <= 10 s and <= 4 GiB, 131,072 GPUs <= 120 s. The load average
is printed before and after, since the dev machine is shared.

Cases (targets from the issue):
  * hierarchical all-reduce, 16,384 GPUs, 3-tier radix-64 fat tree   (<= 10 s)
  * hierarchical all-reduce, 131,072 GPUs, 3-tier radix-128 fat tree (<= 120 s)
  * all-to-all among 1,024 GPUs                                      (<= 10 s)
  * peak memory of each                                              (<= 4 GiB)
Times are the median of ``--repeats`` runs (build + simulate); memory is tracemalloc's peak in one extra
run (numpy reports its buffers to tracemalloc) and the process's max RSS at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import tracemalloc

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tierwise.netsim import simulate  # noqa: E402
from tierwise.topology import TopologySpec, build_fabric  # noqa: E402

CASES = [
    ("hier all-reduce 16384 GPUs r64 3-tier adaptive", dict(gpus=16384, radix=64, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="adaptive"), 10.0),
    ("hier all-reduce 16384 GPUs r64 3-tier ecmp", dict(gpus=16384, radix=64, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="ecmp"), 10.0),
    ("hier all-reduce 131072 GPUs r128 3-tier adaptive", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="adaptive"), 120.0),
    ("hier all-reduce 131072 GPUs r128 3-tier ecmp", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="ecmp"), 120.0),
    ("ring all-reduce 131072 GPUs r128 3-tier adaptive", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="ring", routing="adaptive"), 120.0),
    ("all-to-all 1024 GPUs r64 3-tier adaptive per flow", dict(gpus=1024, radix=64, tiers=3),
     dict(kind="all-to-all", algorithm="direct", routing="adaptive", per_flow=True), 10.0),
    ("all-to-all 1024 GPUs r64 3-tier ecmp per flow", dict(gpus=1024, radix=64, tiers=3),
     dict(kind="all-to-all", algorithm="direct", routing="ecmp", per_flow=True), 10.0),
]


def run(topo: dict, sim: dict) -> dict:
    fab = build_fabric(TopologySpec(family="fat-tree", **topo))
    return simulate(fab, sim["kind"], 1e9, algorithm=sim["algorithm"], routing=sim["routing"],
                    per_flow=sim.get("per_flow", False))


A2A_SIZES = (1024, 4096, 16384, 131072)


def _cli_run(args: list[str]) -> tuple[float, float, dict, float]:
    """(wall s, peak RSS MiB, JSON, CPU s) of one ``python -m tierwise ...`` child process."""
    import json
    import subprocess
    import sys

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tierwise", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {err.decode()[-400:]}")
    return wall, usage.ru_maxrss / 2**10, json.loads(out), usage.ru_utime + usage.ru_stime


def all_to_all(repeats: int, quick: bool) -> None:
    print(f"load average before: {os.getloadavg()}")
    print(f"{'all-to-all case':44s} {'median s':>9s} {'CPU s':>6s} {'runs':>5s} {'peak RSS MiB':>12s} "
          f"{'sim/analytic':>12s} {'method':>13s} {'hops':>6s}")
    for gpus in A2A_SIZES:
        if quick and gpus > 20000:
            continue
        for family in ("fat-tree", "dragonfly"):
            radix = 128 if (family == "fat-tree" and gpus > 65536) else 64
            for routing in ("adaptive", "ecmp"):
                args = ["simulate", "all-to-all", "--topology", family, "--gpus", str(gpus), "--radix", str(radix),
                        "--routing", routing, "--json"]
                runs = [_cli_run(args) for _ in range(repeats if gpus <= 20000 else 1)]
                r = runs[-1][2]
                name = f"{family} r{radix} {gpus} GPUs {routing}"
                print(f"{name:44s} {statistics.median(x[0] for x in runs):9.2f} "
                      f"{statistics.median(x[3] for x in runs):6.2f} {len(runs):5d} "
                      f"{max(x[1] for x in runs):12.0f} {r['time_s'] / r['analytic_time_s']:12.4f} "
                      f"{r['method']:>13s} {r.get('hop_choices', ''):>6s}", flush=True)
    for gpus, ranks in ((4096, 2048), (16384, 8192)):  # UGAL's diverted pairs on path classes (issue 34)
        args = ["simulate", "all-to-all", "--topology", "dragonfly", "--gpus", str(gpus), "--radix", "64",
                "--ranks", str(ranks), "--routing", "adaptive", "--json"]
        runs = [_cli_run(args) for _ in range(repeats)]
        r = runs[-1][2]
        name = f"dragonfly r64 {ranks} of {gpus} GPUs adaptive (UGAL)"
        print(f"{name:44s} {statistics.median(x[0] for x in runs):9.2f} "
              f"{statistics.median(x[3] for x in runs):6.2f} {len(runs):5d} "
              f"{max(x[1] for x in runs):12.0f} {r['time_s'] / r['analytic_time_s']:12.4f} "
              f"{r['method']:>13s} {r.get('hop_choices', ''):>6s}", flush=True)
    print(f"load average after: {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="skip the 131,072-GPU cases")
    ap.add_argument("--a2a-only", action="store_true", help="only the all-to-all CLI cases (issue 19)")
    args = ap.parse_args()
    all_to_all(args.repeats, args.quick)
    if args.a2a_only:
        return
    print(f"{'case':52s} {'median s':>9s} {'target s':>8s} {'peak MiB':>9s} {'sim/analytic':>12s}")
    for name, topo, sim, target in CASES:
        if args.quick and topo["gpus"] > 20000:
            continue
        times = []
        for _ in range(args.repeats if topo["gpus"] <= 20000 else 1):
            t0 = time.perf_counter()
            r = run(topo, sim)
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        run(topo, sim)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ratio = r["time_s"] / r["analytic_time_s"]
        print(f"{name:52s} {statistics.median(times):9.2f} {target:8.0f} {peak / 2**20:9.0f} {ratio:12.4f}",
              flush=True)
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
