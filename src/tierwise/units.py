"""Parse and format physical quantities; everything inside tierwise is in SI base units.

Conventions (ARCHITECTURE.md, "Units live in names, base units inside"):

* bytes are bytes; ``B`` is a byte and ``b`` is a bit, so ``"400 Gb/s"`` is 50e9 bytes/s;
* decimal prefixes (k, M, G, T, P) are powers of 1000, binary prefixes (Ki, Mi, Gi, Ti) powers of 1024,
  the convention of nccl-tests and of every accelerator datasheet (``GB/s`` = 1e9 bytes/s);
* time is in seconds, rates per second.

>>> parse_bytes("16GB")
16000000000.0
>>> parse_bytes("1 GiB")
1073741824.0
>>> parse_bandwidth("400 Gb/s")
50000000000.0
>>> parse_bandwidth("400Gbps")
50000000000.0
>>> format_bytes(2**30)
'1.07 GB'
"""

from __future__ import annotations

import math
import re

from tierwise.errors import UnitError
from tierwise.limits import MAX_BANDWIDTH, MIN_BANDWIDTH, show_value

__all__ = [
    "parse_bytes",
    "parse_bandwidth",
    "parse_time",
    "parse_count",
    "format_bytes",
    "format_bandwidth",
    "format_time",
    "format_duration",
    "format_number",
]

_PREFIX = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "KI": 2.0**10,
    "ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
}

_NUMBER = r"(?P<num>[+-]?(?:\d+(?:[._]\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_QTY = re.compile(_NUMBER + r"\s*(?P<prefix>Ki|Mi|Gi|Ti|Pi|ki|KI|[kKMGTP]?)(?P<unit>[A-Za-z/]*)\s*$")

_BYTE_UNITS = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "b": 1 / 8, "bit": 1 / 8, "bits": 1 / 8, "": 1.0}
_RATE_UNITS = {
    "B/s": 1.0,
    "Bps": 1.0,
    "b/s": 1 / 8,
    "bps": 1 / 8,
    "bit/s": 1 / 8,
}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0}


def _float(value: float | int) -> float:
    """A bare number as a float; an int past float's range is infinite (then rejected), not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _number(text: str) -> float:
    # digit-group underscores appear in some nccl-tests reformatted logs ("1_073_741_824")
    return float(text.replace("_", ""))


def _split(value: str, what: str, example: str) -> tuple[float, str, str]:
    match = _QTY.match(value.strip())
    if not match:
        raise UnitError(f"cannot parse {what} {show_value(value)}; write a number and a unit, e.g. {example!r}")
    return _number(match["num"]), match["prefix"], match["unit"]


def _limit(maximum: float, unit: str) -> str:
    """A bound as the user would write it: ``2**40`` bytes is ``1 TiB``, ``1e15`` bytes/s is ``1 PB/s``."""
    if unit == " B":
        for name, scale in (("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20)):
            if maximum >= scale and (maximum / scale).is_integer():
                return f"{maximum / scale:g} {name}"
    if unit == " B/s":
        return format_bandwidth(maximum)
    return f"{maximum:g}{unit}"


def _check_positive(number: float, value: object, what: str, allow_zero: bool, maximum: float | None = None,
                    unit: str = "", minimum: float = 0.0) -> float:
    """A parsed figure must be finite, > 0 (or >= 0, or >= ``minimum``) and at most ``maximum``: the message
    names the range."""
    name = what.rsplit(": ", 1)[-1]  # "cluster file 'a.yaml': nic_bandwidth" -> "nic_bandwidth"
    bound = f">= {_limit(minimum, unit)}" if minimum > 0 else (">= 0" if allow_zero else "> 0")
    top = f" and <= {_limit(maximum, unit)}" if maximum is not None else ""
    if math.isnan(number):
        raise UnitError(f"{what} {show_value(value)} is not a number; use {name} {bound}{top}")
    if not math.isfinite(number):
        raise UnitError(f"{what} {show_value(value)} is not a finite number (too large for a float); use {name} {bound}{top}")
    if number < max(minimum, 0.0) or (number == 0 and not allow_zero) or (maximum is not None and number > maximum):
        raise UnitError(f"{what} {show_value(value)} is out of range; use {name} {bound}{top}")
    return number


def parse_bytes(value: str | float | int, *, what: str = "size", allow_zero: bool = False,
                maximum: float | None = None) -> float:
    """Parse a size such as ``"16GB"``, ``"1 GiB"``, ``"67108864B"`` or ``"400Gb"`` into bytes.

    A bare number is bytes. ``b`` (lower case) is a bit: ``"8b"`` is one byte. NaN, infinities (``"1e400GB"``)
    and sizes past ``maximum`` bytes are errors naming the range.
    """
    if isinstance(value, bool):
        raise UnitError(f"{what} {show_value(value)} is not a size; write e.g. '16 GB'")
    if isinstance(value, int | float):
        return _check_positive(_float(value), value, what, allow_zero, maximum, " B")
    number, prefix, unit = _split(str(value), what, "16 GB")
    if unit in ("", "B", "byte", "bytes") and prefix == "" and unit == "":
        return _check_positive(number, value, what, allow_zero, maximum, " B")
    if unit not in _BYTE_UNITS:
        raise UnitError(
            f"unknown size unit {show_value(unit)} in {show_value(value)}; use B (byte) or b (bit) with a prefix, e.g. '16 GB', '1 GiB'"
        )
    if unit == "" and prefix:
        raise UnitError(f"size {show_value(value)} has a prefix but no unit; write B for bytes or b for bits, e.g. '16 GB'")
    return _check_positive(number * _PREFIX[prefix] * _BYTE_UNITS[unit], value, what, allow_zero, maximum, " B")


def parse_bandwidth(value: str | float | int, *, what: str = "bandwidth",
                    maximum: float | None = MAX_BANDWIDTH, minimum: float = MIN_BANDWIDTH) -> float:
    """Parse a rate such as ``"400 Gb/s"``, ``"400Gbps"`` or ``"50 GB/s"`` into bytes per second.

    A bare number is bytes per second. Note: this parses a *figure*; whether it is one-way or both
    directions together is the caller's business (specs name it). A rate must be finite, at least
    ``minimum`` bytes/s (default 1 kB/s: a slower link turns a step into years) and at most ``maximum``
    (default 1 PB/s, a thousand times any link's).
    """
    if isinstance(value, bool):
        raise UnitError(f"{what} {show_value(value)} is not a bandwidth; write e.g. '400 Gb/s' or '50 GB/s'")
    if isinstance(value, int | float):
        return _check_positive(_float(value), value, what, False, maximum, " B/s", minimum)
    number, prefix, unit = _split(str(value), what, "400 Gb/s")
    if unit == "" and prefix == "":
        return _check_positive(number, value, what, False, maximum, " B/s", minimum)
    if unit not in _RATE_UNITS:
        raise UnitError(
            f"unknown bandwidth unit {show_value(unit)} in {show_value(value)}; use B/s (bytes) or b/s (bits), e.g. '50 GB/s' or '400 Gb/s'"
        )
    return _check_positive(number * _PREFIX[prefix] * _RATE_UNITS[unit], value, what, False, maximum, " B/s",
                           minimum)


def parse_time(value: str | float | int, *, what: str = "time", allow_zero: bool = True,
               maximum: float | None = None) -> float:
    """Parse a duration such as ``"1.5 ms"``, ``"3us"`` or ``"2 s"`` into seconds (bare number: seconds)."""
    if isinstance(value, bool):
        raise UnitError(f"{what} {show_value(value)} is not a duration; write e.g. '1.5 us'")
    if isinstance(value, int | float):
        return _check_positive(_float(value), value, what, allow_zero, maximum, " s")
    text = str(value).strip()
    match = re.match(_NUMBER + r"\s*(?P<unit>[a-zµ]*)\s*$", text)
    if not match or match["unit"] not in _TIME_UNITS and match["unit"] != "":
        raise UnitError(f"cannot parse {what} {show_value(value)}; write a number and one of s, ms, us, ns, e.g. '1.5 us'")
    scale = _TIME_UNITS.get(match["unit"], 1.0)
    return _check_positive(_number(match["num"]) * scale, value, what, allow_zero, maximum, " s")


def parse_count(value: str | int | float, *, what: str = "count", minimum: int = 1,
                maximum: int | None = None) -> int:
    """Parse a positive integer count; ``"16k"`` is 16,000 and ``"16Ki"`` is 16,384 (at most ``maximum``)."""
    if isinstance(value, bool):
        raise UnitError(f"{what} {show_value(value)} is not a whole number")
    if isinstance(value, int | float):
        number = _float(value)
    else:
        number, prefix, unit = _split(str(value), what, "1024")
        if unit:
            raise UnitError(f"{what} {show_value(value)} must be a whole number, e.g. 1024 or 16Ki")
        number *= _PREFIX[prefix]
    top = f" and <= {maximum:,}" if maximum is not None else ""
    if not math.isfinite(number) or number != int(number):
        raise UnitError(f"{what} {show_value(value)} must be a whole number >= {minimum}{top}")
    if number < minimum or (maximum is not None and number > maximum):
        raise UnitError(f"{what} {show_value(value)} is out of range; use {what} >= {minimum}{top}")
    return int(number)


def _si(value: float, unit: str, digits: int = 3) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def format_bytes(value: float) -> str:
    """Decimal bytes, e.g. ``'16 GB'``."""
    return _si(value, "B")


def format_bandwidth(value: float) -> str:
    """Decimal bytes per second, e.g. ``'450 GB/s'``."""
    return _si(value, "B/s")


def format_time(value: float) -> str:
    """Seconds in the most readable unit, e.g. ``'36 ms'``."""
    if not math.isfinite(value):
        return str(value)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def format_duration(value: float) -> str:
    """A span of wall-clock time in s, min, h or days (3 significant digits), e.g. ``'10.2 min'``; below a
    second, :func:`format_time`.

    >>> format_duration(613.6)
    '10.2 min'
    >>> format_duration(252930.7)
    '70.3 h'
    """
    if not math.isfinite(value) or abs(value) < 1.0:
        return format_time(value)
    for unit, scale in (("days", 86400.0 * 3), ("h", 3600.0 * 3), ("min", 60.0 * 3)):
        if abs(value) >= scale:
            return f"{value / (scale / 3):.3g} {unit}"
    return f"{value:.3g} s"


def format_number(value: float, digits: int = 3) -> str:
    """A number as a reader writes it, never in e-notation: thousands separated at and above 1,000 (whole
    units), else ``digits`` significant digits in positional notation.

    >>> format_number(1.305e10)
    '13,050,000,000'
    >>> format_number(2.8194e-06)
    '0.00000282'
    >>> format_number(0.5)
    '0.5'
    """
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    if abs(round(value, decimals)) >= 1000:  # 999.96 rounds up to 1,000
        return f"{value:,.0f}"
    text = f"{round(value, decimals):.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
