"""The model's parameters are arguments (issue 27, "hidden inputs"; docs/architecture.md, "Parameters are
arguments"): only the public entry points (the functions ``tierwise.__all__`` exports, the command
implementations the CLI calls, a few documented test and API helpers) resolve ``parameters=None`` to
:func:`tierwise.specs.parameters.load_parameters`, once, at the top; everything below takes the record it is
handed. Every call of ``load_parameters`` in src/tierwise outside cli/ and specs/parameters.py, and every
argument-less call of ``compute_params`` / ``serving_parameters`` (shorthands for it), is read with
:mod:`ast`; one in a function not listed here fails: pass the parameters down instead.

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
    ("measure/compute.py", "finish_profile"),  # measure compute's command
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
