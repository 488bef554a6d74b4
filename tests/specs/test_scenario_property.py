"""Property (issue 12): any scenario mapping built from valid fields either estimates to finite numbers or is
refused with one :class:`TierwiseError` line (the CLI's exit 2) -- never another exception, never NaN/inf."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tierwise.errors import TierwiseError
from tierwise.estimate.scenario import estimate_scenario, scenario_from_mapping
from tierwise.specs.model import MAX_DIMENSION
from tierwise.specs.plan import ORDERS, PRECISION, RECOMPUTE, SCHEDULES
from tierwise.specs.plan_mapping import LAYERS_PER_CHUNK, MEGATRON_ALIASES

# mostly ordinary values (so that many scenarios get through to the estimator), sometimes extreme ones
small = st.sampled_from([1, 2, 4, 8])
counts = st.one_of(small, small, st.integers(1, 64), st.integers(-2, 0), st.integers(1, MAX_DIMENSION),
                   st.just(MAX_DIMENSION), st.just(MAX_DIMENSION + 1))
sizes = st.one_of(st.sampled_from([64, 128, 256, 1024, 4096]), st.integers(1, 8192), st.integers(1, MAX_DIMENSION))

catalog_models = st.sampled_from(["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b",
                                  "mpt-7b", "qwen3-30b-a3b"])
clusters = st.sampled_from(["dgx-h100", "dgx-a100", "gb200-nvl72"])


@st.composite
def inline_models(draw):
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]) | st.integers(1, 4096))
    model = {
        "num_layers": draw(st.integers(1, 128) | st.integers(1, MAX_DIMENSION)),
        "hidden_size": heads * draw(st.sampled_from([16, 64, 128]) | st.integers(1, 512)),
        "ffn_hidden_size": draw(sizes),
        "num_attention_heads": heads,
        "num_kv_heads": draw(st.sampled_from([heads, 1, max(1, heads // 4)])),
        "vocab_size": draw(sizes),
        "gated_mlp": draw(st.booleans()),
    }
    if draw(st.booleans()):
        model["tied_embeddings"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        experts = draw(st.sampled_from([2, 4, 8, 64]))
        model["moe"] = {"num_experts": experts, "top_k": draw(st.integers(1, experts)),
                        "ffn_hidden_size": draw(sizes)}
    if draw(st.integers(0, 4)) == 0:
        model["sliding_window"] = draw(st.integers(1, 8192))
        model["sliding_window_layers"] = draw(st.integers(0, model["num_layers"]))
    return model


@st.composite
def plans(draw):
    plan: dict = {"global_batch_size": draw(st.sampled_from([1, 8, 64, 512, 4096]) | st.integers(1, 10**6)),
                  "seq_length": draw(st.sampled_from([1024, 2048, 4096, 8192]) | st.integers(1, 2**20))}
    for key in ("tp", "pp", "cp", "ep", "vpp", "micro_batch_size", "zero_stage", "dp_shard", "etp"):
        if draw(st.integers(0, 2)) == 0:
            plan[key] = draw(counts) if key != "zero_stage" else draw(st.integers(0, 3))
    for key, choices in (("recompute", RECOMPUTE), ("precision", PRECISION), ("schedule", SCHEDULES),
                         ("order", ORDERS)):
        if draw(st.booleans()):
            plan[key] = draw(st.sampled_from(choices))
    for key in ("sequence_parallel", "tp_comm_overlap", "ep_comm_overlap", "fused_elementwise",
                "fused_cross_entropy", "overlap_grad_reduce", "overlap_param_gather", "reshard_after_forward"):
        if draw(st.integers(0, 3)) == 0:
            plan[key] = draw(st.booleans())
    for key in ("first_stage_layers", "last_stage_layers"):
        if draw(st.integers(0, 5)) == 0:
            plan[key] = draw(st.integers(0, 64))
    # Megatron/NeMo names instead of (or beside) the short ones
    for long, short in MEGATRON_ALIASES.items():
        if short in plan and draw(st.integers(0, 4)) == 0:
            plan[long] = plan[short] if draw(st.booleans()) else plan.pop(short)
    if draw(st.integers(0, 5)) == 0:
        plan[LAYERS_PER_CHUNK] = draw(st.integers(1, 16))
    return plan


@st.composite
def coherent(draw):
    """Degrees that multiply to num_gpus and a batch that divides: most of these reach the estimator."""
    tp, pp, cp, dp = (draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 2, 4])),
                      draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 2, 4, 16, 128])))
    mbs = draw(st.sampled_from([1, 2, 4]))
    plan = {"tensor_model_parallel_size" if draw(st.booleans()) else "tp": tp, "pp": pp, "cp": cp,
            "micro_batch_size": mbs, "global_batch_size": mbs * dp * pp * draw(st.sampled_from([1, 2, 8])),
            "seq_length": 2 * cp * tp * draw(st.sampled_from([64, 512, 1024, 4096]))}
    if pp > 1 and draw(st.booleans()):
        plan[LAYERS_PER_CHUNK] = draw(st.sampled_from([1, 2, 4]))
    for key, choices in (("recompute_granularity", ("selective", "full")), ("zero_stage", (0, 1, 2, 3)),
                         ("precision", PRECISION)):
        if draw(st.booleans()):
            plan[key] = draw(st.sampled_from(choices))
    model = draw(catalog_models | inline_models())
    if isinstance(model, dict):
        model = {**model, "num_layers": pp * draw(st.sampled_from([1, 2, 4, 8])),
                 "num_attention_heads": tp * cp * 2, "num_kv_heads": tp * cp * 2,
                 "hidden_size": tp * cp * 2 * draw(st.sampled_from([16, 64, 128]))}
        model.pop("sliding_window_layers", None)
        model.pop("sliding_window", None)
    return {"model": model, "cluster": draw(clusters), "num_gpus": tp * pp * cp * dp, "plan": plan}


@st.composite
def anything(draw):
    return {"model": draw(catalog_models | inline_models()), "cluster": draw(clusters),
            "num_gpus": draw(st.sampled_from([8, 16, 64, 128, 1024]) | st.integers(1, MAX_DIMENSION)),
            "plan": draw(plans())}


def _numbers(doc):
    if isinstance(doc, dict):
        for value in doc.values():
            yield from _numbers(value)
    elif isinstance(doc, list | tuple):
        for value in doc:
            yield from _numbers(value)
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        yield doc


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=coherent() | anything())
def test_valid_fields_estimate_to_finite_numbers_or_a_user_error(data):
    try:
        doc = estimate_scenario(scenario_from_mapping(data, origin="property"))
    except TierwiseError as exc:
        message = str(exc)
        assert message and len(message) < 1000
        event(f"refused: {type(exc).__name__}")
        return
    event("estimated")
    bad = [x for x in _numbers(doc) if not math.isfinite(x)]
    assert not bad, (data, bad)
    assert doc["step_time_s"] > 0 and doc["tokens_per_s"] > 0, data
    assert all(v >= 0 for k, v in doc["memory"].items() if k != "fits"), data
