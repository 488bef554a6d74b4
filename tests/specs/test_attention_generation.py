"""An attention kernel's efficiency by generation and kernel (issue 29): FlashAttention-2 reaches 73% of A100's
peak and 35% of H100's; with each part's exp2 time taken out the matmul shares are 0.893 and 0.424, so a Hopper
efficiency is 2.1x on Ampere; families without a measurement on a generation keep factor 1. The pricing applies
it (pricing/kernels.py attention_kernel_rates; docs/compute.md, docs/validation.md "Issue 29")."""

import numpy as np
import pytest

from tierwise.estimate.compute import compute_params
from tierwise.pricing.kernels import attention_kernel_rates, compute_rates
from tierwise.specs.accelerator import load_accelerator
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


@pytest.mark.parametrize("part, generation", [("a100-sxm-80gb", "ampere"), ("h100-sxm", "hopper")])
def test_the_pricing_applies_the_kernel_and_generation_factors(part, generation):
    params = compute_params()
    rates = compute_rates(load_accelerator(part), params)
    kernels = ["flash2", "triton", "cudnn", "sdpa"]
    eff, overlap = attention_kernel_rates(kernels, np.arange(4), rates)
    fa2 = params["attention_efficiency_flash2"]
    assert eff[0] == pytest.approx(fa2 * attention_generation_factor("flash2", generation), rel=1e-9)
    assert eff[1] == eff[0]  # Triton flash attention is priced as FA2 (docs/compute.md: no figure of its own yet)
    assert eff[2] == pytest.approx(params["attention_efficiency_cudnn"], rel=1e-9)  # no cuDNN generation data
    assert eff[3] == eff[0]  # SDPA's flash backend is FA2
    assert overlap[1] == overlap[0] == 0.0
    if generation == "ampere":
        assert eff[0] > 2 * fa2  # FA2 reaches a larger share of A100's peak than of H100's
