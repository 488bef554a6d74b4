"""The range of every global parameter (``catalog/parameters.yaml``), checked when a parameters file loads.

A parameters file named by ``$TIERWISE_PARAMETERS`` may change any value; a value outside its range gives
impossible answers (a negative time, MFU above 100%), so :func:`check_parameters` refuses it with one line
naming the key (``compute.torch_op_overhead``), the value (clipped), the range and why the range is what it
is. The ranges are physical, not statistical: they are far wider than any fit moves the values
(``validate/fit.py`` ``FITTED`` holds the fit's own, narrower bounds, which must lie inside these).

Kinds: ``number`` (a YAML number), ``time`` (``"1.5 us"`` or a number of seconds), ``bytes`` (``"3 GiB"`` or
a number of bytes). A mapping of link classes, protocols or generations is a *table*: every value in it has
the table's range; a table keyed by fixed names (link classes, protocols) refuses other names.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from tierwise.errors import SpecError, UnitError
from tierwise.files import short_repr
from tierwise.limits import MAX_DIM, MAX_SEQ, range_text
from tierwise.units import parse_bytes, parse_time

__all__ = ["Range", "RANGES", "check_parameters", "NOTE_KEYS"]


@dataclass(frozen=True)
class Range:
    """``lo`` (open if ``lo_open``) <= value <= ``hi`` (open if ``hi_open``); ``why`` says why, in a few words."""

    lo: float
    hi: float
    why: str
    kind: str = "number"
    lo_open: bool = False
    hi_open: bool = False
    keys: tuple[str, ...] | None = None
    """None: one value. A table: the names it must use, or ``()`` for a table keyed by generation (any name)."""


NOTE_KEYS = frozenset({"source", "fit"})
"""Keys that hold prose (where a value comes from, how it was fitted), never numbers."""

_EFF = dict(lo=0.0, hi=1.0, lo_open=True)
_LAT = dict(lo=0.0, hi=1.0, hi_open=True, kind="time")
_PER_ELEMENT = Range(0.0, 1024.0, "bytes moved per element by one kernel; 1 KiB per element is past any kernel")
_LINKS = ("nvlink", "pci", "net")
_PROTOCOLS = ("ll", "ll128", "simple")
_TIERS = ("scale_up", "host", "scale_out")
_ALGORITHMS = ("ring", "tree", "hierarchical", "nvls", "direct")

RANGES: dict[str, dict[str, Range | dict[str, Range]]] = {
    "compute": {
        "matmul_residual": Range(0.0, 1.25, "a multiplier of the measured large-GEMM fraction of peak (~0.8); "
                                 "past 1.25 a GEMM would run faster than the peak", lo_open=True),
        "matmul_half_dim": Range(0.0, MAX_DIM, "a matrix dimension in elements"),
        "attention_efficiency_flash2": Range(**_EFF, why="a fraction of the matmul peak"),
        "attention_efficiency_cudnn": Range(**_EFF, why="a fraction of the matmul peak"),
        "attention_half_seq_tokens": Range(0.0, MAX_SEQ, "a sequence length in tokens"),
        "matmul_memory_weight": Range(0.0, 16.0, "a weight on a GEMM's memory time (the fit keeps it within 4)"),
        "attention_backward_ratio": Range(**_EFF, why="the backward's rate over the forward's; the backward "
                                          "is never faster"),
        "torch_op_overhead": Range(0.0, 1.0, "seconds of host overhead per operator", hi_open=True),
        "overlap_interference": Range(0.0, 1.0, "the fraction of overlapped communication that slows compute"),
        "fp8_cast_bytes_per_element": Range(0.0, 64.0, "bytes moved to cast one element"),
        "fp8_efficiency_ratio": Range(**_EFF, why="FP8's fraction of its peak over BF16's; above 1 MFU passes "
                                      "100%"),
        "memory_bound_residual": Range(0.0, 1.25, "a multiplier of the measured streaming-HBM fraction (~0.8); "
                                       "past 1.25 memory would stream faster than its bandwidth", lo_open=True),
        "moe_load_imbalance": Range(1.0, 1024.0, "the busiest expert's tokens over the mean; never below 1"),
        "eager_rmsnorm_extra_bytes": _PER_ELEMENT,
        "eager_swiglu_extra_bytes": _PER_ELEMENT,
        "eager_rope_extra_bytes": _PER_ELEMENT,
        "cross_entropy_unfused_extra_bytes": _PER_ELEMENT,
        "elementwise_bytes_per_h": _PER_ELEMENT,
        "elementwise_bytes_per_f_gated": _PER_ELEMENT,
        "elementwise_bytes_per_f": _PER_ELEMENT,
        "optimizer_bytes_per_param": _PER_ELEMENT,
        "grad_bytes": Range(0.0, 16.0, "bytes per gradient element (2 for BF16, 4 for FP32)", lo_open=True),
        "weight_bytes": Range(0.0, 16.0, "bytes per weight element (2 for BF16)", lo_open=True),
        "optimizer_state_bytes": Range(0.0, 64.0, "bytes of optimizer state per parameter (12 for Adam)"),
        "bucket_params_min": Range(1.0, 1e13, "parameters per gradient bucket"),
        "bucket_params_per_dp": Range(0.0, 1e13, "parameters added to a bucket per data-parallel rank"),
        "memory_overhead": Range(0.0, 2.0**40, "bytes each GPU loses to the runtime (CUDA context, allocator)",
                                 kind="bytes", hi_open=True),
        "matmul_efficiency_max": Range(**_EFF, why="a fraction of the matmul peak"),
        "memory_bound_efficiency": Range(**_EFF, why="a fraction of the HBM bandwidth"),
    },
    "collectives": {
        "ll_step_latency": Range(**_LAT, why="a per-step latency in seconds", keys=_LINKS),
        "protocol_extra_step_latency": {p: Range(**_LAT, why="a per-step latency in seconds", keys=_LINKS)
                                        for p in _PROTOCOLS},
        "base_latency": {a: Range(**_LAT, why="a collective's start-up latency in seconds", keys=_PROTOCOLS)
                         for a in _ALGORITHMS},
        "protocol_bandwidth_fraction": Range(**_EFF, why="the payload's share of a protocol's line",
                                             keys=_PROTOCOLS),
        "link_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate", keys=_TIERS),
        "mesh_link_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate"),
        "nvls_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate"),
        "nvls_efficiency_by_generation": Range(**_EFF, why="the achievable fraction of a link's rate", keys=()),
        "all_to_all_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate"),
        "tree_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate"),
        "simple_chunk_bytes": Range(1.0, 2.0**30, "bytes per Simple-protocol chunk"),
        "simple_channels": Range(1.0, 1024.0, "NCCL channels (NCCL uses at most 64)"),
        "launch_overhead": Range(**_LAT, why="seconds to launch one collective"),
        "launch_overhead_per_extra_gpu_in_process": Range(**_LAT, why="seconds added per extra GPU of a process"),
        "nvls_latency": Range(**_LAT, why="seconds of NVLink SHARP latency"),
        "nvls_tree_net_latency": Range(**_LAT, why="seconds of NVLS-tree latency across the network"),
        "sharp_nvls_net_latency": Range(**_LAT, why="seconds of NVLS + SHARP latency across the network"),
        "collnet_intra_latency": Range(**_LAT, why="seconds of CollNet latency inside a node"),
        "collnet_net_latency": Range(**_LAT, why="seconds of CollNet (SHARP) latency across the network"),
        "collnet_per_rank_latency": Range(**_LAT, why="seconds of CollNet latency per extra GPU of a node"),
        "collnet_efficiency": Range(**_EFF, why="the achievable fraction of a link's rate"),
        "ll_max_busbw": Range(0.0, 1e6, "GB/s of LL bus bandwidth", lo_open=True, keys=()),
        "ll_max_busbw_multi_node": Range(0.0, 1e6, "GB/s of LL bus bandwidth", lo_open=True, keys=("two", "more")),
        "ll128_per_channel_busbw": Range(0.0, 1e6, "GB/s per LL128 channel", lo_open=True, keys=()),
    },
    "latency": {**{name: Range(**_LAT, why="a per-step latency in seconds") for name in _LINKS},
                "roce_extra_per_switch": Range(0.0, 1e-5, "seconds an Ethernet switch adds per hop over an IB "
                                                           "switch (a switch port-to-port latency is well under "
                                                           "10 us)", kind="time"),
                "scale_up_per_switch": Range(0.0, 1e-5, "seconds one scale-up switch adds to a step (a switch's "
                                                        "port-to-port latency is well under 10 us)", kind="time"),
                "scale_up_rack_cable": Range(0.0, 1e-6, "seconds of cable propagation in a rack-scale domain "
                                                        "(5 ns/m: under 200 m)", kind="time"),
                "scale_up_spine_cable": Range(0.0, 1e-5, "seconds of cable propagation to a scale-up spine "
                                                         "(5 ns/m: under 2 km)", kind="time")},
}
"""Section -> key -> its :class:`Range` (a table's values all share one), or a mapping of sub-keys to ranges."""


def _unknown(where: str, name: str, value: Any, known: list[str]) -> SpecError:
    close = difflib.get_close_matches(str(value), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    shown = short_repr(value, 40) if not isinstance(value, str) else repr(_clip(value))
    return SpecError(f"{where}: unknown key {shown} in {name}; {hint}use {', '.join(known)}")


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value(where: str, name: str, value: Any, rng: Range) -> float:
    """One value checked against ``rng``: a number (or, for times and sizes, a quantity) inside the range."""
    if value is None:
        raise SpecError(f"{where}: {name} is null; write a value ({rng.why}) or remove the key to use the "
                        "installed one")
    if rng.kind in ("time", "bytes") and isinstance(value, str):
        parse = parse_time if rng.kind == "time" else parse_bytes
        try:
            number = parse(value, what=f"{where}: {name}")
        except UnitError as exc:
            raise SpecError(str(exc)) from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        example = {"time": "'1.5 us'", "bytes": "'3 GiB'"}.get(rng.kind, "0.75 or 1.0e-05")
        raise SpecError(f"{where}: {name} is {short_repr(value, 40)}, not a finite number; write a number "
                        f"such as {example} (or remove the key to use the installed value)")
    else:
        try:
            number = float(value)
        except OverflowError:  # an integer past a float's range
            number = math.inf
    bounds = range_text(name, rng.lo, rng.hi, min_open=rng.lo_open, max_open=rng.hi_open)
    if not math.isfinite(number):
        raise SpecError(f"{where}: {name} is {short_repr(value, 40)}, not a finite number; use {bounds} "
                        f"({rng.why})")
    low = number <= rng.lo if rng.lo_open else number < rng.lo
    high = number >= rng.hi if rng.hi_open else number > rng.hi
    if low or high:
        unit = {"time": " s", "bytes": " B"}.get(rng.kind, "")
        raise SpecError(f"{where}: {name} is {short_repr(value, 40)}, out of range; use {bounds}{unit} "
                        f"({rng.why})")
    return number


def _entry(where: str, name: str, value: Any, rule: Range | dict[str, Range]) -> None:
    if isinstance(rule, dict):  # a mapping of sub-tables (base_latency: algorithm -> protocol -> time)
        if not isinstance(value, dict):
            raise SpecError(f"{where}: {name} must be a mapping of {', '.join(rule)} to tables")
        for sub, inner in value.items():
            if sub not in rule:
                raise _unknown(where, name, sub, list(rule))
            _entry(where, f"{name}.{sub}", inner, rule[sub])
        return
    if rule.keys is None:
        _value(where, name, value, rule)
        return
    if not isinstance(value, dict):
        kinds = ", ".join(rule.keys) if rule.keys else "a generation name"
        raise SpecError(f"{where}: {name} is {short_repr(value, 40)}; write a mapping of {kinds} to values")
    for sub, inner in value.items():
        if rule.keys and sub not in rule.keys:
            raise _unknown(where, name, sub, list(rule.keys))
        _value(where, f"{name}.{sub}", inner, rule)


def check_parameters(merged: dict[str, Any], where: str) -> None:
    """Every value of the merged parameters (installed, updated by the user's file) inside its range.

    Raises :class:`SpecError` naming the key as ``section.key[.sub]``, the value (clipped), the range and why.
    An unknown key is refused with the known ones (a misspelt key would otherwise be silently ignored).
    """
    for section, rules in RANGES.items():
        values = merged.get(section) or {}
        for key, value in values.items():
            if key in NOTE_KEYS:
                continue
            if key not in rules:
                raise _unknown(where, section, key, sorted(rules))
            _entry(where, f"{section}.{key}", value, rules[key])
