"""Prefix caching in the closed form, hits in HBM or offloaded to host memory (issue 31, "KV beyond HBM")."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.cli import main
from tierwise.serve.api import ServeConfig, serve_estimate
from tierwise.serve.kv import kv_bytes_per_token
from tierwise.serve.params import serving_parameters
from tierwise.serve.phases import prefill_time
from tierwise.serve.prefix import PrefixCache, prefix_prefill
from tierwise.serve.records import ServingSetup
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model

PROMPTS = 2.0 ** np.arange(4, 16)  # 16 .. 32,768 tokens


def _ratio(cluster, prefix, model="llama3.1-8b", tp=1):
    """Prefill with half of each prompt cached, over prefill with none (recompute), at each prompt length."""
    m, p = load_model(model), serving_parameters()
    setup = ServingSetup(m, cluster, "bf16", p, kv_bytes_per_token(m, "bf16"))
    none = prefix_prefill(setup, tp, 1, PROMPTS, None).total_s
    return prefix_prefill(setup, tp, 1, PROMPTS, prefix).total_s / none


def test_no_hit_is_the_closed_form_unchanged():
    kw = dict(model="llama3.1-8b", cluster="dgx-h100", num_gpus=1, input_len=4096, output_len=64)
    base = serve_estimate(ServeConfig(**kw))
    assert "prefix_cache" not in base
    m, cl, p = load_model("llama3.1-8b"), load_cluster("dgx-h100"), serving_parameters()
    setup = ServingSetup(m, cl, "bf16", p, 131072.0)
    full = prefill_time(setup, 1, 1, 4096)
    got = prefix_prefill(setup, 1, 1, 4096, PrefixCache(0.0))
    assert float(got.total_s) == float(full.total_s)
    hit = serve_estimate(ServeConfig(**kw, prefix_hit_rate=0.75))
    # 3,072 of 4,096 tokens cached: the suffix's prefill is cheaper, and the chunked suffixes free the steps
    assert hit["ttft_s"] < 0.5 * base["ttft_s"] and hit["output_tokens_per_s"] > 2 * base["output_tokens_per_s"]
    assert hit["prefix_cache"]["cached_tokens_per_request"] == 3072 and hit["prefix_cache"]["load_s"] == 0


def test_host_hit_cheaper_than_recompute_for_long_prefixes_dearer_for_short():
    """The crossover follows PCIe time per token against prefill FLOPs per token: a whole (bulk) load of a
    half-cached prompt over a 16 GB/s host link (PCIe Gen3 x16-class) costs ~8 us a token of Llama-3.1-8B KV
    (131 KB); recomputing a token costs ~nothing while the prefill is bound by its weight read (prompts below the
    H100's ~300 FLOP/byte ridge) and ~2 N / peak ~ 25 us once compute-bound. So the host hit is dearer than
    recompute for short prompts and cheaper for long ones; at 4 GB/s (33 us a token) it stays dearer to 32K; on
    the cluster's own 63 GB/s link and loaded layer by layer behind the suffix's prefill it is never dearer."""
    slow = load_cluster({"base": "dgx-h100", "host_bandwidth": "16 GB/s"})
    whole = _ratio(slow, PrefixCache(0.5, "host", "whole"))
    assert np.all(whole[PROMPTS <= 128] > 1.0) and np.all(whole[PROMPTS >= 1024] < 1.0)
    slower = _ratio(load_cluster({"base": "dgx-h100", "host_bandwidth": "4 GB/s"}), PrefixCache(0.5, "host", "whole"))
    assert np.all(slower > 1.0) and np.all(slower >= whole)
    # layer by layer the load hides behind the suffix's own prefill (wait_for_layer_load): never above a
    # whole load, and within 1% of a hit in HBM on the H100's own host link
    native = load_cluster("dgx-h100")
    layered = _ratio(native, PrefixCache(0.5, "host", "layerwise"))
    hbm = _ratio(native, PrefixCache(0.5, "hbm"))
    assert np.all(layered <= _ratio(native, PrefixCache(0.5, "host", "whole")) + 1e-12)
    assert np.all(layered >= hbm) and np.all(layered < hbm * 1.01) and np.all(layered < 1.0)
    # the suffix never prices below a fresh prompt of its own length
    m, p = load_model("llama3.1-8b"), serving_parameters()
    fresh = prefill_time(ServingSetup(m, native, "bf16", p), 1, 1, PROMPTS / 2).total_s
    none = prefill_time(ServingSetup(m, native, "bf16", p), 1, 1, PROMPTS).total_s
    assert np.all(hbm * none >= fresh * (1 - 1e-9))


def test_host_store_capacity_and_bad_input(capsys):
    kw = dict(model="llama3.1-70b", cluster="dgx-h100", num_gpus=4, tp=4, input_len=8192, output_len=256,
              prefix_hit_rate=0.5, prefix_tier="host", host_kv_gb=100.0)
    doc = serve_estimate(ServeConfig(**kw))["prefix_cache"]
    # 100 GB per GPU of 327,680 B / 4 ranks per token = 1,220,703 tokens
    assert doc["host_prefix_tokens_per_gpu"] == pytest.approx(100e9 / (327680 / 4), abs=1)
    assert doc["host_capacity_gain"] == pytest.approx(doc["host_prefix_tokens_per_gpu"] / doc["hbm_cache_tokens_per_gpu"])
    assert doc["load_s"] > doc["load_exposed_s"] > 0 and doc["saved_prefill_s"] > doc["load_s"]
    base = ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1"]
    for extra, words in ((["--prefix-hit-rate", "1.5"], "--prefix-hit-rate"),
                         (["--prefix-tier", "disk", "--prefix-hit-rate", "0.5"], "--prefix-tier 'disk'"),
                         (["--prefix-tier", "host"], "needs --prefix-hit-rate"),
                         (["--host-kv-gb", "10", "--prefix-hit-rate", "0.5"], "add --prefix-tier host"),
                         (["--prefix-load", "bulk", "--prefix-hit-rate", "0.5"], "--prefix-load 'bulk'")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
