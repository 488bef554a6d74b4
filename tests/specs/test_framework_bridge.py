"""Small fixes of issue 29: a framework column naming Megatron-Bridge maps to NeMo's defaults."""

import pytest

from tierwise.specs.framework import framework_for_text


@pytest.mark.parametrize("text", ["Megatron-Bridge 0.1", "NVIDIA Megatron-Bridge (Megatron-Core)", "megatron bridge"])
def test_megatron_bridge_is_nemo(text):
    assert framework_for_text(text) == "nemo"


def test_megatron_alone_is_still_megatron():
    assert framework_for_text("Megatron-LM (2021)") == "megatron"
    assert framework_for_text("Megatron-Core r0.8") == "megatron"
