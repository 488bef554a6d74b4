"""The global, documented parameters of the performance model (``catalog/parameters.yaml``).

They are fitted once, globally, and say how; nothing here is specific to one run or one source.

A parameters file of the user's (``tierwise validate --fit --fit-out FILE`` writes one) replaces them when
the environment variable ``TIERWISE_PARAMETERS`` names it: each section of the file (``compute:``,
``collectives:``, ``latency:``) updates the installed section key by key, so the file may hold only what
it changes. The installed file is never written.

The parameters are arguments (docs/architecture.md, "Parameters are arguments"): :func:`load_parameters` is
the one place that reads the environment variable, called once by each public entry point (the CLI's
commands, the functions ``tierwise.__all__`` exports) when it is given none; everything below takes the
:class:`Parameters` it is handed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from tierwise.errors import SpecError
from tierwise.files import short_repr
from tierwise.specs import catalog
from tierwise.specs.parameter_ranges import check_parameters
from tierwise.units import parse_time

__all__ = ["Parameters", "load_parameters", "parameters_file", "parameters_from_mapping", "PARAMETERS_ENV"]

PARAMETERS_ENV = "TIERWISE_PARAMETERS"
"""Environment variable naming a parameters file to use instead of the installed one (module docstring)."""

PROTOCOLS = ("ll", "ll128", "simple")
LINK_CLASSES = ("nvlink", "pci", "net")


@dataclass(frozen=True)
class Parameters:
    latency: dict[str, float]
    """Default LL step latency per link class, seconds."""
    collectives: dict[str, Any]
    """Collective-model parameters with times parsed to seconds."""
    compute: dict[str, Any]
    raw: dict[str, Any]
    fingerprint: str = field(default="", compare=False)
    """A stable digest of ``raw`` (the merged file), computed once when the record is built: it keys any
    cache of what the parameters determine (:mod:`tierwise.pricing.comm`'s curves)."""


def _times(table: dict[str, Any]) -> dict[str, float]:
    return {k: parse_time(v) for k, v in table.items()}


def load_parameters() -> Parameters:
    """The parameters of this run: the installed catalog, updated by the file ``$TIERWISE_PARAMETERS`` names
    (the one place the variable is read; a public entry point calls this once when given no parameters)."""
    return _load(os.environ.get(PARAMETERS_ENV) or None, True)


def parameters_file(path: str | os.PathLike) -> Parameters:
    """The installed parameters updated by the parameters file ``path`` (``validate --fit-out`` reads back the
    file it wrote this way)."""
    return _load(str(path), False)


@functools.cache
def _load(path: str | None, from_env: bool) -> Parameters:
    installed = catalog.entries("parameters")
    if path is None:
        return _parse(installed, "catalog/parameters.yaml")
    where = f"parameters file {path!r}" + (f" (${PARAMETERS_ENV})" if from_env else "")
    what = "parameters file" + (f" (${PARAMETERS_ENV})" if from_env else "")
    data = catalog.load_yaml_file(path, what=what)
    return parameters_from_mapping(data, where)


def parameters_from_mapping(data: Any, where: str) -> Parameters:
    """The installed parameters updated section by section with ``data`` (a parameters file's mapping);
    anything unusable (not a mapping, an unknown key, a value that is not a finite number or is outside its
    range, :mod:`tierwise.specs.parameter_ranges`) is a :class:`SpecError` naming the key."""
    installed = catalog.entries("parameters")
    if not isinstance(data, dict):
        raise SpecError(f"{where} must be a mapping with sections compute:, collectives: or latency:; "
                        "write it with `tierwise validate --fit --fit-out FILE`")
    unknown = sorted(set(data) - set(installed))
    if unknown:
        raise SpecError(f"{where}: unknown section {unknown[0]!r}; use {', '.join(sorted(installed))}")
    merged: dict[str, Any] = {}
    for key, section in installed.items():
        if key not in data:
            merged[key] = section
            continue
        own = data[key]
        if not isinstance(own, dict):
            what = "empty (null)" if own is None else short_repr(own, 40)
            raise SpecError(f"{where}: section {key} must be a mapping of parameter names to values, not {what}; "
                            "fill it in, or remove the section to use the installed values")
        # a table (link classes, protocols) updates the installed table entry by entry
        merged[key] = {**section, **{k: ({**section[k], **v} if isinstance(section.get(k), dict)
                                         and isinstance(v, dict) else v) for k, v in own.items()}}
    check_parameters(merged, where)
    return _parse(merged, where)


def _parse(raw: dict[str, Any], where: str) -> Parameters:
    try:
        return _parse_sections(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if where == "catalog/parameters.yaml":
            raise
        raise SpecError(f"{where}: unusable value ({type(exc).__name__}: {exc}); fix it or remove the key to "
                        "use the installed value") from None


def _cache_clear() -> None:
    _load.cache_clear()


load_parameters.cache_clear = _cache_clear  # type: ignore[attr-defined]


def _parse_sections(raw: dict[str, Any]) -> Parameters:
    col = dict(raw["collectives"])
    parsed = {
        "ll_step_latency": _times(col["ll_step_latency"]),
        "protocol_extra_step_latency": {p: _times(t) for p, t in col["protocol_extra_step_latency"].items()},
        "base_latency": {a: _times(t) for a, t in col["base_latency"].items()},
        "protocol_bandwidth_fraction": dict(col["protocol_bandwidth_fraction"]),
        "link_efficiency": dict(col["link_efficiency"]),
        "mesh_link_efficiency": float(col["mesh_link_efficiency"]),
        "nvls_efficiency": float(col["nvls_efficiency"]),
        "nvls_efficiency_by_generation": {k: float(v) for k, v in col["nvls_efficiency_by_generation"].items()},
        "all_to_all_efficiency": float(col["all_to_all_efficiency"]),
        "tree_efficiency": float(col["tree_efficiency"]),
        "simple_chunk_bytes": float(col["simple_chunk_bytes"]),
        "simple_channels": float(col["simple_channels"]),
        "launch_overhead": parse_time(col["launch_overhead"]),
        "launch_overhead_per_extra_gpu": parse_time(col["launch_overhead_per_extra_gpu_in_process"]),
        "nvls_latency": parse_time(col["nvls_latency"]),
        "ll_max_busbw": {k: float(v) * 1e9 for k, v in col["ll_max_busbw"].items()},
        "ll_max_busbw_multi_node": {k: float(v) * 1e9 for k, v in col["ll_max_busbw_multi_node"].items()},
        "ll128_per_channel_busbw": {k: float(v) * 1e9 for k, v in col["ll128_per_channel_busbw"].items()},
        "nvls_tree_net_latency": parse_time(col["nvls_tree_net_latency"]),
        "sharp_nvls_net_latency": parse_time(col["sharp_nvls_net_latency"]),
        "collnet_intra_latency": parse_time(col["collnet_intra_latency"]),
        "collnet_net_latency": parse_time(col["collnet_net_latency"]),
        "collnet_per_rank_latency": parse_time(col["collnet_per_rank_latency"]),
        "collnet_efficiency": float(col["collnet_efficiency"]),
    }
    lat = {k: parse_time(v) for k, v in raw["latency"].items() if k != "source"}
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Parameters(latency=lat, collectives=parsed, compute=dict(raw.get("compute", {})), raw=raw,
                      fingerprint=digest)
