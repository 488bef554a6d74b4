"""Every global parameter has a range, checked when a parameters file loads (issue 32, parameter files)."""

from __future__ import annotations

import math

import pytest

from tierwise.errors import SpecError
from tierwise.specs import catalog
from tierwise.specs.parameter_ranges import NOTE_KEYS, RANGES, Range
from tierwise.specs.parameters import parameters_from_mapping

WHERE = "parameters file 'p.yaml'"


def _ranges():
    for section, rules in RANGES.items():
        for key, rule in rules.items():
            if isinstance(rule, dict):
                for sub, inner in rule.items():
                    yield section, key, sub, inner
            else:
                yield section, key, None, rule


def test_every_installed_parameter_has_a_range():
    installed = catalog.entries("parameters")
    for section, values in installed.items():
        missing = sorted(set(values) - set(RANGES[section]) - NOTE_KEYS)
        assert not missing, f"{section}: {missing} have no range"


def test_the_installed_parameters_are_inside_their_ranges():
    parameters_from_mapping({}, WHERE)  # raises if an installed value were out of range


def test_the_fit_bounds_lie_inside_the_ranges():
    from tierwise.validate.fit import FITTED

    for key, (lo, hi) in FITTED.items():
        rule = RANGES["compute"][key]
        assert isinstance(rule, Range)
        assert rule.lo <= lo and hi <= rule.hi, key


def _file_for(section, key, sub, value):
    """A parameters file setting one value (a table entry needs its table, a nested table its algorithm)."""
    if sub is None and isinstance(RANGES[section][key], Range) and RANGES[section][key].keys is not None:
        sub = (RANGES[section][key].keys or ("hopper",))[0]
    if isinstance(RANGES[section][key], dict):
        inner = RANGES[section][key][sub].keys[0]
        return {section: {key: {sub: {inner: value}}}}, f"{section}.{key}.{sub}.{inner}"
    if sub is not None:
        return {section: {key: {sub: value}}}, f"{section}.{key}.{sub}"
    return {section: {key: value}}, f"{section}.{key}"


def _outside(rule: Range):
    yield rule.lo - 1.0 if not rule.lo_open else rule.lo
    yield rule.hi * 2 + 1.0 if not rule.hi_open else rule.hi
    yield math.nan
    yield math.inf
    yield 10**400
    yield None
    yield True
    yield [1.0]


@pytest.mark.parametrize(("section", "key", "sub", "rule"), list(_ranges()),
                         ids=[f"{s}.{k}" + (f".{b}" if b else "") for s, k, b, _ in _ranges()])
def test_every_parameter_refuses_values_outside_its_range_naming_the_key(section, key, sub, rule):
    for value in _outside(rule):
        data, name = _file_for(section, key, sub, value)
        with pytest.raises(SpecError) as err:
            parameters_from_mapping(data, WHERE)
        message = str(err.value)
        assert name in message and "p.yaml" in message, message
        assert len(message) < 400, message


@pytest.mark.parametrize(("data", "needle"), [
    ({"compute": {"torch_op_overhead": -1e-05}}, "0 <= compute.torch_op_overhead < 1"),
    ({"compute": {"matmul_residual": 3.0}}, "compute.matmul_residual <= 1.25"),
    ({"compute": {"attention_efficiency_flash2": 1.5}}, "0 < compute.attention_efficiency_flash2 <= 1"),
    ({"compute": {"moe_load_imbalance": 0.5}}, "1 <= compute.moe_load_imbalance"),
    ({"compute": {"memory_overhead": "-3 GiB"}}, "compute.memory_overhead"),
    ({"compute": {"matmul_residul": 0.9}}, "did you mean 'matmul_residual'"),
    ({"compute": None}, "section compute must be a mapping of parameter names to values, not empty"),
    ({"collectives": {"ll_step_latency": {"nvlnk": "1 us"}}}, "did you mean 'nvlink'"),
    ({"collectives": {"base_latency": {"ring": {"ll": "2 s"}}}}, "collectives.base_latency.ring.ll"),
    ({"collectives": {"link_efficiency": {"scale_out": 0}}}, "0 < collectives.link_efficiency.scale_out <= 1"),
    ({"latency": {"net": "-2.7 us"}}, "latency.net"),
    ({"latency": {"net": "x" * 100_000}}, "latency.net"),
])
def test_messages_name_the_key_and_the_range(data, needle):
    with pytest.raises(SpecError) as err:
        parameters_from_mapping(data, WHERE)
    assert needle in str(err.value)
    assert len(str(err.value)) < 900


def test_a_table_entry_updates_the_installed_table():
    params = parameters_from_mapping({"collectives": {"ll_step_latency": {"nvlink": "2 us"}},
                                      "latency": {"net": "3 us"}}, WHERE)
    assert params.collectives["ll_step_latency"] == pytest.approx({"nvlink": 2e-6, "pci": 1e-6, "net": 2.7e-6})
    assert params.latency["net"] == pytest.approx(3e-6)
    assert params.latency["nvlink"] == pytest.approx(0.6e-6)


def test_values_inside_the_ranges_are_kept():
    params = parameters_from_mapping({"compute": {"torch_op_overhead": 0.0, "matmul_residual": 1.25,
                                                  "moe_load_imbalance": 1}}, WHERE)
    assert params.compute["matmul_residual"] == 1.25
    assert params.compute["torch_op_overhead"] == 0.0
