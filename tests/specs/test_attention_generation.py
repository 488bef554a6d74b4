"""An attention kernel's efficiency by generation (issue 29): FlashAttention-2 reaches 73% of A100's peak and
35% of H100's; with each part's exp2 time taken out the matmul shares are 0.893 and 0.424, so a Hopper
efficiency is 2.1x on Ampere; families without a measurement on a generation keep factor 1. Not applied by the
pricing yet (docs/compute.md, docs/validation.md "Issue 29": the refit it needs moves matmul_memory_weight)."""

import pytest

from tierwise.specs.compute import attention_generation_factor


def test_fa2_factor_from_the_papers():
    a100 = 1 / (1 / 0.73 - 312e12 / (512 * 108 * 1.41e9 * 16))
    h100 = 1 / (1 / 0.35 - 989e12 / (512 * 132 * 1.83e9 * 16))
    assert (a100, h100) == (pytest.approx(0.893, abs=1e-3), pytest.approx(0.424, abs=1e-3))
    assert attention_generation_factor("flash2", "ampere") == pytest.approx(a100 / h100, rel=1e-9)
    assert attention_generation_factor("sdpa", "ampere") == attention_generation_factor("flash2", "ampere")
    for family, generation in (("flash2", "hopper"), ("cudnn", "ampere"), ("cudnn", "blackwell"),
                               ("flash2", "blackwell")):
        assert attention_generation_factor(family, generation) == 1.0

