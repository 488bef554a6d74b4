"""Model specs: the catalog, inline mappings, Hugging Face configs, and the errors users see."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tierwise.errors import CatalogError, SpecError
from tierwise.specs import catalog
from tierwise.specs.hf_config import HF_ARCHITECTURES
from tierwise.specs.model import (
    MLASpec,
    ModelSpec,
    MoESpec,
    load_model,
    model_from_hf_config,
    model_from_mapping,
)

HF_DIR = Path(__file__).resolve().parents[1] / "data" / "hf"
CATALOG_MODELS = catalog.names("models")

# the list (part 2, "Models") plus the Korthikanti and MPT sizes the calibration data uses
REQUIRED_MODELS = {
    "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b", "gpt-310.1b",
    "gpt-529.6b", "gpt-1t", "gpt3-175b", "gpt-22b", "gpt-530b", "llama2-7b", "llama2-13b", "llama2-70b",
    "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "nemotron-4-340b", "mpt-125m", "mpt-350m",
    "mpt-760m", "mpt-1b", "mpt-3b", "mpt-7b", "mpt-13b", "mpt-30b", "mpt-70b",
}

SMALL = {"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 256, "num_attention_heads": 4,
         "vocab_size": 100, "gated_mlp": False}


def attention_params(m: ModelSpec) -> int:
    """Weights of one attention block (no biases).

    Standard (MHA/GQA): W_q h x (a d), W_k and W_v h x (g d) each, W_o (a d) x h, with a query heads, g KV
    heads, head width d. MLA (DeepSeek-V2 Sec. 2.1): W_DQ h x r_q, its RMSNorm r_q, W_UQ r_q x a (d_nope + d_rope);
    W_DKV h x (r_kv + d_rope) (latent plus the shared rotary key), its RMSNorm r_kv, W_UKV r_kv x a (d_nope + d_v);
    W_O (a d_v) x h.
    """
    h, a = m.hidden_size, m.num_attention_heads
    if m.mla is None:
        return h * m.q_channels + 2 * h * m.kv_channels + m.q_channels * h
    mla = m.mla
    if mla.q_lora_rank:
        q = h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * a * mla.qk_head_dim
    else:
        q = h * a * mla.qk_head_dim
    kv = (h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
          + mla.kv_lora_rank * a * (mla.qk_nope_head_dim + mla.v_head_dim))
    return q + kv + a * mla.v_head_dim * h


def parameter_count(m: ModelSpec) -> int:
    """Weights of the model from its config: P = E + L (A + 2h) + L_dense F + L_moe M + h.

    E = V h, twice when input and output embeddings are untied; A = attention_params; 2h = the two per-layer
    norms' scales (+ h for the final norm); F = k h f, the dense MLP with k = 3 matrices when gated
    (SwiGLU) else 2; M = n_e k h f_e + n_s k h f_s + h n_e, the routed experts, the shared experts and the
    router. Biases and learned position embeddings are left out (ModelSpec does not carry them; they are
    below 1.3% for every catalog model, the largest share being mpt-125m's 2048 x 768 position table).
    """
    h = m.hidden_size
    k = 3 if m.gated_mlp else 2
    embeddings = m.vocab_size * h * (1 if m.tied_embeddings else 2)
    per_layer = attention_params(m) + 2 * h
    total = embeddings + m.num_layers * per_layer + h
    total += m.num_dense_layers * k * h * m.ffn_hidden_size
    if m.moe is not None:
        moe = m.moe
        experts = moe.num_experts * k * h * moe.ffn_hidden_size
        shared = moe.shared_experts * k * h * moe.shared_ffn_hidden_size
        total += m.num_moe_layers * (experts + shared + h * moe.num_experts)
    return total


# --- the catalog ------------------------------------------------------------------------------------------


def test_catalog_holds_every_required_model():
    assert set(CATALOG_MODELS) >= REQUIRED_MODELS, sorted(REQUIRED_MODELS - set(CATALOG_MODELS))


@pytest.mark.parametrize("name", CATALOG_MODELS)
def test_catalog_model_loads_with_a_source_and_a_published_size(name):
    m = load_model(name)
    assert m.name == name
    assert m.source.strip(), f"{name} has no source"
    assert m.params_b is not None, f"{name} has no params_b"
    assert m.display_name


@pytest.mark.parametrize("name", CATALOG_MODELS)
def test_parameter_count_from_config_matches_published_within_3_percent(name):
    m = load_model(name)
    counted_b = parameter_count(m) / 1e9
    assert counted_b == pytest.approx(m.params_b, rel=0.03), (
        f"{name}: config gives {counted_b:.4g}B, published {m.params_b}B"
    )


def test_catalog_names_are_lowercase_with_hyphens():
    for name in CATALOG_MODELS:
        assert name == name.lower() and " " not in name and "_" not in name


def test_load_model_is_case_insensitive_and_returns_a_spec_unchanged():
    m = load_model("Llama3.1-8B")
    assert m.name == "llama3.1-8b"
    assert load_model(m) is m


def test_moe_layer_split_of_deepseek_v3():
    m = load_model("deepseek-v3")
    assert (m.num_dense_layers, m.num_moe_layers) == (3, 58)
    assert m.moe_layer_mask[:4] == (False, False, False, True)
    assert m.moe.shared_ffn_hidden_size == 2048
    assert m.mla.qk_head_dim == m.head_dim == 192


def test_derived_channels_with_gqa_and_a_head_dim_apart_from_hidden_over_heads():
    m = load_model("qwen3-30b-a3b")
    assert m.head_dim == 128 != m.hidden_size // m.num_attention_heads
    assert (m.q_channels, m.kv_channels) == (32 * 128, 4 * 128)
    assert m.num_dense_layers == 0 and m.num_moe_layers == 48


def test_gpt_oss_sliding_window_layers():
    m = load_model("gpt-oss-120b")
    assert (m.sliding_window, m.sliding_window_layers) == (128, 18)


# --- Hugging Face config.json ------------------------------------------------------------------------------

HF_FIXTURES = {
    "Llama-3.1-8B.config.json": "llama3.1-8b",
    "Mixtral-8x7B-v0.1.config.json": "mixtral-8x7b",
    "Qwen3-30B-A3B.config.json": "qwen3-30b-a3b",
    "DeepSeek-V3.config.json": "deepseek-v3",
}
_DESCRIPTIVE = {"name", "display_name", "source", "params_b", "notes",
                "training_precision"}  # how a model was trained is not in its config.json (the catalog's source)


def _shape(m: ModelSpec) -> dict:
    return {k: v for k, v in dataclasses.asdict(m).items() if k not in _DESCRIPTIVE}


@pytest.mark.parametrize("filename,catalog_name", HF_FIXTURES.items())
def test_hf_config_reads_to_the_catalog_entry(filename, catalog_name):
    from_hf = load_model(str(HF_DIR / filename))
    assert _shape(from_hf) == _shape(load_model(catalog_name))
    assert "Hugging Face" in from_hf.source


def test_hf_config_from_dict_and_name():
    cfg = json.loads((HF_DIR / "Llama-3.1-8B.config.json").read_text())
    m = model_from_hf_config(cfg, name="my-llama")
    assert m.name == "my-llama" and m.num_kv_heads == 8 and m.gated_mlp and not m.tied_embeddings


def test_hf_config_by_model_type_alone():
    cfg = json.loads((HF_DIR / "Mixtral-8x7B-v0.1.config.json").read_text())
    del cfg["architectures"]
    assert model_from_hf_config(cfg).moe == MoESpec(num_experts=8, top_k=2, ffn_hidden_size=14336)


def test_hf_gpt_oss_counts_sliding_layers_from_layer_types():
    cfg = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36, "hidden_size": 2880,
           "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "num_local_experts": 128, "experts_per_token": 4, "vocab_size": 201088, "sliding_window": 128,
           "tie_word_embeddings": False,
           "layer_types": ["sliding_attention", "full_attention"] * 18}
    assert _shape(model_from_hf_config(cfg)) == _shape(load_model("gpt-oss-120b"))


def test_hf_mpt_gpt2_neox_nemotron_mistral():
    mpt = model_from_hf_config({"architectures": ["MptForCausalLM"], "d_model": 4096, "n_heads": 32,
                                "n_layers": 32, "expansion_ratio": 4, "vocab_size": 50432})
    assert (mpt.ffn_hidden_size, mpt.gated_mlp, mpt.tied_embeddings) == (16384, False, True)
    gpt2 = model_from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                 "n_inner": None, "vocab_size": 50257})
    assert (gpt2.ffn_hidden_size, gpt2.head_dim, gpt2.tied_embeddings) == (3072, 64, True)
    neox = model_from_hf_config({"architectures": ["GPTNeoXForCausalLM"], "hidden_size": 6144,
                                 "num_hidden_layers": 44, "num_attention_heads": 64,
                                 "intermediate_size": 24576, "vocab_size": 50432})
    assert not neox.gated_mlp and neox.num_kv_heads == 64
    nemotron = model_from_hf_config({"architectures": ["NemotronForCausalLM"], "hidden_size": 18432,
                                     "num_hidden_layers": 96, "num_attention_heads": 96,
                                     "num_key_value_heads": 8, "intermediate_size": 73728,
                                     "vocab_size": 256000, "hidden_act": "relu2"})
    assert _shape(nemotron) == _shape(load_model("nemotron-4-340b"))
    mistral = model_from_hf_config({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
                                    "num_hidden_layers": 32, "num_attention_heads": 32,
                                    "num_key_value_heads": 8, "intermediate_size": 14336,
                                    "vocab_size": 32000, "sliding_window": 4096})
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (4096, 32)


def test_hf_qwen_mlp_only_leading_layers_become_first_dense_layers():
    cfg = json.loads((HF_DIR / "Qwen3-30B-A3B.config.json").read_text())
    cfg["mlp_only_layers"] = [0, 1]
    m = model_from_hf_config(cfg)
    assert (m.moe.first_dense_layers, m.num_dense_layers, m.ffn_hidden_size) == (2, 2, 6144)
    cfg["mlp_only_layers"] = [5]
    with pytest.raises(SpecError, match=r"mlp_only_layers=\[5\]"):
        model_from_hf_config(cfg)


def test_unsupported_hf_architecture_lists_the_supported_ones():
    with pytest.raises(SpecError, match="BertForMaskedLM") as info:
        model_from_hf_config({"architectures": ["BertForMaskedLM"], "model_type": "bert"})
    for arch in HF_ARCHITECTURES:
        assert arch in str(info.value)


def test_hf_config_missing_key_is_named():
    cfg = json.loads((HF_DIR / "Llama-3.1-8B.config.json").read_text())
    del cfg["num_hidden_layers"]
    with pytest.raises(SpecError, match="num_hidden_layers"):
        model_from_hf_config(cfg)


def test_malformed_json_names_the_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": 4096,,\n}\n')
    with pytest.raises(SpecError, match="line 3"):
        load_model(str(path))


# --- inline mappings and files -----------------------------------------------------------------------------


def test_inline_mapping_with_defaults():
    m = load_model(dict(SMALL))
    assert (m.name, m.num_kv_heads, m.head_dim, m.display_name) == ("custom", 4, 16, "custom")
    assert not m.is_moe and m.num_dense_layers == 2 and m.moe_layer_mask == (False, False)


def test_inline_moe_mapping_uses_the_contract_keys():
    m = load_model({**SMALL, "num_layers": 6, "gated_mlp": True,
                    "moe": {"num_experts": 8, "top_k": 2, "ffn_hidden_size": 32, "shared_experts": 1,
                            "first_dense_layers": 2}})
    assert m.is_moe and (m.num_dense_layers, m.num_moe_layers) == (2, 4)
    assert m.ffn_hidden_size == 256 and m.moe.ffn_hidden_size == 32 and m.moe.shared_ffn_hidden_size == 32


def test_layer_freq_makes_every_nth_layer_moe():
    m = load_model({**SMALL, "num_layers": 7,
                    "moe": {"num_experts": 4, "top_k": 1, "ffn_hidden_size": 32, "first_dense_layers": 1,
                            "layer_freq": 2}})
    assert m.moe_layer_mask == (False, False, True, False, True, False, True)
    assert (m.num_moe_layers, m.num_dense_layers) == (3, 4)


def test_moe_only_model_may_omit_the_dense_ffn_width():
    data = {k: v for k, v in SMALL.items() if k != "ffn_hidden_size"}
    m = load_model({**data, "moe": {"num_experts": 4, "top_k": 2, "ffn_hidden_size": 32}})
    assert m.ffn_hidden_size == 32
    with pytest.raises(SpecError, match="ffn_hidden_size"):
        load_model(data)


def test_inline_mla_mapping():
    m = load_model({**SMALL, "head_dim": 24, "mla": {"q_lora_rank": None, "kv_lora_rank": 32,
                                                     "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                                                     "v_head_dim": 16}})
    assert m.mla == MLASpec(q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                            v_head_dim=16)


def test_yaml_and_plain_json_files(tmp_path):
    yaml_path = tmp_path / "tiny.yaml"
    yaml_path.write_text("num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 4\n"
                         "vocab_size: 100\ngated_mlp: false\n")
    assert load_model(str(yaml_path)).name == "tiny"
    json_path = tmp_path / "tiny.json"
    json_path.write_text(json.dumps(SMALL))
    assert load_model(json_path).num_layers == 2


def test_missing_file_is_a_spec_error():
    with pytest.raises(SpecError, match="does not exist"):
        load_model("no/such/model.yaml")


# --- errors ------------------------------------------------------------------------------------------------


def test_unknown_catalog_name_suggests_close_names():
    with pytest.raises(CatalogError, match="did you mean 'llama3.1-8b'"):
        load_model("llama3.1-8")


def test_unknown_key_names_the_key_and_lists_the_valid_ones():
    with pytest.raises(SpecError, match="'hiden_size'") as info:
        load_model({**SMALL, "hiden_size": 64})
    assert "did you mean 'hidden_size'" in str(info.value) and "num_kv_heads" in str(info.value)


def test_unknown_moe_key_names_the_key():
    with pytest.raises(SpecError, match="'moe.num_expert'.*did you mean 'num_experts'"):
        load_model({**SMALL, "moe": {"num_expert": 4, "top_k": 1, "ffn_hidden_size": 8}})


def test_missing_required_key():
    data = {k: v for k, v in SMALL.items() if k != "vocab_size"}
    with pytest.raises(SpecError, match="missing required key vocab_size"):
        load_model(data)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"num_layers": 0}, "num_layers=0 must be a positive integer"),
        ({"hidden_size": -64}, "hidden_size=-64 must be a positive integer"),
        ({"vocab_size": "50k"}, "vocab_size='50k' must be a positive integer"),
        ({"num_kv_heads": 3}, r"num_attention_heads=4 is not a multiple of num_kv_heads=3; use num_kv_heads in \{1, 2, 4\}"),
        ({"head_dim": 0}, "head_dim=0 must be a positive integer"),
        ({"hidden_size": 66}, "hidden_size=66 is not a multiple of num_attention_heads=4; give head_dim"),
        ({"gated_mlp": "yes"}, "gated_mlp='yes' must be true or false"),
        ({"params_b": -1}, "params_b=-1 is out of range; use 0 < params_b <= 1,000,000"),
        ({"sliding_window_layers": 2}, "sliding_window_layers=2 needs sliding_window"),
        ({"moe": {"num_experts": 4, "top_k": 8, "ffn_hidden_size": 8}}, "top_k=8 exceeds num_experts=4"),
        ({"moe": {"num_experts": 4, "top_k": 1, "ffn_hidden_size": 8, "first_dense_layers": 2}},
         "first_dense_layers=2 leaves no MoE layer"),
        ({"moe": {"num_experts": 4, "top_k": 1}}, "missing required key moe.ffn_hidden_size"),
        ({"moe": [4, 2]}, "'moe' .* must be a mapping"),
    ],
)
def test_bad_values_give_one_line_errors_naming_the_value(change, message):
    with pytest.raises(SpecError, match=message) as info:
        model_from_mapping({**SMALL, **change}, origin="scenario.yaml")
    assert "\n" not in str(info.value)
    assert "scenario.yaml" in str(info.value)


def test_not_a_mapping():
    with pytest.raises(SpecError, match="must be a mapping"):
        model_from_mapping([1, 2], origin="x")  # type: ignore[arg-type]


def test_hf_name_defaults_to_the_file_or_folder(tmp_path):
    assert load_model(str(HF_DIR / "Llama-3.1-8B.config.json")).name == "Llama-3.1-8B"
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    (folder / "config.json").write_text((HF_DIR / "Qwen3-30B-A3B.config.json").read_text())
    assert load_model(folder / "config.json").name == "Qwen3-30B-A3B"
