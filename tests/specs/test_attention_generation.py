"""An attention kernel's efficiency by kernel family and generation (issue 29): each family's measured forward
share of a part's dense BF16 peak, with each part's exp2 time taken out under the family's overlap, gives its
matmul share; the ratio to the Hopper share scales the fitted (Hopper) efficiency. FlashAttention-2: A100 0.73
and H100 0.35 of peak (the FA2 and FA3 papers), B200 425 TFLOP/s (cudnn-frontend's training benchmark); cuDNN:
A100 80GB PCIe, H200 and B200 in one cudnn-frontend benchmark and cuDNN release. The pricing applies it
(pricing/kernels.py attention_kernel_rates; docs/compute.md "Each kernel family on each generation")."""

import numpy as np
import pytest

from tierwise.errors import SpecError, TierwiseError
from tierwise.estimate.compute import compute_params
from tierwise.pricing.kernels import attention_kernel_rates, compute_rates, resolved_attention_kernel
from tierwise.specs import catalog
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.compute import attention_generation_factor, compute_catalog, matmul_share

GENERATIONS = ("ampere", "hopper", "blackwell")


def _share_from_yaml(entry: dict, overlap: float) -> float:
    """The matmul share of one ``forward_fraction`` entry, recomputed here from the catalog's raw figures (the
    part's datasheet peak in accelerators.yaml; SMs, clock, ex2 per clock and rated power in compute.yaml) with
    docs/compute.md's formula written out, not through the library's helpers."""
    part = compute_catalog()["accelerators"][entry["part"]]
    peak = float(catalog.entry("accelerators", entry["part"])["peak_dense_tflops"]["bf16"]) * 1e12
    clock = (float(entry["power_w"]) / part["rated_power_w"]) ** (1 / 3) if "power_w" in entry else 1.0
    peak, exp2 = peak * clock, part["sms"] * part["clock_ghz"] * 1e9 * clock * part["exp2_per_clock_per_sm"]
    fraction = entry["tflops"] * 1e12 / peak if "tflops" in entry else entry["fraction"]
    t, e = 1 / fraction, peak / (512 * exp2)
    assert t - (1 - overlap) * e >= e  # every catalog measurement is matmul-bound under its overlap
    return 1 / (t - (1 - overlap) * e)


@pytest.mark.parametrize("family", ["flash2", "cudnn"])
def test_each_factor_is_its_catalog_measurements_ratio(family):
    measured = compute_catalog()["attention_kernels"][family]["forward_fraction"]
    assert set(measured) == set(GENERATIONS)
    for entry in measured.values():
        assert entry["source"] and entry["part"]
    overlap = {"flash2": {g: 0.0 for g in GENERATIONS},
               "cudnn": {"ampere": 0.0, "hopper": 1.0, "blackwell": 1.0}}[family]  # compute.yaml / FA3 sec. 3
    ref = _share_from_yaml(measured["hopper"], overlap["hopper"])
    for generation in GENERATIONS:
        want = _share_from_yaml(measured[generation], overlap[generation]) / ref
        assert attention_generation_factor(family, generation) == pytest.approx(want, rel=1e-9)
    assert attention_generation_factor(family, "hopper") == 1.0


def test_the_factors_published_values():
    """The worked numbers of docs/compute.md: FA2 0.893 / 0.424 / 0.233 matmul shares, cuDNN 0.776 / 0.687 /
    0.661 (full overlap on Hopper and Blackwell: the measured share itself)."""
    assert attention_generation_factor("flash2", "ampere") == pytest.approx(2.105, abs=1e-3)
    assert attention_generation_factor("flash2", "blackwell") == pytest.approx(0.549, abs=1e-3)
    assert attention_generation_factor("cudnn", "ampere") == pytest.approx(1.129, abs=1e-3)
    assert attention_generation_factor("cudnn", "blackwell") == pytest.approx(0.962, abs=1e-3)
    for generation in GENERATIONS:
        assert attention_generation_factor("sdpa", generation) == attention_generation_factor("flash2", generation)
    assert attention_generation_factor("cudnn", "rubin") == 1.0  # no measurement: the Hopper value


def test_matmul_share_inverts_the_pricing_and_refuses_an_exp2_bound_measurement():
    peak, exp2 = 989e12, 132 * 1.83e9 * 16
    e = peak / (512 * exp2)
    for overlap in (0.0, 0.5, 1.0):
        m = matmul_share(0.6, peak, exp2, overlap)
        t = max(1 / m, e) + (1 - overlap) * min(1 / m, e)  # pricing/kernels.py overlapped, per FLOP x peak
        assert t == pytest.approx(1 / 0.6, rel=1e-12)
    with pytest.raises(SpecError, match="exp2 bound"):
        matmul_share(1 / e, peak, exp2, 1.0)


@pytest.mark.parametrize("part, generation", [("a100-sxm-80gb", "ampere"), ("h100-sxm", "hopper"), ("b200", "blackwell")])
def test_the_pricing_applies_the_kernel_and_generation_factors(part, generation):
    params = compute_params()
    rates = compute_rates(load_accelerator(part), params)
    kernels = ["flash2", "triton", "cudnn", "sdpa"]
    eff, overlap = attention_kernel_rates(kernels, np.arange(4), rates)
    fa2 = params["attention_efficiency_flash2"]
    assert eff[0] == pytest.approx(fa2 * attention_generation_factor("flash2", generation), rel=1e-9)
    assert eff[1] == eff[0]  # Triton flash attention is priced as FA2 (docs/compute.md: no figure of its own yet)
    assert eff[2] == pytest.approx(params["attention_efficiency_cudnn"] * attention_generation_factor("cudnn", generation),
                                   rel=1e-9)
    assert eff[3] == eff[0]  # SDPA's flash backend is FA2
    assert overlap[1] == overlap[0] == 0.0
    if generation == "ampere":
        assert eff[0] > 2 * fa2  # FA2 reaches a larger share of A100's peak than of H100's
    if generation == "blackwell":
        assert eff[0] < 0.6 * fa2 and eff[2] < params["attention_efficiency_cudnn"]


@pytest.mark.parametrize("generation", ["ampere", "blackwell"])
def test_flash3_off_hopper_is_refused_with_the_kernels_that_run(generation):
    with pytest.raises(SpecError, match=rf"attention_kernel='flash3' runs only on hopper .*{generation}.*cudnn"):
        resolved_attention_kernel("flash3", generation)
    assert resolved_attention_kernel("flash3", "hopper") == "cudnn"
    assert resolved_attention_kernel("flash3", "") == "cudnn"  # a part of unknown generation: not refused


def test_flash3_on_an_a100_cluster_is_one_clear_error_in_training_and_serving():
    from tierwise.estimate.scenario import estimate_scenario, scenario_from_mapping
    from tierwise.serve.api import ServeConfig, serve_estimate

    sc = scenario_from_mapping({"model": "llama3.1-8b", "cluster": "dgx-a100", "num_gpus": 8,
                                "plan": {"attention_kernel": "flash3", "global_batch_size": 8, "seq_length": 4096}})
    with pytest.raises(TierwiseError, match="flash3.*ampere"):
        estimate_scenario(sc)
    with pytest.raises(TierwiseError, match="flash3.*blackwell"):
        serve_estimate(ServeConfig(model="llama3.1-8b", cluster="dgx-b200", num_gpus=1, attention_kernel="flash3"))
