"""measure gemm / hbm and the NCCL path: exercised only where a GPU exists (skipped otherwise)."""

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'tierwise[measure]')")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible on this machine")


@needs_gpu
def test_gemm_reports_flops_by_shape():
    from tierwise.measure.gpu import measure_gemm

    rows = measure_gemm(shapes=((1024, 1024, 1024), (4096, 4096, 4096)), iters=5, warmup=2, repeats=3)
    assert [(r["m"], r["n"], r["k"]) for r in rows] == [(1024, 1024, 1024), (4096, 4096, 4096)]
    for r in rows:
        assert r["flops_per_s"] == pytest.approx(2 * r["m"] * r["n"] * r["k"] / r["time_s"])
    assert rows[1]["flops_per_s"] > rows[0]["flops_per_s"]  # larger matmuls fill the GPU better


@needs_gpu
def test_hbm_triad_moves_three_arrays():
    from tierwise.measure.gpu import measure_hbm

    rows = {r["kernel"]: r for r in measure_hbm(size_bytes=256 * 2**20, iters=5, warmup=2, repeats=3)}
    assert rows["copy"]["bytes_moved"] == 2 * rows["copy"]["size_bytes"]
    assert rows["triad"]["bytes_moved"] == 3 * rows["triad"]["size_bytes"]
    assert rows["copy"]["bytes_per_s"] > 1e11  # any datacenter GPU's HBM exceeds 100 GB/s


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="the NCCL collective path needs 2 GPUs")
def test_nccl_all_reduce_is_correct():
    from tierwise.measure.bench import BenchConfig, run_collectives

    rows = run_collectives(BenchConfig(ops=("all-reduce", "all-gather"), sizes_bytes=(2**20,), iters=5,
                                       backend="nccl"), 2)
    assert all(r["wrong"] == 0 for op_rows in rows.values() for r in op_rows)
