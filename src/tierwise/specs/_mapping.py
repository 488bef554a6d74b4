"""Helpers for turning user mappings into specs: key checks and typed getters with one-line errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from tierwise.errors import SpecError, did_you_mean
from tierwise.files import describe_type, short_repr
from tierwise.limits import MAX_GPUS, check_float, check_int

__all__ = ["check_keys", "get_int", "get_bool", "get_float", "require_mapping", "MAX_INT"]

MAX_INT = 2**24
"""Largest whole number a spec or plan key takes by default (16,777,216 GPUs, sequences, tokens...): far above
any real value, low enough that the estimator's 64-bit integer arithmetic cannot overflow."""


def require_mapping(data: Any, origin: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(f"{origin} must be a mapping of keys to values, not {describe_type(data)} "
                        f"({short_repr(data)}); write one key: value per line")
    return data


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], origin: str, required: Iterable[str] = (),
               error: type[Exception] = SpecError) -> None:
    """Unknown keys and missing required keys are errors (of class ``error``) naming the key and the valid ones."""
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            raise error(
                f"unknown key {short_repr(key)} in {origin}{did_you_mean(str(key)[:100], allowed)}; "
                f"valid keys: {', '.join(allowed)}"
            )
    for key in required:
        if key not in data or data[key] is None:
            raise error(f"{origin} is missing the required key {key!r}")


def get_int(data: Mapping[str, Any], key: str, origin: str, default: int | None = None, minimum: int = 1,
            maximum: int = MAX_GPUS) -> int:
    """A whole number in ``[minimum, maximum]`` (default at most 2^20, the bound on GPU counts and degrees);
    NaN, infinities, fractions and values past the bound are errors naming the key and the range."""
    value = data.get(key, default)
    if value is None:
        raise SpecError(f"{origin} is missing the required key {key!r}")
    return check_int(value, key, minimum=minimum, maximum=maximum, error=SpecError, sep="=", where=f"in {origin}")


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond float range
        return False


def get_float(data: Mapping[str, Any], key: str, origin: str, default: float | None = None,
              minimum: float = 0.0, maximum: float | None = None) -> float:
    """A finite number in ``[minimum, maximum]``; NaN and infinities are errors naming the key and the range."""
    value = data.get(key, default)
    if value is None:
        raise SpecError(f"{origin} is missing the required key {key!r}")
    return check_float(value, key, minimum=minimum, maximum=maximum, error=SpecError, sep="=", where=f"in {origin}")


def get_bool(data: Mapping[str, Any], key: str, origin: str, default: bool | None = None) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"{key}={short_repr(value)} in {origin} must be true or false (a YAML boolean, not a "
                        "string or a number)")
    return value
