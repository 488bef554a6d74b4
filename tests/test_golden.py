"""Golden outputs (tools/golden.py, docs/golden.md): a fast subset of the recorded cases still agrees within
0.1%, and the comparison itself catches what it must. The full set is compared by hand:
``python tools/golden.py compare``."""

import importlib.util
import sys
from pathlib import Path

_TOOL = Path(__file__).resolve().parent.parent / "tools" / "golden.py"
_spec = importlib.util.spec_from_file_location("tierwise_golden_tool", _TOOL)
golden = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = golden  # dataclasses look the module up while the class is built
_spec.loader.exec_module(golden)


def test_fast_subset_agrees_with_the_golden_files():
    results = golden.compare(list(golden.FAST))
    assert [r.case.name for r in results] == list(golden.FAST)
    report = [f"{r.case.name}: {r.status} {r.error}" + "".join(f"\n  {d.kind} {d.line()}" for d in r.failures[:20])
              for r in results if r.status != "ok"]
    assert not report, "\n".join(report)
    assert all(r.leaves > 0 for r in results)


def test_every_case_has_a_golden_file():
    missing = [c.name for c in golden.CASES if not golden.golden_path(c).exists()]
    assert not missing


def test_numbers_beyond_tolerance_fail_and_within_pass():
    g = {"a": 1.0, "b": [100.0, 0.0], "c": 5}
    failures, info, count = golden.compare_trees(g, {"a": 1.0009, "b": [100.2, 1e-13], "c": 5})
    assert [d.path for d in failures] == ["b[0]"] and not info and count == 4
    failures, _, _ = golden.compare_trees({"x": float("nan")}, {"x": float("nan")})
    assert not failures


def test_added_keys_are_info_removed_keys_and_changed_text_fail():
    g = {"breakdown": {"step_s": 1.0}, "tier": "scale_up", "fits": True, "rows": [1, 2]}
    c = {"breakdown": {"step_s": 1.0, "forward_layers_s": 0.3}, "tier": "scale_out", "fits": 1, "rows": [1]}
    failures, info, _ = golden.compare_trees(g, c)
    assert {(d.path, d.kind) for d in failures} == {("tier", "text"), ("fits", "type"), ("rows (length)", "length")}
    assert [(d.path, d.kind) for d in info] == [("breakdown.forward_layers_s", "added")]
    failures, _, _ = golden.compare_trees(g, {"breakdown": {}, "tier": "scale_up", "fits": True, "rows": [1, 2]})
    assert [(d.path, d.kind) for d in failures] == [("breakdown.step_s", "removed")]


def test_text_that_differs_only_by_rounding_is_info():
    failures, info, _ = golden.compare_trees({"note": "step 3.71 s on 16,384 GPUs"},
                                             {"note": "step 3.72 s on 16,384 GPUs"})
    assert not failures and [d.kind for d in info] == ["rounding"]
    failures, _, _ = golden.compare_trees({"note": "step 3.71 s"}, {"note": "step 3.95 s"})
    assert [d.kind for d in failures] == ["text"]


def test_volatile_keys_are_stripped():
    doc = {"search_s": 0.04, "best": [{"search_s": 1, "tp": 8}]}
    assert golden.strip_volatile(doc, "any") == {"best": [{"tp": 8}]}
