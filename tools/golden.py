"""Golden outputs: record what the current code answers, and compare later code against it.

    python tools/golden.py record [--only NAME ...] [-j N]
    python tools/golden.py compare [--only NAME ...] [-j N] [--limit N] [--rtol 1e-3]
    python tools/golden.py list

Each case is a list of ``tierwise`` arguments run with ``--json`` in a fresh ``python -m tierwise`` subprocess
(``PYTHONPATH`` points at this checkout's ``src/``; ``TIERWISE_*`` variables are removed, so the shipped
parameters are used), from the repository root. ``record`` writes ``tests/golden/<case>.json`` holding the
case's arguments and its JSON document, with the keys that vary from run to run removed (VOLATILE_KEYS,
VOLATILE_PATHS). ``compare`` runs the same cases and walks the recorded and the current documents in
parallel:

* a number whose relative difference exceeds ``--rtol`` (0.1%) and whose absolute difference exceeds
  ``ABS_TOL`` (values at zero) is a failure;
* a string, bool or null that changed is a failure, except text whose words are unchanged and whose numbers
  agree within the tolerance or the printed rounding (reported as info);
* a key or list item that disappeared, or a change of type, is a failure; a key that appeared is info (the
  refactor of issue 27 adds keys such as ``breakdown.forward_layers_s``).

``compare`` exits 1 when any case fails, 2 on a usage error. docs/golden.md says when to re-record.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden"
RTOL = 1e-3
ABS_TOL = 1e-12
TIMEOUT_S = 600

# Keys dropped wherever they occur: they describe the run, not the answer. Today only ``search_s``
# (serve-plan's wall time of its search, serve/api.py) occurs; the others are listed so that a later version
# stamp, date or timing does not fail the comparison.
VOLATILE_KEYS = frozenset({"search_s", "version", "tierwise_version", "timestamp", "generated", "generated_at", "created",
                           "elapsed_s", "wall_s", "wall_time_s", "runtime_s", "duration_s", "hostname",
                           "cwd", "path"})

# Per-case paths (dotted, ``[*]`` for any list index, fnmatch patterns) dropped before recording and
# comparing, each with its reason. Empty today: every case is deterministic (record twice, compare twice).
VOLATILE_PATHS: dict[str, tuple[tuple[str, str], ...]] = {}


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    note: str = ""


def _case(name: str, *args: str, note: str = "") -> Case:
    return Case(name, (*args, "--json"), note)


CASES: tuple[Case, ...] = (
    # the estimator against every published row (training, serving)
    _case("validate", "validate"),
    _case("validate-serving", "validate", "--serving"),
    # every example scenario file
    *(_case(f"estimate-{p.stem}", "estimate", f"examples/{p.name}")
      for p in sorted((ROOT / "examples").glob("*.yaml"))),
    # the planner's reference cases (README, docs/planner.md's tables, tests/planner)
    _case("plan-llama3.1-405b-dgx-h100-16384", "plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100",
          "--gpus", "16384", "--global-batch", "2048", "--seq", "8192"),
    _case("plan-llama3.1-405b-dgx-h100-16384-bf16", "plan", "--model", "llama3.1-405b", "--cluster",
          "dgx-h100", "--gpus", "16384", "--global-batch", "2048", "--seq", "8192", "--precision", "bf16"),
    _case("plan-llama3.1-70b-dgx-h100-1024", "plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100",
          "--gpus", "1024", "--global-batch", "1024", "--seq", "8192"),
    _case("plan-llama3.1-70b-gb200-nvl72-1152-goodput", "plan", "--model", "llama3.1-70b", "--cluster",
          "gb200-nvl72", "--gpus", "1152", "--goodput"),
    _case("plan-qwen3-235b-a22b-gb200-nvl72-576", "plan", "--model", "qwen3-235b-a22b", "--cluster",
          "gb200-nvl72", "--gpus", "576", "--global-batch", "1152", "--seq", "4096"),
    _case("plan-qwen3-235b-a22b-dgx-h100-512", "plan", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100",
          "--gpus", "512", "--global-batch", "1024", "--seq", "4096"),
    _case("plan-mixtral-8x7b-gb200-nvl72-144", "plan", "--model", "mixtral-8x7b", "--cluster", "gb200-nvl72",
          "--gpus", "144", "--global-batch", "288", "--seq", "4096"),
    _case("scale-llama3.1-70b-dgx-h100", "scale", "--model", "llama3.1-70b", "--cluster", "dgx-h100",
          "--gpus", "8:16384"),
    # serving
    _case("serve-llama3.1-70b-dgx-h100-pd", "serve", "--model", "llama3.1-70b", "--cluster", "dgx-h100",
          "--prefill-gpus", "4", "--decode-gpus", "4", "--input-len", "2000", "--output-len", "256"),
    _case("serve-llama3.1-8b-dgx-h100-1gpu", "serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100",
          "--gpus", "1", "--input-len", "1024", "--output-len", "128"),
    _case("serve-qwen3-235b-a22b-gb200-nvl72", "serve", "--model", "qwen3-235b-a22b", "--cluster",
          "gb200-nvl72", "--gpus", "8", "--tp", "8", "--ep", "8", "--precision", "fp8", "--input-len", "2000",
          "--output-len", "256"),
    _case("serve-deepseek-v3-gb200-nvl72-pd", "serve", "--model", "deepseek-v3", "--cluster", "gb200-nvl72",
          "--prefill-gpus", "8", "--decode-gpus", "16", "--decode-tp", "16", "--decode-ep", "16",
          "--precision", "fp8", "--input-len", "4000", "--output-len", "1000"),
    _case("serve-plan-llama3.1-70b-gb200-nvl72-interactive", "serve-plan", "--model", "llama3.1-70b",
          "--cluster", "gb200-nvl72", "--gpus", "72", "--scenario", "interactive"),
    _case("serve-plan-deepseek-v3-gb200-nvl72", "serve-plan", "--model", "deepseek-v3", "--cluster",
          "gb200-nvl72", "--gpus", "72", "--precision", "fp8"),
    # failures, designs, trend
    _case("goodput-llama3.1-405b-dgx-h100-16384", "goodput", "--model", "llama3.1-405b", "--cluster",
          "dgx-h100", "--gpus", "16384", "--runs", "50", "--seed", "0"),
    _case("design-llama3.1-405b-8192", "design", "--model", "llama3.1-405b", "--gpus", "8192",
          "--tokens", "15e12"),
    _case("trend-llama3.1-405b-8192", "trend", "--model", "llama3.1-405b", "--gpus", "8192"),
    # collectives, fabrics
    _case("simulate-all-reduce-fat-tree-1024", "simulate", "all-reduce", "--topology", "fat-tree",
          "--gpus", "1024", "--radix", "64", "--size", "1GB"),
    _case("collective-all-reduce-dgx-h100-32", "collective", "all-reduce", "--size", "1GiB", "--ranks", "32",
          "--cluster", "dgx-h100"),
    _case("tiers-dgx-h100", "tiers", "dgx-h100"),
    _case("topo-fat-tree-16384", "topo", "fat-tree", "--gpus", "16384", "--radix", "64", "--tiers", "3"),
    _case("topo-rail-only-4096", "topo", "rail-only", "--gpus", "4096", "--radix", "64", "--cluster", "dgx-h100"),
    # commands named in the open issues' "Done when" (28-34) that answer today
    _case("tiers-hgx-h100-roce", "tiers", "hgx-h100-roce", note="issue 34"),
    _case("design-mixtral-8x22b-1024", "design", "--model", "mixtral-8x22b", "--gpus", "1024", note="issue 34"),
    _case("topo-nvl72-1152", "topo", "nvl72", "--gpus", "1152", note="issue 33"),
    _case("topo-nvl72-72", "topo", "nvl72", "--gpus", "72", note="issue 33"),
    _case("plan-llama3.1-405b-hgx-h100-roce-98304", "plan", "--model", "llama3.1-405b", "--cluster",
          "hgx-h100-roce", "--gpus", "98304", "--global-batch", "2048", "--seq", "8192",
          note="issue 28 (answers today on RoCE, radix 128; dgx-h100 and gb200-nvl72 at this size do not)"),
    _case("serve-plan-deepseek-v3-dgx-h100-64", "serve-plan", "--model", "deepseek-v3", "--cluster", "dgx-h100",
          "--gpus", "64", "--precision", "fp8", note="issue 30 (EP over IB on 8-GPU nodes: wide EP with attention data-parallel, EP 16 across two nodes)"),
)

# the subset tests/test_golden.py compares (a few seconds)
FAST = ("validate", "validate-serving", "estimate-llama3.1-70b-dgx-h100", "estimate-mixtral-8x7b-gb200",
        "serve-llama3.1-70b-dgx-h100-pd")


# ---------------------------------------------------------------------------------------------- running


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERWISE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.update(PYTHONHASHSEED="0", COLUMNS="200", NO_COLOR="1")
    return env


@dataclass
class Run:
    case: Case
    document: object = None
    error: str = ""
    seconds: float = 0.0


def run_case(case: Case) -> Run:
    """Run one case in a fresh interpreter; its JSON document with the volatile keys removed."""
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "tierwise", *case.args], cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return Run(case, error=f"timed out after {TIMEOUT_S} s", seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Run(case, error=f"exit {proc.returncode}: {' | '.join(tail)}", seconds=seconds)
    try:
        document = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        return Run(case, error=f"output is not JSON ({exc})", seconds=seconds)
    return Run(case, strip_volatile(document, case.name), seconds=seconds)


def run_cases(cases: list[Case], jobs: int) -> list[Run]:
    if jobs <= 1:
        return [run_case(c) for c in cases]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run_case, cases))


def _matches(path: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def strip_volatile(document, case_name: str, path: str = ""):
    """``document`` without VOLATILE_KEYS anywhere and without the case's VOLATILE_PATHS."""
    patterns = [p for p, _ in VOLATILE_PATHS.get(case_name, ())]
    if isinstance(document, dict):
        out = {}
        for key, value in document.items():
            sub = f"{path}.{key}" if path else str(key)
            if key in VOLATILE_KEYS or _matches(sub, patterns):
                continue
            out[key] = strip_volatile(value, case_name, sub)
        return out
    if isinstance(document, list):
        return [strip_volatile(v, case_name, f"{path}[*]") for v in document]
    if isinstance(document, str) and str(ROOT) in document:
        # a path inside the checkout (validate's dataset) names the checkout, not the figures
        return document.replace(str(ROOT), "<root>")
    return document


def golden_path(case: Case) -> Path:
    return GOLDEN_DIR / f"{case.name}.json"


# -------------------------------------------------------------------------------------------- comparing


@dataclass
class Diff:
    path: str
    kind: str  # number, text, type, removed, length (failures); added, rounding (info)
    golden: object = None
    current: object = None

    def line(self) -> str:
        if self.kind == "number":
            rel = abs(self.current - self.golden) / max(abs(self.golden), abs(self.current))
            return f"{self.path}: {self.golden!r} -> {self.current!r} ({rel:.3%} rel)"
        if self.kind == "added":
            return f"{self.path}: added"
        if self.kind == "removed":
            return f"{self.path}: removed (was {_short(self.golden)})"
        return f"{self.path}: {_short(self.golden)} -> {_short(self.current)}"


def _short(value, width: int = 100) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Result:
    case: Case
    status: str = "ok"  # ok, FAIL, ERROR, MISSING
    failures: list[Diff] = field(default_factory=list)
    info: list[Diff] = field(default_factory=list)
    leaves: int = 0
    seconds: float = 0.0
    error: str = ""


_INFO_KINDS = {"added", "rounding"}


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def numbers_agree(a: float, b: float, rtol: float = RTOL, atol: float = ABS_TOL) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    diff = abs(a - b)
    return diff <= atol or diff <= rtol * max(abs(a), abs(b))


_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _text_numbers(text: str) -> tuple[str, list[tuple[float, float]]]:
    """The text with each number replaced by '#', and each number with half a unit of its last digit."""
    numbers = []
    for m in _NUMBER.finditer(text):
        token = m.group().replace(",", "")
        mantissa, _, exponent = token.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        half_unit = 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))
        try:
            numbers.append((float(token), half_unit))
        except ValueError:
            return text, []
    return _NUMBER.sub("#", text), numbers


def texts_agree(a: str, b: str, rtol: float) -> bool:
    """Same words, and each number within rtol or within the rounding of either printed figure."""
    skel_a, nums_a = _text_numbers(a)
    skel_b, nums_b = _text_numbers(b)
    if skel_a != skel_b or len(nums_a) != len(nums_b):
        return False
    pairs = zip(nums_a, nums_b, strict=True)
    return all(abs(x - y) <= (hx + hy) * (1 + 1e-9) or numbers_agree(x, y, rtol) for (x, hx), (y, hy) in pairs)


def compare_trees(golden, current, rtol: float = RTOL, path: str = "") -> tuple[list[Diff], list[Diff], int]:
    """(failures, info, numeric leaves compared) between two JSON documents."""
    failures: list[Diff] = []
    info: list[Diff] = []
    count = 0
    stack = [(path, golden, current)]
    while stack:
        where, g, c = stack.pop()
        if isinstance(g, dict) and isinstance(c, dict):
            for key in g:
                sub = f"{where}.{key}" if where else str(key)
                if key in c:
                    stack.append((sub, g[key], c[key]))
                else:
                    failures.append(Diff(sub, "removed", g[key]))
            info += [Diff(f"{where}.{k}" if where else str(k), "added", None, c[k]) for k in c if k not in g]
        elif isinstance(g, list) and isinstance(c, list):
            if len(g) != len(c):
                failures.append(Diff(f"{where} (length)", "length", len(g), len(c)))
            stack += [(f"{where}[{i}]", x, y) for i, (x, y) in enumerate(zip(g, c, strict=False))]
        elif _is_number(g) and _is_number(c):
            count += 1
            if not numbers_agree(float(g), float(c), rtol):
                failures.append(Diff(where, "number", g, c))
        elif type(g) is not type(c):
            failures.append(Diff(where, "type", g, c))
        elif g != c:
            if isinstance(g, str) and texts_agree(g, c, rtol):
                info.append(Diff(where, "rounding", g, c))
            else:
                failures.append(Diff(where, "text", g, c))
    failures.sort(key=lambda d: d.path)
    info.sort(key=lambda d: d.path)
    return failures, info, count


def compare_case(run: Run, rtol: float = RTOL) -> Result:
    result = Result(run.case, seconds=run.seconds)
    if run.error:
        result.status, result.error = "ERROR", run.error
        return result
    file = golden_path(run.case)
    if not file.exists():
        result.status, result.error = "MISSING", f"no {file.relative_to(ROOT)}: run `record --only {run.case.name}`"
        return result
    recorded = json.loads(file.read_text())
    if recorded.get("args") != list(run.case.args):
        result.status = "ERROR"
        result.error = f"the case's arguments changed since it was recorded ({recorded.get('args')}): re-record it"
        return result
    result.failures, result.info, result.leaves = compare_trees(recorded["output"], run.document, rtol)
    if result.failures:
        result.status = "FAIL"
    return result


def compare(names: list[str] | None = None, jobs: int = 1, rtol: float = RTOL) -> list[Result]:
    """Run the cases (all, or those named) and compare each with its golden file."""
    return [compare_case(r, rtol) for r in run_cases(select(names), jobs)]


# ----------------------------------------------------------------------------------------------- CLI


def select(names: list[str] | None) -> list[Case]:
    if not names:
        return list(CASES)
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)} (see `python tools/golden.py list`)")
    return [by_name[n] for n in names]


def _record(args) -> int:
    cases = select(args.only)
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    runs = run_cases(cases, args.jobs)
    failed = [r for r in runs if r.error]
    for run in runs:
        if run.error:
            print(f"ERROR  {run.case.name}: {run.error}")
            continue
        body = {"case": run.case.name, "args": list(run.case.args), "output": run.document}
        golden_path(run.case).write_text(json.dumps(body, indent=1, allow_nan=True) + "\n")
        size = golden_path(run.case).stat().st_size
        print(f"wrote  {golden_path(run.case).relative_to(ROOT)}  ({size / 1024:.0f} KiB, {run.seconds:.1f} s)")
    if not args.only:
        known = {golden_path(c) for c in CASES}
        for stale in sorted(set(GOLDEN_DIR.glob("*.json")) - known):
            stale.unlink()
            print(f"removed {stale.relative_to(ROOT)} (no longer a case)")
    print(f"{len(runs) - len(failed)} recorded, {len(failed)} failed, {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


def _compare(args) -> int:
    start = time.perf_counter()
    results = compare(args.only, args.jobs, args.rtol)
    for res in results:
        if res.error:
            print(f"\n{res.status} {res.case.name}: {res.error}")
        if res.failures:
            print(f"\nFAIL {res.case.name}: {len(res.failures)} difference(s) (numbers beyond {args.rtol:.2%}, "
                  "changed text, removed keys or items)")
            shown = res.failures if args.limit <= 0 else res.failures[: args.limit]
            for diff in shown:
                print(f"  {diff.kind:8s} {diff.line()}")
            if len(shown) < len(res.failures):
                print(f"  ... {len(res.failures) - len(shown)} more (--limit 0 shows all)")
        if res.info and args.info:
            print(f"\ninfo {res.case.name}: {len(res.info)} added key(s) or rounding-only text change(s)")
            for diff in res.info[: args.limit if args.limit > 0 else None]:
                print(f"  {diff.kind:8s} {diff.line()}")
    width = max(len(r.case.name) for r in results)
    print(f"\n{'case':{width}s}  status   numbers  failures  info  seconds")
    for res in results:
        print(f"{res.case.name:{width}s}  {res.status:7s}  {res.leaves:7d}  {len(res.failures):8d}  "
              f"{len(res.info):4d}  {res.seconds:7.1f}")
    bad = [r for r in results if r.status != "ok"]
    print(f"\n{len(results) - len(bad)}/{len(results)} cases agree within {args.rtol:.2%}; "
          f"{time.perf_counter() - start:.1f} s")
    if any(r.info for r in results) and not args.info:
        print("(added keys / rounding-only text changes exist: --info lists them)")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="golden.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_ in (("record", "run the cases and write tests/golden/<case>.json"),
                        ("compare", "run the cases and compare with tests/golden/")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--only", action="append", metavar="NAME", help="this case only (repeatable)")
        p.add_argument("-j", "--jobs", type=int, default=1, help="cases run at once (default 1)")
        if name == "compare":
            p.add_argument("--rtol", type=float, default=RTOL, help="relative tolerance (default 1e-3)")
            p.add_argument("--limit", type=int, default=0, help="differences shown per case (0: all)")
            p.add_argument("--info", action="store_true", help="also list added keys and rounding-only text")
    sub.add_parser("list", help="list the cases")
    args = parser.parse_args(argv)
    if args.command == "list":
        for case in CASES:
            print(f"{case.name}: tierwise {' '.join(case.args)}" + (f"   ({case.note})" if case.note else ""))
        return 0
    return _record(args) if args.command == "record" else _compare(args)


if __name__ == "__main__":
    sys.exit(main())
