"""A measured compute profile (``tierwise measure compute``) applied to the clusters a command loads.

A profile is a YAML mapping with a ``compute:`` block (the keys of :data:`COMPUTE_KEYS`, each a fraction in
(0, 1]) and ``compute_measured_on: {device, torch, cuda | hip, date}``; ``measure compute --out`` writes it as a
whole cluster file (``base:`` the cluster measured), so the same file works as ``--cluster FILE`` and as
``--compute FILE``. ``--compute FILE`` (``estimate``, ``plan``, ``serve``) puts the profile in force for the
command through :func:`compute_profile_in_force`; :func:`tierwise.specs.cluster.load_cluster`, the one place
every cluster is loaded, merges its ``compute:`` over the cluster's own and checks the device it was measured
on against the cluster's accelerator (:func:`device_matches`): another part is a warning, or an error under
``--strict``.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tierwise.errors import SpecError
from tierwise.specs import catalog
from tierwise.specs._mapping import check_keys, get_float, require_mapping

__all__ = ["COMPUTE_KEYS", "ComputeProfileInForce", "compute_profile_in_force", "profile_in_force",
           "load_compute_profile", "parse_compute", "device_matches", "check_device"]

COMPUTE_KEYS = ("matmul_efficiency_max", "memory_bound_efficiency", "attention_efficiency_flash2",
                "attention_efficiency_cudnn")
"""Compute parameters a cluster file or a profile may override (measured on its accelerator): the large-GEMM
and streaming fractions :func:`tierwise.pricing.kernels.per_accelerator` reads and the attention families'
matmul efficiencies :func:`tierwise.pricing.kernels.attention_kernel_rates` reads."""

MIN_RATE = 1e-9
"""The smallest fraction of a peak a profile may give: positive, and small enough for a CPU profiled against a
GPU's datasheet (a laptop CPU's attention reaches about 1e-7 of an H100's BF16 peak); zero or below is refused."""


@dataclass(frozen=True)
class ComputeProfileInForce:
    """A loaded profile, whether a mismatch refuses, and the warnings its use raised."""

    compute: Mapping[str, float]
    device: str
    origin: str
    strict: bool = False
    warnings: list[str] = field(default_factory=list)


_IN_FORCE: contextvars.ContextVar[ComputeProfileInForce | None] = contextvars.ContextVar("compute_profile",
                                                                                          default=None)


def profile_in_force() -> ComputeProfileInForce | None:
    """The profile of the enclosing :func:`compute_profile_in_force` block, if any."""
    return _IN_FORCE.get()


def parse_compute(raw: Any, origin: str) -> dict[str, float]:
    """A ``compute:`` block: known keys only, each a number in [:data:`MIN_RATE`, 1] (zero or below is refused)."""
    if raw is None:
        return {}
    where = f"{origin}: compute"
    raw = require_mapping(raw, where)
    check_keys(raw, COMPUTE_KEYS, where)
    return {k: get_float(raw, k, where, minimum=MIN_RATE, maximum=1.0) for k in raw}


def load_compute_profile(path: str) -> tuple[dict[str, float], str]:
    """(compute block, device it was measured on) of a profile file; one :class:`SpecError` line when the file
    holds no rate."""
    origin = f"compute profile {path!r}"
    data = require_mapping(catalog.load_yaml_file(path, what="compute profile"), origin)
    compute = parse_compute(data.get("compute"), origin)
    if not compute:
        raise SpecError(f"{origin} has no compute: rates ({', '.join(COMPUTE_KEYS)}); write one with "
                        "`tierwise measure compute --out FILE`")
    measured = data.get("compute_measured_on") or {}
    device = str(require_mapping(measured, f"{origin}: compute_measured_on").get("device", ""))
    return compute, device


def device_matches(device: str, accelerator_name: str) -> bool:
    """Whether a device name torch reports (``NVIDIA H100 80GB HBM3``) is the catalog accelerator
    ``accelerator_name`` (``h100-sxm``): the accelerator's model token (its name up to the first ``-``) appears
    in the device name, spaces and case ignored. An unnamed device matches nothing."""
    token = accelerator_name.split("-")[0].lower()
    squashed = re.sub(r"\s+", "", device).lower()
    return bool(token and squashed) and token in squashed


def check_device(device: str, accelerator_name: str, origin: str, strict: bool, warnings: list[str]) -> None:
    """A profile measured on ``device`` used for ``accelerator_name``: nothing when they match; otherwise a
    warning appended to ``warnings``, or a :class:`SpecError` when ``strict``."""
    if device_matches(device, accelerator_name):
        return
    line = (f"{origin} was measured on {device or 'an unnamed device'}, not on the cluster's {accelerator_name}; "
            "its rates are used as given")
    if strict:
        raise SpecError(line.replace("; its rates are used as given", "") + " (--strict); measure on that part "
                        "or drop --strict")
    warnings.append(line)


@contextlib.contextmanager
def compute_profile_in_force(path: str | None, strict: bool = False) -> Iterator[ComputeProfileInForce | None]:
    """Within the block every cluster :func:`tierwise.specs.cluster.load_cluster` loads carries the profile at
    ``path`` (None: no profile, only ``strict`` device checks of cluster files that carry one)."""
    if path is None:
        prof = ComputeProfileInForce(compute={}, device="", origin="", strict=strict)
    else:
        compute, device = load_compute_profile(path)
        prof = ComputeProfileInForce(compute=compute, device=device, origin=f"compute profile {path!r}",
                                     strict=strict)
    token = _IN_FORCE.set(prof)
    try:
        yield prof
    finally:
        _IN_FORCE.reset(token)
