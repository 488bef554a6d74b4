import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierwise.errors import UnitError
from tierwise.units import format_bytes, format_time, parse_bandwidth, parse_bytes, parse_count, parse_time


@pytest.mark.parametrize(("text", "expected"), [
    ("16GB", 16e9), ("16 GB", 16e9), ("1 GiB", 2**30), ("67108864B", 67108864), ("400Gb", 50e9),
    ("1_073_741_824", 2**30), ("512KiB", 512 * 1024), ("1.5 MB", 1.5e6), (4096, 4096),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected)


@pytest.mark.parametrize(("text", "expected"), [
    ("400 Gb/s", 50e9), ("400Gbps", 50e9), ("50 GB/s", 50e9), ("900GB/s", 900e9), ("3.35 TB/s", 3.35e12),
    ("200 Gb/s", 25e9), (1e9, 1e9),
])
def test_parse_bandwidth_bits_and_bytes(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize(("text", "expected"), [("1.5 ms", 1.5e-3), ("3us", 3e-6), ("2 s", 2.0), ("250 ns", 250e-9)])
def test_parse_time(text, expected):
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["-1 GB", "0 GB", "16 GX", "sixteen", "1e400 GB", "16 G"])
def test_bad_sizes_name_the_value(bad):
    with pytest.raises(UnitError) as info:
        parse_bytes(bad)
    assert repr(bad) in str(info.value) or bad in str(info.value)


def test_bit_byte_confusion_is_explained():
    with pytest.raises(UnitError, match="b/s"):
        parse_bandwidth("400 Gbs/s")


def test_counts():
    assert parse_count("16Ki") == 16384
    assert parse_count("16k") == 16000
    with pytest.raises(UnitError):
        parse_count("0")
    with pytest.raises(UnitError):
        parse_count("1.5")


@given(st.floats(min_value=1, max_value=1e15))
def test_bytes_roundtrip_through_text(value):
    assert parse_bytes(f"{value!r} B") == pytest.approx(value)


def test_formatting():
    assert format_bytes(16e9) == "16 GB"
    assert format_time(0.036) == "36 ms"
    assert not math.isnan(parse_bytes("8b"))
