"""The model's parameters are arguments (issue 27, "hidden inputs"; docs/architecture.md, "Parameters are
arguments"): only the public entry points (the functions ``tierwise.__all__`` exports, the command
implementations the CLI calls, a few documented test and API helpers) resolve ``parameters=None`` to
:func:`tierwise.specs.parameters.load_parameters`, once, at the top; everything below takes the record it is
handed. Every call of ``load_parameters`` in src/tierwise outside cli/ and specs/parameters.py, and every
argument-less call of ``compute_params`` / ``serving_parameters`` (shorthands for it), is read with
:mod:`ast`; one in a function not listed here fails: pass the parameters down instead.

Below the entry points every call passes the record on: a call inside src/tierwise (outside cli/) to a
function that takes ``parameters`` must pass it (by keyword, or in its position), unless the caller is an
entry point (which resolves None itself) or is listed in :data:`OMITS_PARAMETERS` with its reason.

The environment variable ``TIERWISE_PARAMETERS`` is read in specs/parameters.py alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src" / "tierwise"

ENTRY_POINTS = {
    # (module path under src/tierwise, function): the entry points that may resolve None to load_parameters()
    ("collectives/model.py", "collective_cost"),  # tierwise.collective_cost
    ("estimate/step.py", "estimate"),  # tierwise.estimate_step
    ("estimate/scenario.py", "estimate_scenario"),  # estimate's command
    ("estimate/compute.py", "compute_params"),  # compute_params(None): the shorthand itself
    ("specs/cluster.py", "load_cluster"),  # tierwise.load_cluster
    ("specs/cluster.py", "cluster_from_mapping"),  # a cluster mapping's loader (scenarios, --link-bandwidth)
    ("planner/branch_and_bound.py", "search"),  # tierwise.search
    ("planner/branch_and_bound.py", "brute_force"),  # the exhaustive reference the tests compare search with
    ("planner/capacity.py", "min_gpus_to_fit"),  # plan's "nothing fits" answer, also called on its own
    ("planner/answer.py", "answer_plans"),  # plan's command
    ("planner/answer.py", "answer_scale"),  # scale's command (answer_plans gets its record per count)
    ("design/designs.py", "compare_designs"),  # design's command
    ("design/trend.py", "generation_trend"),  # design --trend
    ("design/domain.py", "domain_sweep"),  # design --domain-sweep
    ("design/power.py", "power_capped"),  # design --power
    ("design/bandwidth.py", "job_plan"),  # bandwidth's plan (the planner's best when not given)
    ("design/bandwidth.py", "inverse_bandwidth"),  # bandwidth's command
    ("estimate/scenario.py", "safe_estimate"),  # estimate with several scenario files
    ("sweep/run.py", "run_point"),  # one sweep point in its worker process (the kind's run gets the record)
    ("sweep/kinds.py", "_check_models_clusters"),  # a study's check before any point runs (clusters load)
    ("goodput/model.py", "goodput"),  # tierwise.estimate_goodput
    ("goodput/ranking.py", "goodput_ranking"),  # plan --goodput
    ("goodput/ranking.py", "goodput_scaling"),  # scale --goodput
    ("serve/params.py", "serving_parameters"),  # the serving set's record, carrying the parameters
    ("serve/api.py", "_resolve"),  # serve's command: serving_parameters() once per configuration
    ("serve/validate.py", "serving_validation_document"),  # validate --serving
    ("netsim/collective_report.py", "collective_report"),  # collective's command
    ("netsim/compare.py", "simulate_ring_notes"),  # simulate's command
    ("netsim/emit.py", "write_cluster"),  # simulate --emit-cluster
    ("validate/__init__.py", "validation_document"),  # validate's command (--fit-out: the fitted file's)
    ("validate/fit.py", "fit_parameters"),  # the validation API
    ("validate/fit.py", "cross_validate"),  # the validation API
    ("validate/fit.py", "cross_validate_groups"),  # the validation API
    ("validate/run.py", "validate"),  # the validation API
    ("validate/run.py", "load_cases"),  # the validation API
    ("validate/mapping.py", "case_from_row"),  # the validation API
    ("measure/compute.py", "finish_profile"),  # measure compute's command
    ("measure/hf_step.py", "prepare_hf_step"),  # measure compute --hf-step, before anything is measured
}

SHORTHANDS = {"compute_params", "serving_parameters"}
"""Called with no argument they load the parameters too."""


def _calls() -> set[tuple[str, str]]:
    """(module, enclosing function) of every call that loads the parameters, outside cli/ and parameters.py."""
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("cli/") or rel == "specs/parameters.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name == "load_parameters" or (name in SHORTHANDS and not node.args and not node.keywords):
                    found.add((rel, func.name))
    return found


OMITS_PARAMETERS = {
    # (module, calling function, called function): calls that still leave ``parameters`` to the callee, and why
    ("serve/api.py", "_resolve", "serving_parameters"),  # serve's entry point: the serving record, once
    ("serve/validate.py", "serving_validation_document", "serving_parameters"),  # validate --serving's entry
    ("netsim/emit.py", "write_cluster", "load_cluster"),  # simulate --emit-cluster's entry point
    ("measure/calibrate.py", "_read_inputs", "load_cluster"),  # measure/testbed commands: not threaded yet
    ("measure/compute.py", "profile_target", "cluster_from_mapping"),
    ("testbed/check.py", "predict_rows", "load_cluster"),
    ("testbed/run.py", "bring_up", "cluster_from_mapping"),  # only checks that the written mapping loads
}


def _module(rel: str) -> str:
    name = "tierwise." + rel[:-3].replace("/", ".")
    return name.removesuffix(".__init__")


def _takers(trees: dict[str, ast.Module]) -> dict[tuple[str, str], int | None]:
    """(module, function) of every module-level function with a ``parameters`` argument -> its position
    among the positional arguments (None: keyword-only)."""
    out: dict[tuple[str, str], int | None] = {}
    for rel, tree in trees.items():
        for f in tree.body:
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                pos = [a.arg for a in f.args.posonlyargs + f.args.args]
                if "parameters" in pos:
                    out[(_module(rel), f.name)] = pos.index("parameters")
                elif "parameters" in [a.arg for a in f.args.kwonlyargs]:
                    out[(_module(rel), f.name)] = None
    return out


def _names(rel: str, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """A module's names of functions -> (defining or importing module, name): its own and its imports."""
    mod = _module(rel)
    pkg = mod if rel.endswith("__init__.py") else mod.rsplit(".", 1)[0]
    names = {f.name: (mod, f.name) for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.update({a.asname or a.name: (base, a.name) for a in node.names})
    return names


def _omissions() -> set[tuple[str, str, str]]:
    """(module, calling function, called function) of every call outside cli/ that passes no ``parameters`` to
    a function that takes them (re-exports followed; ``**kwargs`` counts as passing them)."""
    trees = {p.relative_to(SRC).as_posix(): ast.parse(p.read_text(), filename=str(p)) for p in sorted(SRC.rglob("*.py"))}
    takers = _takers(trees)
    names = {_module(rel): _names(rel, tree) for rel, tree in trees.items()}

    def final(key):
        for _ in range(5):  # a name re-exported by a package (tierwise.planner.search) is followed to its def
            if key is None or key in takers or key[0] not in names or names[key[0]].get(key[1], key) == key:
                break
            key = names[key[0]][key[1]]
        return key

    found = set()
    for rel, tree in trees.items():
        if rel.startswith("cli/"):
            continue
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                key = final(names[_module(rel)].get(node.func.id))
                if key not in takers or any(k.arg in ("parameters", None) for k in node.keywords):
                    continue
                pos = takers[key]
                if pos is not None and (len(node.args) > pos or any(isinstance(a, ast.Starred) for a in node.args)):
                    continue
                found.add((rel, func.name, key[1]))
    return found


def test_calls_below_the_entry_points_pass_the_parameters():
    """The record is handed down, not re-resolved: no call omits ``parameters`` to a function that takes them,
    except in an entry point (it resolved None at its top) or a call listed with its reason."""
    missing = sorted(o for o in _omissions() - OMITS_PARAMETERS if o[:2] not in ENTRY_POINTS)
    assert not missing, (f"{missing}: pass parameters= to these calls (from the caller's own argument; "
                         "docs/architecture.md, \"Parameters are arguments\")")


def test_the_omissions_list_stays_honest():
    stale = sorted(OMITS_PARAMETERS - _omissions())
    assert not stale, f"{stale} pass the parameters now; remove them from OMITS_PARAMETERS"


def test_the_scan_sees_an_omission(tmp_path, monkeypatch):
    """The scan itself can fail: a module calling estimate() without parameters is reported."""
    import shutil
    import sys

    copy = tmp_path / "tierwise"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "planner" / "probe_omission.py").write_text(
        "from tierwise.estimate.step import estimate\n\n\ndef helper(m, c, b):\n    return estimate(m, c, b)\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", copy)
    assert ("planner/probe_omission.py", "helper", "estimate") in _omissions()


def test_only_entry_points_load_the_parameters():
    extra = sorted(_calls() - ENTRY_POINTS)
    assert not extra, (f"{extra}: internal functions take the Parameters as an argument; pass them down from "
                       "the entry point instead of calling load_parameters() (docs/architecture.md)")


def test_every_listed_entry_point_still_loads_them():
    """The list stays honest: an entry point that no longer loads the parameters leaves it."""
    stale = sorted(ENTRY_POINTS - _calls())
    assert not stale, f"{stale} no longer call load_parameters(); remove them from ENTRY_POINTS"


def test_the_environment_variable_is_read_in_one_place():
    readers = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if "environ" in text and ("PARAMETERS_ENV" in text or "TIERWISE_PARAMETERS" in text):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Attribute) and node.attr == "environ":
                    readers.append(path.relative_to(SRC).as_posix())
                    break
    assert readers == ["specs/parameters.py"], readers


def test_no_override_stack_and_no_source_keyed_cache():
    import tierwise.specs.parameters as p

    assert not hasattr(p, "using_parameters") and not hasattr(p, "parameters_source")


def test_parameters_passed_explicitly_price_the_figures(tmp_path, monkeypatch):
    """A record given to the entry points prices every figure (no environment variable involved), and the
    communication caches keep records with different collectives apart (Parameters.fingerprint)."""
    from tierwise.collectives.model import collective_cost
    from tierwise.estimate.step import estimate
    from tierwise.hierarchy import group_span
    from tierwise.pricing.comm import price_per_token_records
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model
    from tierwise.specs.parameters import PARAMETERS_ENV, load_parameters, parameters_file
    from tierwise.specs.plan import PlanBatch
    from tierwise.specs.plan_mapping import plan_from_mapping
    from tierwise.workload.traffic import Traffic

    monkeypatch.delenv(PARAMETERS_ENV, raising=False)
    shipped = load_parameters()
    f = tmp_path / "p.yaml"
    f.write_text("collectives:\n  link_efficiency:\n    scale_up: 0.4\n    scale_out: 0.4\n"
                 "compute:\n  torch_op_overhead: 1.0e-3\n")
    slow = parameters_file(f)
    assert slow.fingerprint != shipped.fingerprint and load_parameters() is shipped

    cluster, model = load_cluster("dgx-h100"), load_model("llama3.1-8b")
    span = group_span(cluster, 8, 1)
    fast_t = float(collective_cost("all-gather", 2**30, span, cluster).time_s)  # a ring: the link's share
    slow_t = float(collective_cost("all-gather", 2**30, span, cluster, parameters=slow).time_s)
    assert slow_t > 1.5 * fast_t

    plans = PlanBatch.from_plans([plan_from_mapping({"tp": 8, "global_batch_size": 64, "seq_length": 4096},
                                                    num_gpus=64)])
    base = estimate(model, cluster, plans)
    other = estimate(model, cluster, plans, parameters=slow)
    assert float(other.step_time_s[0]) > float(base.step_time_s[0]) and base.parameters is shipped

    tokens = np.array([2e5, 1e6])  # bandwidth-bound sizes
    rec = Traffic(axis="tp", kind="all-gather", bytes=tokens * 16384.0, size=np.full(2, 8), stride=np.ones(2, int),
                  counts={"forward": np.ones(2), "backward": 0.0, "recompute": 0.0}, per="layer")
    a = price_per_token_records([rec], cluster, tokens, parameters=shipped)
    b = price_per_token_records([rec], cluster, tokens, parameters=slow)
    assert np.all(b > 1.5 * a)  # the tabulated curves are keyed on the parameters, not shared


def test_the_python_api_checks_the_parameters_argument():
    """A wrong ``parameters=`` to an exported function is one TierwiseError naming it, not an AttributeError."""
    import pytest

    import tierwise
    from tierwise.errors import TierwiseError

    with pytest.raises(TierwiseError, match=r"load_cluster\(parameters=...\).*Parameters or None"):
        tierwise.load_cluster("dgx-h100", parameters="p.yaml")
    with pytest.raises(TierwiseError, match=r"search\(parameters=...\)"):
        tierwise.search(tierwise.load_model("llama3.1-8b"), tierwise.load_cluster("dgx-h100"), 8, 16, 4096,
                        parameters={"compute": {}})


def test_serving_values_are_arguments_too():
    """``validate --serving`` prices under the serving values it is given (``tools/fit_serving.py`` passes each
    grid point's), with no module-level override stack: the same call without them is unchanged after."""
    import dataclasses

    from tierwise.serve import params as serve_params
    from tierwise.serve.params import serving_parameters
    from tierwise.serve.validate import serving_validation_document

    assert not hasattr(serve_params, "_OVERRIDES")
    before = serving_validation_document(source="S15")["summary"]["latency"]
    gap = dataclasses.replace(serving_parameters(), kernel_gap_s=serving_parameters().kernel_gap_s * 4)
    moved = serving_validation_document(source="S15", params=gap)["summary"]["latency"]
    after = serving_validation_document(source="S15")["summary"]["latency"]
    assert moved["median"] != before["median"] and after == before
