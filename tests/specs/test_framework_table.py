"""The framework-defaults table (catalog/frameworks.yaml): loaded, checked, every value sourced and accepted
by the plan."""

import copy
import itertools
from importlib import resources

import pytest

from tierwise.errors import SpecError
from tierwise.files import load_yaml
from tierwise.specs.framework import FRAMEWORKS, check_framework_table, framework_defaults, framework_table
from tierwise.specs.plan_mapping import plan_from_mapping


def _raw() -> dict:
    """The shipped table as a fresh raw document (single entries, not yet normalized)."""
    text = resources.files("tierwise.specs").joinpath("catalog", "frameworks.yaml").read_text()
    return load_yaml(text, "frameworks.yaml")


def test_every_framework_is_in_the_table_with_a_source_per_value():
    table = framework_table()
    assert sorted(table) == sorted(FRAMEWORKS)
    for name, sections in table.items():
        for cases in (*sections["defaults"].values(), *sections.get("moe", {}).values()):
            assert all(c["source"].strip() for c in cases), name
            assert "when" not in cases[-1], name


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_plan_takes_each_default_as_the_table_gives_it(framework):
    data = {"tp": 2, "global_batch_size": 64, "seq_length": 2048}
    for generation, moe, precision in itertools.product(("", "ampere", "hopper"), (False, True), ("bf16", "fp8")):
        plan = plan_from_mapping({**data, "precision": precision}, num_gpus=8, framework=framework,
                                 generation=generation, moe=moe)
        defaults = framework_defaults(framework, generation=generation, moe=moe, tp=2, precision=precision)
        for key, (value, why) in defaults.items():
            assert getattr(plan, key) == value, (framework, generation, moe, precision, key)
            assert any(a.startswith(f"{key}=") and why in a for a in plan.assumed), (framework, key)


def test_conditions_pick_their_case():
    assert framework_defaults("megatron")["attention_kernel"][0] == "auto"
    assert framework_defaults("megatron", generation="Blackwell")["attention_kernel"][0] == "cudnn"
    assert framework_defaults("nemo", generation="ampere")["attention_kernel"][0] == "flash2"
    assert framework_defaults("nemo", tp=4)["tp_comm_overlap"][0] is True
    assert framework_defaults("nemo", tp=1)["tp_comm_overlap"][0] is False
    assert framework_defaults("megatron", tp=4)["tp_comm_overlap"][0] is False
    assert framework_defaults("nemo", precision="FP8")["grad_reduce_dtype"][0] == "bf16"
    assert framework_defaults("megatron", moe=True, tp=4)["etp"][0] == 4
    assert "etp" not in framework_defaults("megatron", tp=4)


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["frameworks"].pop("deepspeed"), "expected megatron"),
    (lambda d: d["frameworks"]["megatron"]["defaults"].update(warp_speed={"value": 1, "source": "x"}),
     "warp_speed is not a plan switch"),
    (lambda d: d["frameworks"]["nemo"]["defaults"]["zero2_sync"].update(value="sometimes"), "value='sometimes'"),
    (lambda d: d["frameworks"]["torchtitan"]["defaults"]["zero_stage"].pop("source"), "a source"),
    (lambda d: d["frameworks"]["nemo"]["defaults"]["tp_comm_overlap"].pop(), "last case must have no when"),
    (lambda d: d["frameworks"]["megatron"]["defaults"]["attention_kernel"][0]["when"].update(generation="maxwell"),
     "when="),
    (lambda d: d["frameworks"]["deepspeed"]["defaults"]["tp_comm_overlap"].update(value="no"), "wrong type"),
    (lambda d: d["frameworks"]["nemo"]["moe"]["etp"].update(value_from="pp"), "value_from: tp is for etp only"),
])
def test_a_malformed_table_is_one_line_naming_the_entry(breakage, message):
    data = copy.deepcopy(_raw())
    breakage(data)
    with pytest.raises(SpecError, match=message) as exc:
        check_framework_table(data, "frameworks.yaml")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("frameworks.yaml")
