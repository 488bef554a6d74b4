"""Serving: KV cache, prefill, decode and the KV transfer between disaggregated pools, on the same tiers,
collectives and catalog as training (issue 16; docs/serving.md).

* :mod:`.kv`: KV bytes per token (MHA, GQA, MLA), weights and workspace per GPU, cache capacity;
* :mod:`.phases`: the vectorized prefill roofline and decode step;
* :mod:`.transfer`: the KV transfer over scale_up, scale_out, host or TCP, whole or streamed by layer;
* :mod:`.engine`: offline, server and interactive scenarios, aggregated and disaggregated, on arrays;
* :mod:`.records`, :mod:`.result`: the typed records (a prefill, a decode step, a deployment's figures, one
  deployment's :class:`~tierwise.serve.result.ServeEstimate`), finished into JSON by ``documents/serving.py``;
* :mod:`.api`: ``serve`` (one deployment), :mod:`.plan`: ``serve-plan`` (the search);
* :mod:`.validate`: ``validate --serving`` against the shipped serving set.
"""

from tierwise.serve.api import (
    ServeConfig,
    compare_attention,
    estimate_serving,
    plan_serving,
    serve_estimate,
    serve_plan_document,
)
from tierwise.serve.kv import kv_bytes_per_token
from tierwise.serve.result import ServeEstimate, ServePlan

__all__ = ["ServeConfig", "ServeEstimate", "ServePlan", "estimate_serving", "plan_serving", "serve_estimate",
           "serve_plan_document", "compare_attention", "kv_bytes_per_token"]
