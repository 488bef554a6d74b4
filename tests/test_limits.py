"""The shared bounds of issue 12 ("Numbers"): NaN, infinities, zero, negatives and absurd sizes are errors
naming the value and the valid range, at every layer that parses a number."""

from __future__ import annotations

import math

import pytest

from tierwise.errors import PlanError, SpecError, TopologyError, UnitError
from tierwise.limits import MAX_GPUS, check_float, check_int, range_text
from tierwise.units import parse_bandwidth, parse_bytes, parse_count, parse_time

HOSTILE = [math.nan, math.inf, -math.inf, 0, -1, 2**31, 2**63, 2**64, 10**400, 1.5, "abc", True, None]


@pytest.mark.parametrize("value", HOSTILE)
def test_check_int_rejects_every_hostile_value_naming_it_and_the_range(value):
    with pytest.raises(UnitError) as info:
        check_int(value, "--ranks", maximum=MAX_GPUS)
    message = str(info.value)
    assert message.startswith("--ranks ")
    assert message.endswith("use 1 <= --ranks <= 1,048,576")


def test_check_int_accepts_whole_floats_and_bounds_inclusive():
    assert check_int(8.0, "x") == 8 and isinstance(check_int(8.0, "x"), int)
    assert check_int(MAX_GPUS, "x") == MAX_GPUS
    assert check_int(0, "x", minimum=0) == 0


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400, -1.0, 0.0, 2000.0, "2", False])
def test_check_float_rejects_nan_inf_and_out_of_range(value):
    with pytest.raises(SpecError, match=r"^o=.* in here .*; use 0 < o <= 1,024$"):
        check_float(value, "o", minimum=0.0, min_open=True, maximum=1024.0, error=SpecError, sep="=",
                    where="in here")


def test_range_text():
    assert range_text("--factor", 1, 1024, min_open=True) == "1 < --factor <= 1,024"
    assert range_text("x", None, 0.5) == "x <= 0.5"


@pytest.mark.parametrize("text", ["1e400GB", "1e300 PB", "1e309", "99e999 B"])
def test_sizes_that_overflow_a_float_are_errors(text):
    with pytest.raises(UnitError, match="is not a finite number"):
        parse_bytes(text, what="--size")


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0, 10**400])
def test_bare_numbers_are_checked_too(value):
    with pytest.raises(UnitError, match="use size > 0"):
        parse_bytes(value)
    with pytest.raises(UnitError, match="use bandwidth >= 1 kB/s and <= 1 PB/s"):
        parse_bandwidth(value)


def test_maximums_name_the_bound_in_units():
    with pytest.raises(UnitError, match=r"--size '2 PiB' is out of range; use --size > 0 and <= 1 PiB"):
        parse_bytes("2 PiB", what="--size", maximum=2**50)
    assert parse_bytes("1 PiB", maximum=2**50) == 2**50
    with pytest.raises(UnitError, match="use link >= 1 kB/s and <= 1 PB/s"):
        parse_bandwidth("1e20 B/s", what="link")
    with pytest.raises(UnitError, match="use hop >= 0 and <= 1 s"):
        parse_time("2 s", what="hop", maximum=1.0)
    with pytest.raises(UnitError, match="is not a number"):
        parse_time(math.nan, what="hop")
    with pytest.raises(UnitError, match=r"out of range; use n >= 1 and <= 1,024"):
        parse_count("2Ki", what="n", maximum=1024)
    with pytest.raises(UnitError, match="whole number"):
        parse_count("1e400", what="n")


def test_spec_fields_reject_nan_and_absurd_values():
    from tierwise.specs.plan_mapping import plan_from_mapping

    base = {"global_batch_size": 64, "seq_length": 4096}
    for key, value, needle in (("tp", math.nan, "tp=nan"), ("tp", 0, "tp=0"), ("pp", 2**63, "pp=9223372036854775808"),
                               ("global_batch_size", 1e30, "use 1 <= global_batch_size <= 16,777,216"),
                               ("seq_length", -1, "use 1 <= seq_length <= 16,777,216"),
                               ("zero_stage", 4, "use 0 <= zero_stage <= 3")):
        with pytest.raises(SpecError, match=needle):
            plan_from_mapping({**base, key: value}, num_gpus=8)


def test_cluster_without_nics_is_an_error_naming_the_field():
    from tierwise.specs.cluster import cluster_from_mapping

    with pytest.raises(SpecError, match="nics_per_node=0 .* use nics_per_node >= 1"):
        cluster_from_mapping({"base": "dgx-h100", "nics_per_node": 0})
    with pytest.raises(UnitError, match="nic_bandwidth '0 Gb/s' is out of range; use nic_bandwidth >= 1 kB/s"):
        cluster_from_mapping({"base": "dgx-h100", "nic_bandwidth": "0 Gb/s"})
    with pytest.raises(SpecError, match="oversubscription=nan"):
        cluster_from_mapping({"base": "dgx-h100",
                              "scale_out_levels": [{"domain_size": 64, "oversubscription": math.nan}]})


def test_gpu_ranges_are_bounded_before_the_list_is_built():
    from tierwise.planner.answer import parse_gpu_range

    assert parse_gpu_range("1:1048576")[-1] == 2**20
    for text, needle in (("1:18446744073709551616", "the count 18446744073709551616 is out of range"),
                         ("0:8", "the count 0 is out of range"), ("16:8", "runs backwards"),
                         (",".join(["8"] * 65), "lists 65 GPU counts")):
        with pytest.raises(PlanError, match=needle):
            parse_gpu_range(text)


def test_fail_percentages_outside_0_100_are_errors():
    from tierwise.netsim.faults import parse_fail_count

    assert parse_fail_count("50%", 10, "cables", "--fail-links") == 5
    for text in ("inf%", "nan%", "-1%", "1e400%", "101%"):
        with pytest.raises(TopologyError, match=r"out of range; use a percentage 0% <= --fail-links < 100%"):
            parse_fail_count(text, 10, "cables", "--fail-links")


def test_topology_spec_counts():
    from tierwise.topology.spec import spec_from_mapping

    for key, value, needle in (("radix", 2**31, "--radix 2147483648 is out of range; use 2 <= --radix <= 4,096"),
                               ("gpus", 0, "use 1 <= --gpus <= 1,048,576"), ("tiers", 4, "use 1 <= --tiers <= 3"),
                               ("oversubscription", math.nan, "--oversubscription nan is not a finite number"),
                               ("groups", 1, "use 2 <= --groups"), ("nic_bandwidth", "0 Gb/s", "--nic-bandwidth")):
        with pytest.raises(TopologyError, match=needle):
            spec_from_mapping({key: value})
    with pytest.raises(TopologyError, match="radix=0|radix 0 is out of range; use 2 <= radix"):
        spec_from_mapping({"radix": 0}, where="topology file 'a.yaml'")


def test_dataset_rows_with_stated_numbers_out_of_range_are_errors():
    from tierwise.validate.mapping import check_row_numbers

    check_row_numbers({"row_id": "7", "tp": "8", "cp": "", "step_time_s": "not stated", "mfu_pct": "41.5"})
    for key, text, needle in (("tp", "0", "tp=0 in dataset row 7 is out of range; use 1 <= tp"),
                              ("tp", "-4", "tp=-4.0 in dataset row 7 is out of range"),
                              ("step_time_s", "nan", "step_time_s=nan in dataset row 7 is not a finite number"),
                              ("mfu_pct", "250", "use 0 < mfu_pct <= 100"),
                              ("num_gpus", str(2**64), "num_gpus=18446744073709551616 in dataset row 7")):
        with pytest.raises(SpecError, match=needle):
            check_row_numbers({"row_id": "7", key: text})


def test_rates_below_a_kilobyte_per_second_and_latencies_past_a_second_are_errors():
    from tierwise.specs.cluster import cluster_from_mapping

    with pytest.raises(UnitError, match="nic_bandwidth '1e-300 Gb/s' is out of range; use nic_bandwidth >= 1 kB/s"):
        cluster_from_mapping({"base": "dgx-h100", "nic_bandwidth": "1e-300 Gb/s"})
    with pytest.raises(UnitError, match="scale_out_latency '1e300 s' is out of range; use scale_out_latency >= 0"):
        cluster_from_mapping({"base": "dgx-h100", "scale_out_latency": "1e300 s"})
    with pytest.raises(SpecError, match="use 0.001 <= peak_dense_tflops.bf16"):
        cluster_from_mapping({"base": "dgx-h100",
                              "accelerator": {"base": "h100-sxm", "peak_dense_tflops": {"bf16": 1e-300}}})


def test_library_entry_points_reject_what_the_cli_rejects():
    from tierwise.errors import MeasureError
    from tierwise.measure.ddp import DdpConfig
    from tierwise.planner.branch_and_bound import search
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model

    with pytest.raises(PlanError, match="top=0: ask for at least one plan"):
        search(load_model("llama3.1-8b"), load_cluster("dgx-h100"), 8, 64, 4096, top=0)
    with pytest.raises(MeasureError, match="--bucket-cap-mb nan is out of range"):
        DdpConfig(bucket_cap_mb=math.nan)
    with pytest.raises(MeasureError, match="--warmup -1 is out of range"):
        DdpConfig(warmup=-1)
