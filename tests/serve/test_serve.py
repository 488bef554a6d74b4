"""Serving model: KV formulas against worked figures, invariants of the phases, the CLI documents."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tierwise.errors import TierwiseError
from tierwise.serve import ServeConfig, compare_attention, kv_bytes_per_token, serve_estimate
from tierwise.serve.kv import kv_fraction_per_gpu, mha_equivalent
from tierwise.specs.model import load_model

KEYS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_s", "tpot_s", "batch", "kv_bytes_per_token",
        "kv_cache_bytes_per_gpu", "max_concurrency", "prefill_bound", "decode_bound", "kv_transfer_s",
        "kv_transfer_tier", "assumed")


@pytest.mark.parametrize(("name", "bf16"), [("llama3.1-70b", 327_680), ("llama2-70b", 327_680),
                                            ("llama3.1-405b", 516_096), ("llama3.1-8b", 131_072),
                                            ("mixtral-8x7b", 131_072), ("gpt-j-6b", 458_752),
                                            ("deepseek-v3", 70_272)])
def test_kv_bytes_per_token_worked_figures(name, bf16):
    m = load_model(name)
    assert kv_bytes_per_token(m, "bf16") == bf16
    assert kv_bytes_per_token(m, "fp8") == bf16 / 2


def test_mooncake_40_gib_for_128k_tokens_of_llama3_70b():
    total = 131072 * kv_bytes_per_token(load_model("llama3.1-70b"), "bf16")
    assert total / 2**30 == pytest.approx(40.0)


def test_mla_replicated_on_every_tp_rank_gqa_split_until_kv_heads():
    ds, ll = load_model("deepseek-v3"), load_model("llama3.1-70b")
    assert kv_fraction_per_gpu(ds, [1, 8, 16]).tolist() == [1.0, 1.0, 1.0]
    assert kv_fraction_per_gpu(ll, [1, 8, 16]).tolist() == [1.0, 0.125, 0.125]
    assert kv_bytes_per_token(mha_equivalent(ds), "bf16") == 4_997_120  # inference-notes section 2


def _cfg(**kw):
    base = dict(model="llama3.1-70b", cluster="dgx-h100", num_gpus=8, tp=8, precision="fp8", input_len=2000,
                output_len=256)
    return ServeConfig(**{**base, **kw})


def test_document_has_stable_keys_and_assumed():
    doc = serve_estimate(_cfg())
    for k in KEYS:
        assert k in doc
    assert doc["kv_transfer_tier"] is None
    assert any("kv_precision fp8" in a for a in doc["assumed"])
    assert doc["kv_bytes_per_token"] == 163_840
    json.dumps(doc)


def test_kv_transfer_by_tier_ordered_and_adds_ttft():
    """Disaggregated beside aggregated: NVLink < 400G RDMA < TCP, and whole transfers add to TTFT."""
    docs = {link: serve_estimate(_cfg(num_gpus=None, tp=None, prefill_gpus=4, decode_gpus=4, prefill_tp=4,
                                      decode_tp=4, kv_link=link, kv_streamed=False))
            for link in ("scale_up", "scale_out", "tcp")}
    t = [docs[k]["kv_transfer_s"] for k in ("scale_up", "scale_out", "tcp")]
    assert t[0] < t[1] < t[2]
    # 2,000 tokens of FP8 KV (328 MB) from 4 ranks: each sends 82 MB; over one 400G NIC (46 GB/s) ~1.8 ms
    assert 1.2e-3 < docs["scale_out"]["kv_transfer_s"] < 2.5e-3
    for k in docs:
        assert docs[k]["kv_transfer_tier"] == k
        assert docs[k]["ttft_s"] >= docs[k]["phases"]["prefill_s"] + docs[k]["kv_transfer_s"] * 0.999
    streamed = serve_estimate(_cfg(num_gpus=None, tp=None, prefill_gpus=4, decode_gpus=4, prefill_tp=4, decode_tp=4,
                                   kv_link="tcp"))
    assert streamed["kv_transfer_exposed_s"] < docs["tcp"]["kv_transfer_s"]


def test_auto_link_follows_placement():
    rack = serve_estimate(_cfg(cluster="gb200-nvl72", num_gpus=None, tp=None, prefill_gpus=32, decode_gpus=40,
                               prefill_tp=4, decode_tp=4))
    nodes = serve_estimate(_cfg(num_gpus=None, tp=None, prefill_gpus=8, decode_gpus=8, prefill_tp=8, decode_tp=8))
    assert rack["kv_transfer_tier"] == "scale_up" and nodes["kv_transfer_tier"] == "scale_out"


def test_decode_step_grows_with_batch_and_weights_shared():
    from tierwise.serve.params import serving_parameters
    from tierwise.serve.phases import decode_step_time
    from tierwise.serve.records import ServingSetup
    from tierwise.specs.cluster import load_cluster

    m, c = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    setup = ServingSetup(m, c, "fp8", serving_parameters(), 163840.0)
    t = decode_step_time(setup, 8, 1, np.array([1, 16, 256]), 1000.0).total_s
    assert t[0] < t[1] < t[2]
    assert t[1] < 16 * t[0] / 4  # the weights are read once for the batch, not per sequence


def test_moe_expert_load_grows_with_batch():
    from tierwise.serve.kv import weight_bytes_read_per_step

    m = load_model("mixtral-8x7b")
    w = weight_bytes_read_per_step(m, "bf16", 1, 1, np.array([1, 2, 64]))
    assert w[0] < w[1] < w[2]
    full = weight_bytes_read_per_step(m, "bf16", 1, 1, np.array([10_000]))
    assert w[2] == pytest.approx(full[0], rel=1e-6)


def test_compare_attention_mla_smallest():
    doc = compare_attention(_cfg(model="deepseek-v3", cluster="gb200-nvl72", num_gpus=8, tp=8))
    rows = {r["attention"]: r for r in doc["compare_attention"]}
    assert rows["mla"]["kv_bytes_per_token"] < rows["gqa"]["kv_bytes_per_token"] < rows["mha"]["kv_bytes_per_token"]


def test_server_rate_past_capacity_gives_no_throughput():
    low = serve_estimate(_cfg(scenario="server", rate=1.0))
    high = serve_estimate(_cfg(scenario="server", rate=1e5))
    assert low["meets_slo"] and low["output_tokens_per_s"] == pytest.approx(256.0)
    assert high["output_tokens_per_s"] == 0.0


def test_serve_plan_rack_finds_feasible():
    from tierwise.serve.api import serve_plan_document

    doc = serve_plan_document(_cfg(cluster="gb200-nvl72", num_gpus=72, tp=None, scenario="interactive"))
    assert doc["feasible"] > 0 and doc["best"]
    best = doc["best"][0]
    assert best["tpot_p99_s"] <= 0.04 + 1e-9 and best["ttft_p99_s"] <= 0.45 + 1e-9


def test_bad_degree_is_one_line_error():
    from tierwise.errors import ScenarioError

    with pytest.raises(ScenarioError, match="--tp=3 does not divide"):
        serve_estimate(_cfg(tp=3))
    with pytest.raises(ScenarioError, match="--ep 2 needs a mixture-of-experts"):
        serve_estimate(_cfg(ep=2))
    with pytest.raises(ScenarioError, match="do not fit one scale-up domain"):
        serve_estimate(_cfg(num_gpus=None, tp=None, prefill_gpus=8, decode_gpus=8, kv_link="scale_up"))


def test_beam_search_decodes_more_sequences_per_output_token():
    one = serve_estimate(_cfg(model="gpt-j-6b", num_gpus=1, tp=1, input_len=512, output_len=69, batch=64))
    four = serve_estimate(_cfg(model="gpt-j-6b", num_gpus=1, tp=1, input_len=512, output_len=69, batch=64, beams=4))
    assert four["tpot_s"] > one["tpot_s"]
    assert four["output_tokens_per_s"] < one["output_tokens_per_s"]
    assert four["max_concurrency"] < one["max_concurrency"]


def test_tabulated_collectives_match_the_collective_model():
    """Serving's collectives are workload/traffic.py records (forward_traffic) priced by pricing/comm.py off a
    eighth-octave table; it must agree with collective_cost, and the records with training's forward ones."""
    from tierwise.collectives.model import collective_cost
    from tierwise.hierarchy import group_span
    from tierwise.pricing.comm import price_per_token_records
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model
    from tierwise.specs.parameters import load_parameters
    from tierwise.workload.traffic import Traffic, forward_traffic

    c = load_cluster("gb200-nvl72")
    tokens = np.array([1, 3, 17, 100, 777, 5000, 33333.0])
    ones = np.ones(tokens.shape, dtype=np.int64)
    for kind in ("all-reduce", "all-to-all"):
        for g in (2, 8, 16):
            rec = Traffic(axis="tp", kind=kind, bytes=tokens * 16384.0, size=np.full(tokens.shape, g), stride=ones,
                          counts={"forward": np.ones(tokens.shape), "backward": 0.0, "recompute": 0.0}, per="layer")
            got = price_per_token_records([rec], c, tokens, parameters=load_parameters())
            want = collective_cost(kind, tokens * 16384.0, group_span(c, np.full(tokens.shape, g), 1), c).time_s
            assert np.allclose(got, want, rtol=5e-3)
    # the records: two TP all-reduces of 2 T h bytes a layer (training's forward without SP), a dispatch in FP8
    # and a combine in BF16 of top_k T h elements a MoE layer
    m = load_model("mixtral-8x7b")
    r = forward_traffic(m, 4, 4, 100.0, fp8_dispatch=True)
    (ar,) = r["tp"]
    assert ar.kind == "all-reduce" and float(ar.counts["forward"]) == 2 and float(ar.bytes) == 2 * 100 * m.hidden_size
    assert [float(x.bytes) for x in r["ep"]] == [100 * 2 * m.hidden_size * w for w in (1.0, 2.0)]
    assert all(float(x.counts["forward"]) == 1 and int(x.size) == 4 for x in r["ep"])
    # the same TP records as a training forward of the same tokens without sequence parallelism
    from tierwise.specs.plan import PlanBatch
    from tierwise.specs.plan_mapping import plan_from_mapping
    from tierwise.workload.flops import model_shape
    from tierwise.workload.traffic import layer_traffic

    m = load_model("llama3.1-70b")
    plan = plan_from_mapping({"tp": 8, "global_batch_size": 1, "seq_length": 4096, "sequence_parallel": False},
                             num_gpus=8)
    train = [(x.kind, float(x.counts["forward"][0]), float(x.bytes[0]))
             for x in layer_traffic(m, model_shape(m), PlanBatch.from_plans([plan]))["tp"] if x.calls[0] > 0]
    serve = [(x.kind, float(x.counts["forward"]), float(x.bytes)) for x in forward_traffic(m, 8, 1, 4096.0,
                                                                                         fp8_dispatch=False)["tp"]]
    assert train == serve == [("all-reduce", 2.0, 2.0 * 4096 * m.hidden_size)]


def test_gemm_and_hbm_rates_are_the_training_models_per_accelerator():
    """One compute model for training and serving: serving prices a part with the rates the training step uses
    (tierwise.pricing.kernels.compute_rates): its GEMM efficiency is its measured large-GEMM fraction times the
    training fit's matmul_residual, its elementwise rate its streaming fraction times memory_bound_residual."""
    from tierwise.estimate.compute import compute_params
    from tierwise.pricing.kernels import compute_rates
    from tierwise.serve.params import serving_parameters
    from tierwise.serve.phases import serving_rates
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.compute import compute_profile

    p = serving_parameters()
    residual = compute_params()["matmul_residual"]
    effs = {}
    for name in ("dgx-h100", "hgx-h200", "mi300x-8"):
        c = load_cluster(name)
        prof = compute_profile(c.accelerator)
        served, trained = serving_rates(c, p), compute_rates(c.accelerator, {**compute_params(), **c.compute})
        assert served.params["matmul_efficiency_max"] == pytest.approx(prof.gemm_fraction * prof.clock_factor * residual)
        assert served.memory_bound == pytest.approx(trained.memory_bound)
        assert served.params["attention_efficiency_cudnn"] == trained.params["attention_efficiency_cudnn"]
        effs[name] = served.params["matmul_efficiency_max"]
    # measured fractions: H200 (GH200 0.830) above H100 (0.801) above MI300X (0.598)
    assert effs["hgx-h200"] > effs["dgx-h100"] > effs["mi300x-8"]


def test_server_steady_state_obeys_littles_law_and_approaches_offline():
    """The server batch b and the rate it holds satisfy b = lambda_i (prefill + O TPOT); with the SLOs loose the
    largest rate approaches the offline throughput of the same deployment (both fill the KV cache)."""
    doc = serve_estimate(_cfg(model="llama3.1-8b", num_gpus=1, tp=1, scenario="server", input_len=512,
                              output_len=256))
    lam = doc["output_tokens_per_s"] / 256
    assert doc["batch"] == pytest.approx(lam * (doc["phases"]["prefill_s"] + 256 * doc["tpot_s"]), rel=1e-3)
    assert doc["tpot_p99_s"] <= 0.2 + 1e-9 and doc["ttft_p99_s"] <= 2.0 + 1e-9
    loose = serve_estimate(_cfg(model="llama3.1-8b", num_gpus=1, tp=1, scenario="server", input_len=512,
                                output_len=256, ttft_slo=1e4, tpot_slo=1e4))
    offline = serve_estimate(_cfg(model="llama3.1-8b", num_gpus=1, tp=1, input_len=512, output_len=256))
    assert 0.9 * offline["output_tokens_per_s"] < loose["output_tokens_per_s"] <= 1.05 * offline["output_tokens_per_s"]
    # a rate the deployment carries is served at exactly that rate, at the batch that holds it
    held = serve_estimate(_cfg(model="llama3.1-8b", num_gpus=1, tp=1, scenario="server", input_len=512,
                               output_len=256, rate=0.5 * lam))
    assert held["output_tokens_per_s"] == pytest.approx(0.5 * lam * 256)
    assert held["batch"] < doc["batch"]


def test_kv_cache_of_free_sizes_the_cache_from_what_weights_leave():
    """TensorRT-LLM's kv_cache_free_gpu_mem_fraction takes a fraction of the memory weights and activations leave;
    vLLM's gpu_memory_utilization a fraction of all of it: with 0.9 each, the free convention holds 0.1 x weights
    more."""
    total = serve_estimate(_cfg(num_gpus=2, tp=2))
    free = serve_estimate(_cfg(num_gpus=2, tp=2, kv_cache_of="free"))
    more = free["kv_cache_bytes_per_gpu"] - total["kv_cache_bytes_per_gpu"]
    assert more > 0.1 * total["weight_bytes_per_gpu"]
    assert free["max_concurrency"] > total["max_concurrency"]
    half = serve_estimate(_cfg(num_gpus=2, tp=2, kv_cache_of="free", kv_cache_fraction=0.45))
    assert half["kv_cache_bytes_per_gpu"] == pytest.approx(free["kv_cache_bytes_per_gpu"] / 2)
    assert any("kv_cache_fraction 0.9" in a for a in total["assumed"])
    assert not any("kv_cache_fraction" in a for a in half["assumed"])


def test_attention_kernel_family_prices_prefill():
    fa2 = serve_estimate(_cfg(attention_kernel="flash2", input_len=8192))
    auto = serve_estimate(_cfg(input_len=8192))
    assert fa2["phases"]["prefill_s"] > auto["phases"]["prefill_s"]  # Hopper's default is the cuDNN/FA3 family


def test_training_only_attention_kernel_is_refused():
    # Megatron-LM 2021-22's unfused score-matrix attention is priced for training only: no silent substitute
    with pytest.raises(TierwiseError, match="unfused"):
        serve_estimate(_cfg(attention_kernel="unfused"))


def test_routed_experts_priced_as_grouped_gemms():
    """Few tokens per expert pad their tiles: an MoE model's GEMM time per token falls as the step's tokens grow,
    much more than a dense model's (whose large GEMMs are already efficient); the busiest EP rank sets the pace."""
    from tierwise.serve.params import serving_parameters
    from tierwise.serve.phases import linear_time
    from tierwise.specs.cluster import load_cluster

    c, p = load_cluster("dgx-h100"), serving_parameters()
    tokens = np.array([8.0, 512.0, 8192.0])
    moe = linear_time(load_model("mixtral-8x7b"), c, "fp8", 1, 1, tokens, p) / tokens
    assert moe[0] > moe[1] > moe[2]
    dense = linear_time(load_model("llama3.1-8b"), c, "fp8", 1, 1, tokens, p) / tokens
    # past the memory-bound decode sizes a dense model's time per token is flat; the MoE's still falls
    assert dense[2] == pytest.approx(dense[1], rel=0.15)
    assert moe[1] / moe[2] > 1.5 * dense[1] / dense[2]
    one = linear_time(load_model("mixtral-8x7b"), c, "fp8", 8, 1, 8192.0, p)
    spread = linear_time(load_model("mixtral-8x7b"), c, "fp8", 8, 8, 8192.0, p)
    assert spread > one  # EP over 8 ranks: the busiest rank's experts (moe_load_imbalance)
