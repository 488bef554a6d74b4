"""The failure-rate catalog (:file:`rates.yaml`): per-part rates with sources, repair times, restart and
storage defaults; a user's ``--failure-rates`` file overrides entries by name.

A user file holds the same keys as the shipped one, each entry either a number or a mapping::

    components:
      gpu: 3.0e-4                                   # failures per GPU per day
      software: {rate_per_day: 1.0, source: "our logs, 2026"}
    repair_s:
      node: 14400

Unknown keys, negative or non-finite rates are errors (one line naming the key and the fix). The merged catalog
is a frozen :class:`RateCatalog`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from tierwise.errors import TierwiseError
from tierwise.files import load_yaml, read_user_text, require_document, short_repr
from tierwise.limits import check_float
from tierwise.specs._mapping import check_keys

__all__ = ["GoodputError", "load_rates", "RateCatalog", "ComponentSpec", "Sourced", "MAX_RATE_PER_DAY", "PER"]

MAX_RATE_PER_DAY = 1e4
"""A part failing more than 10,000 times a day is no longer a failure rate."""
MAX_REPAIR_S = 365 * 86400.0
PER = ("gpu", "hbm_gib", "nic", "host", "node", "fabric_cable", "leaf_switch", "spine_switch", "nvlink_switch", "job")
"""What one part of a component is: its count comes from the cluster and the fabric inventory."""
_KINDS = ("hardware", "network", "software", "maintenance")


class GoodputError(TierwiseError, ValueError):
    """Bad input to the goodput model: a rate, an interval, a count, a rates file."""


@dataclass(frozen=True)
class Sourced:
    """A catalog figure and where it comes from."""

    value: float
    source: str


@dataclass(frozen=True)
class ComponentSpec:
    """One kind of part in the catalog: what one part is, its kind, its failures per part per day, the source."""

    per: str
    """One of :data:`PER`: the inventory counts it."""
    kind: str
    rate_per_day: float
    source: str


@dataclass(frozen=True)
class RateCatalog:
    """The failure-rate catalog (:file:`rates.yaml`, with a user's file over it): per-part rates, repair times,
    NVLink switches per scale-up domain, restart detection and checkpoint storage defaults, each with a source."""

    components: Mapping[str, ComponentSpec]
    """By name, in the catalog's order (the user's new components last)."""
    repair_s: Mapping[str, Sourced]
    """Seconds to return a failed ``node`` or ``rack`` to the pool."""
    nvlink_switches_per_domain: Mapping[str, Sourced]
    """By accelerator family (``nvl72``, ``a100``, ``hopper``, ``blackwell``)."""
    detect_s: Sourced
    """Failure detection and diagnosis before a restart (seconds)."""
    storage_bytes_per_s_per_gpu: Sourced
    """Checkpoint storage bandwidth per GPU of the job (bytes/s)."""

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> RateCatalog:
        """The catalog of a merged mapping (the YAML's shape)."""
        def sourced(table: Mapping[str, Any]) -> dict[str, Sourced]:
            return {str(k): Sourced(e["value"], str(e["source"])) for k, e in table.items()}

        comps = {str(k): ComponentSpec(str(c["per"]), str(c["kind"]), float(c["rate_per_day"]), str(c["source"]))
                 for k, c in raw["components"].items()}
        return cls(comps, sourced(raw["repair_s"]), sourced(raw["nvlink_switches_per_domain"]),
                   sourced(raw["restart"])["detect_s"], sourced(raw["storage"])["bytes_per_s_per_gpu"])


def _shipped() -> dict[str, Any]:

    text = resources.files("tierwise.goodput").joinpath("rates.yaml").read_text(encoding="utf-8")
    return load_yaml(text, "the shipped goodput rates.yaml")


def load_rates(path: str | None = None) -> RateCatalog:
    """The shipped rate catalog, with entries overridden (or components added) from the file ``path``."""
    rates = _shipped()
    if path is None:
        return RateCatalog.of(rates)

    where = f"failure-rates file {path!r}"
    user = load_yaml(read_user_text(path, what="failure-rates file", error=GoodputError), where, error=GoodputError)
    require_document(user, where, "give e.g. 'components: {gpu: 3.0e-4}' (failures per part per day)",
                     error=GoodputError)
    merged = copy.deepcopy(rates)
    check_keys(user, ("components", "repair_s"), where, error=GoodputError)
    for section, body in user.items():
        if not isinstance(body, dict):
            raise GoodputError(f"{section} in {where} must be a mapping, e.g. '{section}: {{gpu: 3.0e-4}}'")
        if section == "repair_s":
            check_keys(body, ("node", "rack"), f"repair_s of {where}", error=GoodputError)
        for name, entry in body.items():
            if section == "components":
                merged["components"][str(name)] = _component(name, entry, merged["components"].get(str(name)), where)
            else:
                merged["repair_s"][str(name)] = _repair(name, entry, where)
    return RateCatalog.of(merged)


def _component(name: Any, entry: Any, shipped: dict | None, where: str) -> dict[str, Any]:
    if isinstance(entry, int | float) and not isinstance(entry, bool):
        entry = {"rate_per_day": entry}
    if not isinstance(entry, dict):
        raise GoodputError(f"components.{short_repr(name)} in {where} must be a number (failures per part per day) "
                           "or a mapping such as {rate_per_day: 3.0e-4, per: gpu}")
    check_keys(entry, ("rate_per_day", "per", "kind", "source"), f"components.{short_repr(name)} of {where}",
               required=("rate_per_day",), error=GoodputError)
    check_float(entry["rate_per_day"], f"components.{name}.rate_per_day", minimum=0.0, maximum=MAX_RATE_PER_DAY,
                error=GoodputError, sep="=", where=f"in {where}", hint=" failures per part per day")
    base = dict(shipped or {"kind": "hardware"})
    per = entry.get("per", base.get("per"))
    if per not in PER:
        raise GoodputError(f"components.{short_repr(name)}.per={short_repr(per)} in {where}; choose one of "
                           f"{', '.join(PER)}")
    kind = entry.get("kind", base.get("kind", "hardware"))
    if kind not in _KINDS:
        raise GoodputError(f"components.{short_repr(name)}.kind={short_repr(kind)} in {where}; choose one of "
                           f"{', '.join(_KINDS)}")
    return base | {"per": per, "kind": kind, "rate_per_day": float(entry["rate_per_day"]),
                   "source": str(entry.get("source", f"user file {where.split(' ', 2)[-1]}"))}


def _repair(name: Any, entry: Any, where: str) -> dict[str, Any]:
    value = entry.get("value") if isinstance(entry, dict) else entry
    check_float(value, f"repair_s.{name}", minimum=0.0, maximum=MAX_REPAIR_S, error=GoodputError, sep="=",
                where=f"in {where}", hint=" seconds")
    return {"value": float(value), "source": f"user file {where.split(' ', 2)[-1]}"}
