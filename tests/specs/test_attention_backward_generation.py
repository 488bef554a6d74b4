"""An attention kernel's backward by kernel family and generation (issue 29 item 2): the fitted
``attention_backward_ratio`` (the backward's matmul rate over the forward's) is the Hopper value, and a family's
backward on another generation runs at it times the ratio of that generation's measured backward-over-forward
matmul share to Hopper's, each from one benchmark run that timed both passes of one kernel (compute.yaml
``attention_kernels.<family>.backward_rate``; cuDNN 9.19 on H200 and GB200, torch's FlashAttention-2 backend on
H200 and B200; Ampere has no measurement and stays at 1). Only the backward moves: the forward keeps its own
generation factor, so a serving prefill (no backward) is unchanged (docs/compute.md "Each kernel family on each
generation")."""

import dataclasses

import numpy as np
import pytest

from tierwise.estimate.compute import compute_params, plan_attention_backward_factors
from tierwise.pricing.kernels import (
    ATTENTION_BACKWARD_FLOPS,
    attention_backward_factors,
    attention_time,
    compute_rates,
    layer_forward,
)
from tierwise.serve.kv import shape_of
from tierwise.serve.params import ServingParameters
from tierwise.serve.phases import layer_work
from tierwise.specs import catalog
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.compute import (
    BENCHMARK_BACKWARD_FLOPS,
    attention_backward_generation_factor,
    attention_generation_factor,
    compute_catalog,
)
from tierwise.specs.framework import ATTENTION_KERNELS as PLAN_KERNELS
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch

OVERLAP = {"flash2": {"hopper": 0.0, "blackwell": 0.0}, "cudnn": {"hopper": 1.0, "blackwell": 1.0}}
"""compute.yaml attention_kernels overlap (FA2 runs softmax and GEMMs one after the other, FA3 sec. 3.1)."""


def _ratio_from_yaml(entry: dict, overlap: float) -> float:
    """Backward over forward matmul share of one ``backward_rate`` entry, recomputed from the catalog's raw
    figures (datasheet peak in accelerators.yaml, SMs x clock x ex2 per clock in compute.yaml) with
    docs/compute.md's formula written out: per forward FLOP in units of 1/peak, ``E = peak / (512 x exp2)``,
    forward share ``1 / (1/f - (1 - overlap) E)``, backward (2.5x the FLOPs, one exp2 per score)
    ``1 / (1/b - (1 - overlap) E / 2.5)``."""
    part = compute_catalog()["accelerators"][entry["part"]]
    peak = float(catalog.entry("accelerators", entry["part"])["peak_dense_tflops"]["bf16"]) * 1e12
    exp2 = part["sms"] * part["clock_ghz"] * 1e9 * part["exp2_per_clock_per_sm"]
    f, b = entry["forward_tflops"] * 1e12 / peak, entry["backward_tflops"] * 1e12 / peak
    e = peak / (512 * exp2)
    fwd_share = 1 / (1 / f - (1 - overlap) * e)
    bwd_share = 1 / (1 / b - (1 - overlap) * e / 2.5)
    return bwd_share / fwd_share


@pytest.mark.parametrize("family", ["flash2", "cudnn"])
def test_each_backward_factor_is_its_catalog_measurements_ratio(family):
    measured = compute_catalog()["attention_kernels"][family]["backward_rate"]
    assert set(measured) == {"hopper", "blackwell"}  # Ampere: no published backward of the same benchmark
    for entry in measured.values():
        assert entry["source"] and entry["part"] and entry["backward_tflops"] < entry["forward_tflops"]
    ref = _ratio_from_yaml(measured["hopper"], OVERLAP[family]["hopper"])
    want = _ratio_from_yaml(measured["blackwell"], OVERLAP[family]["blackwell"]) / ref
    assert attention_backward_generation_factor(family, "blackwell") == pytest.approx(want, rel=1e-9)
    assert attention_backward_generation_factor(family, "hopper") == 1.0
    assert attention_backward_generation_factor(family, "ampere") == 1.0  # no measurement


def test_the_backward_factors_published_values():
    """docs/compute.md's worked numbers: cuDNN 9.19 (1402 / 1687) / (579 / 673) = 0.966 (full overlap: the
    measured rates' ratio itself); torch's FA2 backend 0.709 / 0.837 = 0.847 once the exp2 time is taken out."""
    assert attention_backward_generation_factor("cudnn", "blackwell") == pytest.approx((1402 / 1687) / (579 / 673),
                                                                                       rel=1e-12)
    assert attention_backward_generation_factor("cudnn", "blackwell") == pytest.approx(0.966, abs=1e-3)
    assert attention_backward_generation_factor("flash2", "blackwell") == pytest.approx(0.847, abs=1e-3)
    for generation in ("ampere", "hopper", "blackwell"):
        assert (attention_backward_generation_factor("sdpa", generation)
                == attention_backward_generation_factor("flash2", generation))
    assert attention_backward_generation_factor("cudnn", "rubin") == 1.0
    assert BENCHMARK_BACKWARD_FLOPS == ATTENTION_BACKWARD_FLOPS  # the benchmarks count the backward as priced


@pytest.mark.parametrize("part, generation", [("a100-sxm-80gb", "ampere"), ("h100-sxm", "hopper"), ("b200", "blackwell")])
def test_training_plans_carry_their_familys_backward_factor(part, generation):
    kernels = ["flash2", "triton", "cudnn", "flash3", "sdpa", "auto"]
    if generation != "hopper":
        kernels.remove("flash3")  # refused off Hopper (test_attention_generation.py)
    plans = PlanBatch.from_arrays(attention_kernel=[PLAN_KERNELS.index(k) for k in kernels])
    got = plan_attention_backward_factors(plans, generation)
    family = {"flash2": "flash2", "triton": "flash2", "cudnn": "cudnn", "flash3": "cudnn", "sdpa": "flash2",
              "auto": "flash2" if generation == "ampere" else "cudnn"}
    want = [attention_backward_generation_factor(family[k], generation) for k in kernels]
    assert got == pytest.approx(want, rel=1e-12)
    if generation == "blackwell":
        assert max(got) < 1.0
    else:
        assert np.all(got == 1.0)


def test_the_factor_moves_the_backward_and_not_the_forward():
    """attention_time: the backward's matmul time divides by the factor (cuDNN on Blackwell: max with the
    exp2 time, full overlap), the forward is untouched; layer_forward (training and serving alike) passes the
    LayerWork's factor only to the backward."""
    acc = load_accelerator("b200")
    rates = compute_rates(acc, compute_params())
    p = rates.params

    class Heads:
        qk_head_dim = v_head_dim = 128

    flops, s, eff = np.array(4e12), 8192.0, 0.6
    fwd1, bwd1 = attention_time(flops, Heads, rates, seq_len=s, eff=eff, overlap=1.0)
    fwd2, bwd2 = attention_time(flops, Heads, rates, seq_len=s, eff=eff, overlap=1.0, backward_factor=0.8)
    assert fwd2 == fwd1
    mm = 2.5 * flops / (rates.bf16_peak * eff * s / (s + p["attention_half_seq_tokens"]) * rates.clock_factor
                        * p["attention_backward_ratio"])
    t_exp = flops / 512 / rates.exp2_per_s
    assert bwd1 == pytest.approx(max(mm, t_exp), rel=1e-12)
    assert bwd2 == pytest.approx(max(mm / 0.8, t_exp), rel=1e-12)

    model = load_model("llama3.1-8b")
    work = layer_work(model, rates, "bf16", ServingParameters(attention_kernel="cudnn"), tp=1, ep=1,
                      tokens=8192.0, seq=8192.0)
    factor = attention_backward_generation_factor("cudnn", "blackwell")
    assert np.all(work.attention_backward_factor == pytest.approx(factor, rel=1e-12))
    assert np.all(attention_backward_factors(["cudnn"], np.zeros(1, dtype=np.int64), "blackwell") == factor)
    shape = shape_of(model)
    with_f = layer_forward(model, shape, rates, work)
    without = layer_forward(model, shape, rates, dataclasses.replace(work, attention_backward_factor=1.0))
    assert np.array_equal(with_f.attention, without.attention)  # the forward (a serving prefill) does not move
    assert np.array_equal(with_f.dense, without.dense)
    assert np.all(with_f.attention_backward > without.attention_backward)
    assert attention_generation_factor("cudnn", "blackwell") != factor  # the forward has a factor of its own
