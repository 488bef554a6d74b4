"""`tierwise measure compute` on the CPU (small shapes): the profile it writes, `--compute FILE` of estimate, plan
and serve, and the bad inputs (one line, exit code 2)."""

import contextlib
import io
import json

import numpy as np
import pytest
import yaml

from tierwise.cli import main
from tierwise.errors import SpecError
from tierwise.estimate.compute import compute_params
from tierwise.measure.compute import (
    ComputeBench,
    attention_flops,
    compute_block,
    finish_profile,
    predictions,
    profile_target,
)
from tierwise.pricing.kernels import attention_time, compute_rates, gemm_peak, gemm_time
from tierwise.specs.cluster import load_cluster
from tierwise.specs.compute import attention_generation_factor, attention_kernel_overlap
from tierwise.specs.compute_profile import compute_profile_in_force, device_matches
from tierwise.specs.parameters import load_parameters
from tierwise.workload.flops import Gemm

pytest.importorskip("torch")

H100 = "NVIDIA H100 80GB HBM3"
SCENARIO = ("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\n"
            "plan: {global_batch_size: 64, seq_length: 4096, recompute: none}\n")


def _cli(*args):
    """(exit code, stdout, stderr) of ``tierwise ARGS`` run through :func:`tierwise.cli.main` in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    out = tmp_path_factory.mktemp("compute") / "profile.yaml"
    code, stdout, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--out", str(out),
                                "--iters", "1", "--warmup", "0", "--json")
    assert code == 0, stderr
    return out, json.loads(stdout), stderr


def _profile(tmp_path, name, compute, device=H100):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"base": "dgx-h100", "compute": compute,
                                    "compute_measured_on": {"device": device, "torch": "2.13.0"}}))
    return str(path)


def _estimate(tmp_path, *extra):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    code, stdout, stderr = _cli("estimate", str(scenario), "--json", *extra)
    assert code == 0, stderr
    return json.loads(stdout)["results"][0], stderr


def test_cpu_run_measures_every_kernel_family_and_writes_a_profile(cpu_profile):
    out, doc, stderr = cpu_profile
    kernels = {r["kernel"] for r in doc["rows"]}
    assert kernels >= {"gemm", "hbm-copy", "rmsnorm", "adamw", "attention-forward", "attention-backward"}
    assert "MATH" in {r.get("backend") for r in doc["rows"]}  # the CPU's SDPA math backend
    assert all(r["time_s"] > 0 for r in doc["rows"])
    written = yaml.safe_load(out.read_text())
    assert written["base"] == "dgx-h100"
    assert written["compute_measured_on"]["torch"] == doc["device"]["torch"]
    assert set(written["compute"]) >= {"matmul_efficiency_max", "memory_bound_efficiency"}
    # the GEMM fraction is the best BF16 GEMM measured over H100's 989 TFLOP/s dense BF16 peak
    best = max(r["flops_per_s"] for r in doc["rows"] if r["kernel"] == "gemm" and r["dtype"] == "bf16")
    assert written["compute"]["matmul_efficiency_max"] == pytest.approx(best / 989e12, rel=2e-3)
    # a CPU profiled for an H100 cluster: said once, on stderr (stdout holds the JSON)
    assert "measured on cpu" in stderr and "h100-sxm" in stderr
    # predicted vs measured for every kernel the pricing has a family for
    assert all(p["predicted_s"] > 0 for p in doc["predictions"] if p["backend"] != "MATH")


def test_estimate_reads_the_cpu_profile_as_cluster_and_as_compute(cpu_profile, tmp_path):
    out, _, _ = cpu_profile
    shipped, _ = _estimate(tmp_path)
    with_profile, stderr = _estimate(tmp_path, "--compute", str(out))
    assert "measured on cpu" in stderr
    # a CPU reaches a few 1e-4 of an H100's peak: the step is thousands of times slower, as its numbers say
    assert with_profile["step_time_s"] > 100 * shipped["step_time_s"]
    assert with_profile["cluster_compute"]["matmul_efficiency_max"] == pytest.approx(
        yaml.safe_load(out.read_text())["compute"]["matmul_efficiency_max"])
    as_cluster = tmp_path / "as_cluster.yaml"
    as_cluster.write_text(SCENARIO.replace("cluster: dgx-h100", f"cluster: {out}"))
    code, stdout, _ = _cli("estimate", str(as_cluster), "--json")
    assert code == 0
    assert json.loads(stdout)["results"][0]["step_time_s"] == pytest.approx(with_profile["step_time_s"], rel=1e-9)


def test_halving_the_matmul_fraction_doubles_gemm_time(tmp_path):
    full = _profile(tmp_path, "full.yaml", {"matmul_efficiency_max": 0.8, "memory_bound_efficiency": 0.9})
    half = _profile(tmp_path, "half.yaml", {"matmul_efficiency_max": 0.4, "memory_bound_efficiency": 0.9})
    times = []
    for path in (full, half):
        with compute_profile_in_force(path) as prof:
            cluster = load_cluster("dgx-h100")
        assert prof.warnings == []  # measured on an H100: no warning
        rates = compute_rates(cluster.accelerator, {**compute_params(), **cluster.compute})
        peak, _ = gemm_peak(rates, np.array([False]))
        t, _ = gemm_time(Gemm("fc1", 14336, 4096, "out"), np.array([8192.0]), 1, 1, peak, rates.params,
                         hbm=rates.hbm)
        times.append(float(t[0]))
    assert times[1] / times[0] == pytest.approx(2.0, rel=0.03)  # the memory-weight term is a few percent
    a, _ = _estimate(tmp_path, "--compute", full)
    b, _ = _estimate(tmp_path, "--compute", half)
    assert 1.3 < b["breakdown"]["compute_s"] / a["breakdown"]["compute_s"] < 2.0  # GEMMs are most of it


def test_attention_efficiency_is_the_roofline_inverted():
    cluster = load_cluster("dgx-h100")
    rates = compute_rates(cluster.accelerator, compute_params())

    class Heads:
        qk_head_dim = v_head_dim = 128

    flops = attention_flops(4, 16, 4096, 128)
    for family, eff in (("flash2", 0.37), ("cudnn", 0.55)):
        fwd, _ = attention_time(np.array(flops), Heads, rates, seq_len=4096, eff=eff,
                                overlap=attention_kernel_overlap(family, "hopper"))
        row = {"kernel": "attention-forward", "family": family, "flops": flops, "time_s": float(fwd), "seq": 4096,
               "head_dim": 128}
        assert compute_block([row], cluster.accelerator, parameters=load_parameters())[f"attention_efficiency_{family}"] == pytest.approx(
            eff, rel=1e-6)


class _Heads128:
    qk_head_dim = v_head_dim = 128


@pytest.mark.parametrize("name", ["dgx-a100", "dgx-b200"])
def test_a_profile_off_hopper_round_trips_through_the_generation_factor(name):
    """The profile's attention keys are Hopper-equivalent (measured over the family's generation factor) and the
    pricing multiplies the factor back in, so an estimate on the profiled part prices the measured kernel at its
    measured time (issue 29 item 2: FA2 x2.1 on Ampere and x0.55 on Blackwell, cuDNN x1.13 and x0.96)."""
    cluster = load_cluster(name)
    rates = compute_rates(cluster.accelerator, compute_params())
    flops = attention_flops(4, 16, 4096, 128)
    for family, measured_eff in (("flash2", 0.3), ("cudnn", 0.5)):
        factor = attention_generation_factor(family, cluster.accelerator.generation)
        assert factor != 1.0
        fwd, _ = attention_time(np.array(flops), _Heads128, rates, seq_len=4096, eff=measured_eff,
                                overlap=attention_kernel_overlap(family, cluster.accelerator.generation))
        row = {"kernel": "attention-forward", "family": family, "flops": flops, "time_s": float(fwd), "seq": 4096,
               "head_dim": 128, "dtype": "bf16", "shape": "4x16x4096x128", "backend": family}
        block = compute_block([row], cluster.accelerator, parameters=load_parameters())
        assert block[f"attention_efficiency_{family}"] == pytest.approx(measured_eff / factor, rel=1e-6)
        (pred,) = predictions([row], cluster.accelerator, block, parameters=load_parameters())
        assert pred["predicted_s"] == pytest.approx(float(fwd), rel=1e-6)


def test_a_backward_row_on_blackwell_is_priced_with_the_backward_factor():
    """measure compute's attention-backward rows (timed with their forward) are predicted as the estimator prices
    them: the family's backward generation factor on the backward alone (cuDNN 0.966 on Blackwell)."""
    from tierwise.specs.compute import attention_backward_generation_factor

    cluster = load_cluster("dgx-b200")
    rates = compute_rates(cluster.accelerator, compute_params())
    flops = attention_flops(4, 16, 4096, 128)
    eff = rates.params["attention_efficiency_cudnn"] * attention_generation_factor("cudnn", "blackwell")
    factor = attention_backward_generation_factor("cudnn", "blackwell")
    assert factor < 1.0
    fwd, bwd = attention_time(np.array(flops), _Heads128, rates, seq_len=4096, eff=eff, overlap=1.0,
                              backward_factor=factor)
    _, bwd_hopper_ratio = attention_time(np.array(flops), _Heads128, rates, seq_len=4096, eff=eff, overlap=1.0)
    row = {"kernel": "attention-backward", "family": "cudnn", "flops": 3.5 * flops, "time_s": float(fwd + bwd),
           "seq": 4096, "head_dim": 128, "dtype": "bf16", "shape": "4x16x4096x128", "backend": "cudnn"}
    (pred,) = predictions([row], cluster.accelerator, parameters=load_parameters())
    assert pred["predicted_s"] == pytest.approx(float(fwd + bwd), rel=1e-9)
    assert pred["predicted_s"] > float(fwd + bwd_hopper_ratio)


def test_profile_target_refuses_another_part_under_strict():
    from tierwise.errors import MeasureError

    bench = ComputeBench(device="cpu", small=True)
    target = profile_target(bench, "dgx-h100")
    assert target.warnings and "not on the cluster's h100-sxm" in target.warnings[0]
    with pytest.raises(MeasureError, match="--strict"):
        profile_target(bench, "dgx-h100", strict=True)
    with pytest.raises(MeasureError, match="nothing was measured"):
        finish_profile(bench, target, [])


def test_device_names_match_their_catalog_part():
    assert device_matches(H100, "h100-sxm")
    assert device_matches("NVIDIA GB200", "gb200")
    assert device_matches("NVIDIA GB200", "b200")  # the B200 die: its token is in the name, accepted
    assert device_matches("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb")
    assert not device_matches("NVIDIA H200", "h100-sxm")
    assert not device_matches("cpu (x86_64)", "h100-sxm")
    assert not device_matches("", "h100-sxm")


@pytest.mark.parametrize("compute, needle", [
    ({"matmul_efficiency_max": 0}, "matmul_efficiency_max"),
    ({"matmul_efficiency_max": -0.5}, "matmul_efficiency_max"),
    ({}, "no compute: rates"),
    ({"matmul_efficiency_max": 1.7}, "matmul_efficiency_max"),
    ({"tflops": 0.5}, "tflops"),
])
def test_bad_profiles_are_one_line_exit_2(tmp_path, compute, needle):
    path = _profile(tmp_path, "bad.yaml", compute)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    code, stdout, stderr = _cli("estimate", str(scenario), "--compute", path)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and needle in stderr and "Traceback" not in stderr
    with pytest.raises(SpecError), compute_profile_in_force(path):
        pass


def test_strict_refuses_a_profile_of_another_part_in_estimate_plan_and_serve(tmp_path):
    path = _profile(tmp_path, "h200.yaml", {"matmul_efficiency_max": 0.8}, device="NVIDIA H200")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    for args in (("estimate", str(scenario)),
                 ("plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--top", "1"),
                 ("serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1")):
        code, _, stderr = _cli(*args, "--compute", path, "--strict")
        assert code == 2 and "NVIDIA H200" in stderr and len(stderr.strip().splitlines()) == 1, (args, stderr)
    code, _, stderr = _cli("serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1",
                           "--compute", path, "--json")
    assert code == 0 and stderr.count("warning:") == 1


def test_serve_plan_takes_the_profile(tmp_path):
    """serve-plan --compute: a profile of another part is refused under --strict (one line, exit 2); a profile
    with half the GEMM fraction gives a plan with fewer output tokens/s per GPU."""
    other = _profile(tmp_path, "h200.yaml", {"matmul_efficiency_max": 0.8}, device="NVIDIA H200")
    args = ("serve-plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--top", "1",
            "--max-tp", "2", "--modes", "aggregated")
    code, _, stderr = _cli(*args, "--compute", other, "--strict")
    assert code == 2 and "NVIDIA H200" in stderr and len(stderr.strip().splitlines()) == 1, stderr
    best = []
    for eff in (0.8, 0.08):
        path = _profile(tmp_path, f"p{eff}.yaml", {"matmul_efficiency_max": eff, "memory_bound_efficiency": 0.9})
        code, stdout, stderr = _cli(*args, "--compute", path, "--json")
        assert code == 0, stderr
        best.append(json.loads(stdout)["best"][0])
    # prefill is compute-bound here: a tenth of the GEMM rate makes the time to first token longer
    assert best[1]["ttft_s"] > 2 * best[0]["ttft_s"]
    assert best[1]["output_tokens_per_s_per_gpu"] < best[0]["output_tokens_per_s_per_gpu"]


def test_a_backend_torch_lacks_is_one_line_exit_2():
    code, stdout, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--backend", "warp-drive",
                                "--iters", "1", "--warmup", "0")
    assert code == 2 and "WARP-DRIVE" in stderr and len(stderr.strip().splitlines()) == 1


def test_attention_backward_is_two_and_a_half_forwards_at_ratio_one():
    """FA2 sec. 3.1.2: five backward GEMMs to two forward; at a per-FLOP ratio of 1 and no exp2 cost the backward
    takes 2.5x the forward, and the shipped ratio is the old 2x-count fit rescaled (0.3136 x 2.5 / 2)."""
    import dataclasses

    cluster = load_cluster("dgx-h100")
    rates = compute_rates(cluster.accelerator, compute_params())
    assert rates.params["attention_backward_ratio"] == pytest.approx(0.3136 * 2.5 / 2)
    ideal = dataclasses.replace(rates, params={**rates.params, "attention_backward_ratio": 1.0},
                                exp2_per_s=float("inf"))

    class Heads:
        qk_head_dim = v_head_dim = 128

    fwd, bwd = attention_time(np.array(1e12), Heads, ideal, seq_len=4096, eff=0.5, overlap=1.0)
    assert float(bwd) / float(fwd) == pytest.approx(2.5, rel=1e-12)


def test_ctrl_c_keeps_what_was_measured(tmp_path, monkeypatch):
    """Interrupted after the GEMMs: the profile holds what was measured (the GEMM fraction, no HBM rate)."""
    import tierwise.measure.compute as mc

    def interrupted(bench, rows, on_row=None):
        rows.append({"kernel": "gemm", "shape": "512x512x512", "dtype": "bf16", "time_s": 0.01, "flops": 2.0 * 512**3,
                     "bytes": 0.0, "flops_per_s": 2.0 * 512**3 / 0.01, "bytes_per_s": None, "m": 512, "n": 512,
                     "k": 512, "use": "training", "device": "cpu (x86_64)"})
        raise KeyboardInterrupt

    monkeypatch.setattr(mc, "run_compute", interrupted)
    out = tmp_path / "partial.yaml"
    code, stdout, stderr = _cli("measure", "compute", "--cpu", "--cluster", "dgx-h100", "--out", str(out))
    assert code == 130 and "kernels measured are in" in stderr
    written = yaml.safe_load(out.read_text())
    assert written["compute"] == {"matmul_efficiency_max": pytest.approx(2.0 * 512**3 / 0.01 / 989e12, rel=1e-3)}
    assert len(written["compute_rows"]) == 1
