"""`tierwise calibrate` of one-GPU results (`measure gemm`, `measure hbm` --json): the accelerator's large-GEMM
fraction of peak goes into the cluster file (`compute:`) and the estimator uses it for that cluster.

The rows below are in the exact format `tierwise measure gemm/hbm --json` writes (tierwise/measure/gpu.py);
their numbers are illustrative H100-class figures, not a recording (no GPU was available to record one)."""

import json

import pytest

from tierwise.errors import MeasureError, SpecError
from tierwise.estimate import estimate
from tierwise.measure.calibrate import calibrate, write_yaml
from tierwise.specs.cluster import cluster_from_mapping, load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch
from tierwise.specs.plan_mapping import plan_from_mapping


def gemm_row(m, n, k, tflops, dtype="bfloat16"):
    flops = 2.0 * m * n * k
    return {"m": m, "n": n, "k": k, "dtype": dtype, "time_s": flops / (tflops * 1e12),
            "flops_per_s": tflops * 1e12, "device": "NVIDIA H100 80GB HBM3"}


GEMM = [gemm_row(1024, 1024, 1024, 310.0), gemm_row(8192, 8192, 8192, 702.0),
        gemm_row(8192, 28672, 8192, 731.5), gemm_row(256, 8192, 8192, 402.0)]
HBM = [{"kernel": "copy", "size_bytes": 2**30, "bytes_moved": 2**31, "time_s": 7.1e-4, "bytes_per_s": 3.02e12,
        "device": "NVIDIA H100 80GB HBM3"},
       {"kernel": "triad", "size_bytes": 2**30, "bytes_moved": 3 * 2**30, "time_s": 1.05e-3,
        "bytes_per_s": 3.07e12, "device": "NVIDIA H100 80GB HBM3"}]


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return str(path)


def test_gemm_result_writes_the_large_gemm_fraction_and_the_estimator_uses_it(tmp_path):
    result = calibrate([_write(tmp_path, "gemm.json", GEMM)], cluster="dgx-h100")
    # the best GEMM with every dimension >= 4096 (not the small-batch one), over H100's 989 TFLOP/s dense BF16
    assert result.document["compute"] == {"matmul_efficiency_max": pytest.approx(731.5 / 989.0, rel=1e-3)}
    assert result.document["base"] == "dgx-h100" and "fitted" not in result.document
    assert "matmul_efficiency_max" in result.device[0]
    out = tmp_path / "calibrated.yaml"
    write_yaml(result.document, out)
    calibrated = load_cluster(str(out))
    model = load_model("llama3.1-8b")
    plan = PlanBatch.from_plans([plan_from_mapping({"global_batch_size": 64, "seq_length": 4096}, num_gpus=8)])
    measured = estimate(model, calibrated, plan)
    shipped = estimate(model, load_cluster("dgx-h100"), plan)
    same = estimate(model, load_cluster("dgx-h100"), plan,
                    params={"matmul_efficiency_max": calibrated.compute["matmul_efficiency_max"]})
    assert float(measured.step_time_s[0]) == pytest.approx(float(same.step_time_s[0]), rel=1e-12)
    assert float(measured.step_time_s[0]) != pytest.approx(float(shipped.step_time_s[0]), rel=1e-6)
    from tierwise.estimate.scenario import estimate_scenario, load_scenario

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"model: llama3.1-8b\ncluster: {out}\nnum_gpus: 8\n"
                        "plan: {global_batch_size: 64, seq_length: 4096}\n")
    doc = estimate_scenario(load_scenario(str(scenario)))
    assert doc["cluster_compute"] == {"matmul_efficiency_max": calibrated.compute["matmul_efficiency_max"]}


def test_hbm_result_is_written_as_the_streaming_fraction(tmp_path):
    """``measure hbm`` replaces the catalog's streaming-HBM fraction for this cluster (docs/compute.md): the
    estimator's memory-bound rate becomes datasheet x measured fraction x the fitted residual."""
    result = calibrate([_write(tmp_path, "hbm.json", HBM)], cluster="dgx-h100")
    assert result.document["compute"] == {"memory_bound_efficiency": pytest.approx(3.07 / 3.35, rel=2e-3)}
    assert "91.6%" in result.device[0] and "memory_bound_efficiency" in result.device[0]  # 3.07 of 3.35 TB/s
    from tierwise.estimate.compute import memory_bound_bytes_per_s
    from tierwise.specs.cluster import load_cluster

    acc = load_cluster("dgx-h100").accelerator
    measured = memory_bound_bytes_per_s(acc, result.document["compute"])
    from tierwise.estimate.compute import compute_params

    assert measured == pytest.approx(acc.hbm_bytes_per_s * 3.07 / 3.35 * compute_params()["memory_bound_residual"],
                                     rel=2e-3)


@pytest.mark.parametrize("rows, kwargs, needle", [
    (GEMM, {}, "pass --cluster"),
    ([gemm_row(1024, 1024, 1024, 300.0)], {"cluster": "dgx-h100"}, "every dimension >= 4096"),
    ([gemm_row(8192, 8192, 8192, 1500.0)], {"cluster": "dgx-h100"}, "is --cluster the cluster"),
])
def test_bad_device_input_is_one_line(tmp_path, rows, kwargs, needle):
    with pytest.raises(MeasureError, match=needle):
        calibrate([_write(tmp_path, "gemm.json", rows)], **kwargs)


@pytest.mark.parametrize("compute, needle", [({"attention_efficiency": 0.5}, "unknown"),
                                             ({"matmul_efficiency_max": 1.5}, "matmul_efficiency_max")])
def test_cluster_compute_block_is_checked(compute, needle):
    with pytest.raises(SpecError, match=needle):
        cluster_from_mapping({"base": "dgx-h100", "compute": compute}, origin="test")
