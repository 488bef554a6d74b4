"""Issue 30, serving: EP independent of TP (attention data-parallel), DeepEP kernels on the tier the EP group
spans, and serve-plan's wide-EP search."""

import numpy as np
import pytest

from tierwise.errors import ScenarioError
from tierwise.parallel.deepep import LOW_LATENCY, NORMAL, deepep_time
from tierwise.serve.api import ServeConfig, serve_estimate, serve_plan_document
from tierwise.serve.kv import attention_dp, instance_gpus, weight_bytes_per_gpu
from tierwise.serve.plan import ep_tier_name
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model


def test_ep_tier_is_nvlink_inside_an_nvl72_rack_and_ib_across_8_gpu_nodes():
    rack, nodes = load_cluster("gb200-nvl72"), load_cluster("dgx-h100")
    assert ep_tier_name(rack, 72) == "scale_up" and ep_tier_name(rack, 16) == "scale_up"
    assert ep_tier_name(nodes, 8) == "scale_up" and ep_tier_name(nodes, 16) == "scale_out"
    m = load_model("deepseek-v3")
    r = deepep_time(m, rack, np.array([16, 64]), 128.0, low_latency=True, fp8_dispatch=True)
    n = deepep_time(m, nodes, np.array([16, 64]), 128.0, low_latency=True, fp8_dispatch=True)
    assert list(r["tier"]) == ["scale_up", "scale_up"] and list(n["tier"]) == ["scale_out", "scale_out"]
    assert np.all(r["time_s"] < 0.2 * n["time_s"])


def test_deepep_low_latency_reproduces_the_readme_table_on_h800():
    """128 tokens, top-8, hidden 7168, FP8 dispatch / BF16 combine on H800 nodes (50 GB/s RDMA per GPU): the
    README's EP 64 kernel times, 173 us + 314 us, plus two scale-out latencies."""
    m, c = load_model("deepseek-v3"), load_cluster("hgx-h800")
    assert c.scale_out_bytes_per_s == pytest.approx(50e9)
    t = float(deepep_time(m, c, 64, 128.0, low_latency=True, fp8_dispatch=True)["time_s"])
    kernels = 128 * 8 * 7168 * (1 / 43e9 + 2 / 46e9)
    assert kernels == pytest.approx(173e-6 + 314e-6, rel=0.04)
    assert t == pytest.approx(kernels + 2 * c.scale_out_latency_s, rel=1e-6)
    assert LOW_LATENCY["dispatch"][0][-1] == 256 and NORMAL["intranode"]["dispatch"][1][0] == 153e9


def test_wide_ep_instance_holds_whole_experts_and_runs_attention_data_parallel():
    m = load_model("deepseek-v3")
    assert int(instance_gpus(1, 72)) == 72 and float(attention_dp(2, 72)) == 36.0
    assert int(instance_gpus(8, 4)) == 8 and float(attention_dp(8, 4)) == 1.0
    wide = float(weight_bytes_per_gpu(m, "fp8", 1, 64))
    folded = float(weight_bytes_per_gpu(m, "fp8", 8, 8))
    # every rank holds the attention and dense layers whole (tp 1) and 4 experts of 256 per MoE layer
    assert 15e9 < wide < 30e9 and folded > 80e9


def _ds(**kw):
    base = dict(model="deepseek-v3", cluster="gb200-nvl72", precision="fp8", input_len=2000, output_len=100)
    return ServeConfig(**{**base, **kw})


def test_serve_accepts_ep_up_to_the_instance_with_attention_data_parallel():
    doc = serve_estimate(_ds(num_gpus=72, ep=72))
    assert doc["deployment"] == {"tp": 1, "ep": 72, "attention_dp": 72, "instances": 1}
    assert doc["ep_tier"] == "scale_up" and doc["fits"]
    assert any("attention data-parallel" in a for a in doc["assumed"])
    dis = serve_estimate(_ds(prefill_gpus=32, decode_gpus=40, prefill_ep=32, decode_ep=40, scenario="interactive"))
    assert dis["deployment"]["decode_ep"] == 40 and dis["deployment"]["prefill_ep"] == 32


@pytest.mark.parametrize("kw, message", [
    (dict(num_gpus=72, ep=300), r"--ep=300 is larger than the 72 GPUs of --gpus"),
    (dict(model="mixtral-8x7b", cluster="dgx-h100", num_gpus=16, ep=16), r"--ep=16 is wider than the 8 routed \+ 0 redundant experts"),
    (dict(num_gpus=64, cluster="dgx-h100", tp=8, ep=12), r"--ep=12 is wider than --tp=8 but not a multiple of it"),
    (dict(prefill_gpus=8, decode_gpus=64, decode_ep=128, cluster="dgx-h100"), r"--decode-ep=128 is larger than"),
])
def test_bad_ep_is_one_line(kw, message):
    with pytest.raises(ScenarioError, match=message):
        serve_estimate(_ds(**kw))


def test_serve_plan_on_an_nvl72_rack_picks_wide_ep_on_nvlink():
    doc = serve_plan_document(_ds(num_gpus=72))
    best = doc["best"][0]
    assert best["decode_ep"] >= 16 and best["decode_ep_tier"] == "scale_up"
    assert doc["why_ep"].startswith(f"decode EP {best['decode_ep']} (tier scale_up): each GPU reads")


def test_serve_plan_on_h100_nodes_spans_ib_only_where_it_pays():
    """DeepSeek-V3 in FP8 does not fit one 8-GPU H100 node, so the decode EP group leaves the node: the search
    keeps EP 16 across IB (two nodes) and ranks wider IB groups lower."""
    doc = serve_plan_document(_ds(cluster="dgx-h100", num_gpus=32, redundant_experts=0))
    best = doc["best"]
    assert best[0]["decode_ep"] == 16 and best[0]["decode_ep_tier"] == "scale_out"
    wider = [b for b in best if b["decode_ep"] == 32]
    assert wider and all(b["output_tokens_per_s_per_gpu"] < best[0]["output_tokens_per_s_per_gpu"] for b in wider)


def test_redundant_experts_cost_their_weights_and_allow_ep_320():
    """DeepSeek-V3's decode deployment: EP 320 over 256 routed + 64 redundant / shared slots, one expert per GPU."""
    m = load_model("deepseek-v3")
    one = float(weight_bytes_per_gpu(m, "fp8", 1, 256))
    padded = float(weight_bytes_per_gpu(m, "fp8", 1, 256, 32))  # ceil(288 / 256) = 2 experts per rank
    expert = 58 * 3 * 7168 * 2048  # one routed expert of every MoE layer, 1 byte each in FP8
    assert padded - one == pytest.approx(expert, rel=1e-6)
    doc = serve_estimate(_ds(cluster="dgx-h100", prefill_gpus=32, decode_gpus=320, prefill_ep=32, decode_ep=320,
                             redundant_experts=64, scenario="interactive"))
    assert doc["deployment"]["decode_ep"] == 320 and doc["ep_tier"] == "scale_out"
    with pytest.raises(ScenarioError, match=r"--decode-ep=320 is wider than the 256 routed \+ 0 redundant"):
        serve_estimate(_ds(cluster="dgx-h100", prefill_gpus=32, decode_gpus=320, decode_ep=320))


def test_two_batch_overlap_hides_the_all_to_all_behind_compute():
    base = dict(cluster="dgx-h100", num_gpus=32, ep=32, batch=256)
    off, on = serve_estimate(_ds(**base)), serve_estimate(_ds(**base, two_batch_overlap=True))
    p0, p1 = off["phases"], on["phases"]
    assert p1["decode_comm_s"] == pytest.approx(p0["decode_comm_s"]) and p0["decode_comm_s"] > 0
    assert p1["decode_step_s"] == pytest.approx(p0["decode_step_s"] - min(p0["decode_comm_s"], p1["decode_step_s"]
                                                                          - p0["decode_overhead_s"]), rel=0.05)
    assert p1["decode_step_s"] < p0["decode_step_s"] and p1["prefill_s"] < p0["prefill_s"]


def test_mla_decodes_with_absorbed_matrices():
    """DeepSeek-V2 sec. 2.1.2: scores over the 512 + 64 latent and rotary key, values over the 512 latent, per head
    and cached token; the decompressed form would be 192 + 128."""
    from tierwise.serve.kv import shape_of
    from tierwise.workload.flops import attention_core_flops_per_token, decode_attention_flops_per_token

    m = load_model("deepseek-v3")
    s = shape_of(m)
    absorbed = float(decode_attention_flops_per_token(m, s, 1000.0))
    assert absorbed == pytest.approx(2 * 128 * (512 + 64 + 512) * 1000)
    naive = float(attention_core_flops_per_token(m, s, 1000.0, causal_halving=False))
    assert absorbed / naive == pytest.approx(1088 / 320)
    dense = load_model("llama3.1-70b")
    assert float(decode_attention_flops_per_token(dense, shape_of(dense), 1000.0)) == pytest.approx(
        float(attention_core_flops_per_token(dense, shape_of(dense), 1000.0, causal_halving=False)))
