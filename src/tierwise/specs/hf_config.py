"""Hugging Face ``config.json`` reading: the model fields tierwise prices, from each supported architecture.

:func:`hf_model_values` turns a config (a path or the parsed dict) into the inline model keys of
:mod:`tierwise.specs.model` (:func:`tierwise.specs.model.model_from_hf_config` builds the spec from them);
:data:`HF_ARCHITECTURES` lists the architectures read, each by its own reader (the field names of that
architecture's ``transformers`` config class).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError
from tierwise.files import describe_type, load_json, read_user_text, short_repr
from tierwise.limits import MAX_DIM

__all__ = ["HF_ARCHITECTURES", "hf_model_values", "read_json"]

_ABSENT: Any = object()


def _finite(value: int | float) -> bool:
    """A JSON number that is finite as a float: an integer past a float's range (``10**400``) is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class _HFConfig(Mapping[str, Any]):
    """A parsed ``config.json`` with typed getters: a missing, mistyped or impossible field is one line naming
    the field, its value (shortened) and the file. ``null`` counts as absent for the optional fields (the
    Hugging Face convention: ``None`` means the default)."""

    def __init__(self, data: Mapping[str, Any], where: str, arch: str, prefix: str = "") -> None:
        self._data, self.where, self.arch, self.prefix = data, where, arch, prefix

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    @property
    def origin(self) -> str:
        return f"{self.where} ({self.arch})"

    def _bad(self, key: str, value: Any, want: str) -> SpecError:
        return SpecError(f"{self.prefix}{key}={short_repr(value)} in {self.origin} must be {want}; fix it in the "
                         "config.json or describe the model inline")

    def _raw(self, key: str, required: bool) -> Any:
        value = self._data.get(key, _ABSENT)
        if value is _ABSENT and required:
            raise SpecError(f"{self.origin} has no {self.prefix + key!r}; is this a complete config.json?")
        if value is None and not required:
            return _ABSENT
        return value

    def int(self, key: str, default: Any = _ABSENT, *, minimum: int = 1) -> Any:
        """A whole number >= ``minimum`` (and <= :data:`tierwise.limits.MAX_DIM`); required unless ``default`` is given."""
        value = self._raw(key, required=default is _ABSENT)
        if value is _ABSENT:
            return default
        want = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_DIM:
            raise self._bad(key, value, f"at most {MAX_DIM:,}")  # 10**400 too: past a float, not "not whole"
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) \
                or int(value) != value:
            raise self._bad(key, value, want)
        if value < minimum:
            raise self._bad(key, value, want)
        if value > MAX_DIM:
            raise self._bad(key, value, f"at most {MAX_DIM:,}")
        return int(value)

    def number(self, key: str, default: Any = _ABSENT) -> Any:
        """A finite number > 0; ``default`` when absent."""
        value = self._raw(key, required=default is _ABSENT)
        if value is _ABSENT:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) or value <= 0:
            raise self._bad(key, value, "a positive number")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self._raw(key, required=False)
        if value is _ABSENT:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false (a JSON boolean, not a string or a number)")
        return value

    def mapping(self, key: str) -> _HFConfig:
        value = self._raw(key, required=False)
        if value is _ABSENT:
            value = {}
        if not isinstance(value, Mapping):
            raise self._bad(key, value, "a mapping (a JSON object {...})")
        return _HFConfig(value, self.where, self.arch, prefix=f"{self.prefix}{key}.")

    def int_list(self, key: str) -> list[int]:
        value = self._raw(key, required=False)
        if value is _ABSENT:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
            raise self._bad(key, value, "a list of layer indices (whole numbers >= 0)")
        return list(value)

    def str_list(self, key: str) -> list[str]:
        value = self._raw(key, required=False)
        if value is _ABSENT:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, value, "a list of strings")
        return list(value)


def _hf_common(cfg: _HFConfig, arch: str, *, tied_default: bool) -> dict[str, Any]:
    """Keys shared by the Llama-style configs (Llama, Mistral, Qwen, Mixtral, DeepSeek, GPT-OSS, Nemotron)."""
    heads = cfg.int("num_attention_heads")
    out = {
        "num_layers": cfg.int("num_hidden_layers"),
        "hidden_size": cfg.int("hidden_size"),
        "ffn_hidden_size": cfg.int("intermediate_size"),
        "num_attention_heads": heads,
        "num_kv_heads": cfg.int("num_key_value_heads", heads),
        "vocab_size": cfg.int("vocab_size"),
        "tied_embeddings": cfg.bool("tie_word_embeddings", tied_default),
        "gated_mlp": True,
    }
    head_dim = cfg.int("head_dim", None)
    if head_dim is not None:
        out["head_dim"] = head_dim
    out.update(_hf_sliding_window(cfg, out["num_layers"]))
    return out


def _hf_sliding_window(cfg: _HFConfig, num_layers: int) -> dict[str, Any]:
    """Sliding-window layers: ``layer_types`` when given, else Mistral's all-layer window, else Qwen2's
    ``use_sliding_window`` (layers from ``max_window_layers`` on use the window)."""
    window = cfg.int("sliding_window", None)
    layer_types = cfg.str_list("layer_types")
    if layer_types:
        if len(layer_types) != num_layers:
            raise cfg._bad("layer_types", layer_types, f"one entry per layer ({num_layers}), not {len(layer_types)}")
        count = sum(1 for t in layer_types if t == "sliding_attention")
    elif "use_sliding_window" in cfg:
        start = cfg.int("max_window_layers", num_layers, minimum=0)
        count = max(0, num_layers - start) if cfg.bool("use_sliding_window", False) else 0
    else:
        count = num_layers if window else 0
    if not window or not count:
        return {}
    return {"sliding_window": window, "sliding_window_layers": count}


def _hf_llama(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    return _hf_common(cfg, arch, tied_default=False)


def _hf_mixtral(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    out["moe"] = {
        "num_experts": cfg.int("num_local_experts"),
        "top_k": cfg.int("num_experts_per_tok"),
        "ffn_hidden_size": out["ffn_hidden_size"],
    }
    return out


def _hf_qwen_moe(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    num_layers = out["num_layers"]
    dense = sorted(cfg.int_list("mlp_only_layers"))
    if dense != list(range(len(dense))):
        raise SpecError(
            f"{cfg.origin}: mlp_only_layers={short_repr(dense)} are not the leading layers; tierwise "
            f"models dense layers as a leading block (first_dense_layers), give the model inline instead"
        )
    moe = {
        "num_experts": cfg.int("num_experts"),
        "top_k": cfg.int("num_experts_per_tok"),
        "ffn_hidden_size": cfg.int("moe_intermediate_size"),
        "first_dense_layers": len(dense),
        "layer_freq": cfg.int("decoder_sparse_step", 1),
    }
    if dense and moe["layer_freq"] != 1:
        raise SpecError(
            f"{cfg.origin}: mlp_only_layers together with decoder_sparse_step="
            f"{moe['layer_freq']} is not supported; give the model inline instead"
        )
    shared = cfg.int("shared_expert_intermediate_size", 0, minimum=0)  # Qwen2-MoE: one shared expert this wide
    if shared:
        moe["shared_experts"] = 1
        moe["shared_ffn_hidden_size"] = shared
    if moe["first_dense_layers"] >= num_layers:
        raise SpecError(f"{cfg.origin}: every layer is in mlp_only_layers; it is not an MoE model")
    out["moe"] = moe
    return out


def _hf_deepseek(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    freq = cfg.int("moe_layer_freq", 1)
    if freq != 1:
        # DeepSeek counts its frequency from layer 0 (layer_idx % freq == 0), ours after the dense block.
        raise SpecError(
            f"{cfg.origin}: moe_layer_freq={freq} is not supported (only 1); give the model "
            f"inline with moe.first_dense_layers and moe.layer_freq"
        )
    moe_ffn = cfg.int("moe_intermediate_size")
    out["moe"] = {
        "num_experts": cfg.int("n_routed_experts"),
        "top_k": cfg.int("num_experts_per_tok"),
        "ffn_hidden_size": moe_ffn,
        "shared_experts": cfg.int("n_shared_experts", 0, minimum=0),
        "shared_ffn_hidden_size": moe_ffn,
        "first_dense_layers": cfg.int("first_k_dense_replace", 0, minimum=0),
        "n_group": cfg.int("n_group", 1),
        "topk_group": cfg.int("topk_group", 0, minimum=0),
        # DeepSeek-V3's config names its auxiliary-loss-free router "noaux_tc" (bias-corrected group top-k)
        "balance": "aux-free" if cfg._raw("topk_method", required=False) == "noaux_tc" else "aux-loss",
    }
    mla = {
        "q_lora_rank": cfg.int("q_lora_rank", None),
        "kv_lora_rank": cfg.int("kv_lora_rank"),
        "qk_nope_head_dim": cfg.int("qk_nope_head_dim"),
        "qk_rope_head_dim": cfg.int("qk_rope_head_dim"),
        "v_head_dim": cfg.int("v_head_dim"),
    }
    out["mla"] = mla
    out["mtp_layers"] = cfg.int("num_nextn_predict_layers", 0, minimum=0)
    # transformers' DeepseekV3Config sets head_dim = qk_rope_head_dim; the query-key width is nope + rope.
    out["head_dim"] = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    return out


def _hf_gpt_oss(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    # the released config.json carries both spellings of each key; transformers reads the first
    experts = cfg.int("num_local_experts", None)
    top_k = cfg.int("num_experts_per_tok", None)
    out["moe"] = {
        "num_experts": experts if experts is not None else cfg.int("num_experts"),
        "top_k": top_k if top_k is not None else cfg.int("experts_per_token"),
        "ffn_hidden_size": out["ffn_hidden_size"],
    }
    return out


def _hf_nemotron(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    out["gated_mlp"] = False  # Nemotron's MLP is up -> squared ReLU -> down, no gate
    out["norm"], out["rotary"] = "layernorm", True  # LayerNorm1p and rotary embedding (Nemotron-4 report 2.1)
    return out


def _hf_mpt(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    d_model = cfg.int("d_model")
    ratio = cfg.number("expansion_ratio", None)
    if ratio is None:
        ratio = cfg.mapping("ffn_config").number("expansion_ratio", 4)
    ffn = d_model * ratio
    if ffn != int(ffn):
        raise SpecError(f"{cfg.origin}: d_model * expansion_ratio = {ffn} is not an integer; fix expansion_ratio")
    heads = cfg.int("n_heads")
    return {
        "num_layers": cfg.int("n_layers"),
        "hidden_size": d_model,
        "ffn_hidden_size": int(ffn),
        "num_attention_heads": heads,
        "num_kv_heads": cfg.mapping("attn_config").int("kv_n_heads", heads),
        "vocab_size": cfg.int("vocab_size"),
        "gated_mlp": False,
        "tied_embeddings": True,  # MPT's output layer reuses the token embedding
    }


def _hf_gpt2(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    n_embd = cfg.int("n_embd")
    heads = cfg.int("n_head")
    return {
        "num_layers": cfg.int("n_layer"),
        "hidden_size": n_embd,
        "ffn_hidden_size": cfg.int("n_inner", 4 * n_embd),
        "num_attention_heads": heads,
        "num_kv_heads": heads,
        "vocab_size": cfg.int("vocab_size"),
        "gated_mlp": False,
        "tied_embeddings": cfg.bool("tie_word_embeddings", True),
        "bias": True,  # GPT-2's Conv1D layers and LayerNorms all have biases
    }


def _hf_gpt_neox(cfg: _HFConfig, arch: str) -> dict[str, Any]:
    out = _hf_common(cfg, arch, tied_default=False)
    out["gated_mlp"] = False
    out["bias"] = True  # GPT-NeoX linear layers and LayerNorms have biases
    out["norm"], out["rotary"] = "layernorm", True  # LayerNorm, rotary embedding (on rotary_pct of each head)
    return out


# architecture class name (config "architectures") and model_type -> reader
HF_ARCHITECTURES: dict[str, tuple[str, Any]] = {
    "LlamaForCausalLM": ("llama", _hf_llama),
    "MistralForCausalLM": ("mistral", _hf_llama),
    "Qwen2ForCausalLM": ("qwen2", _hf_llama),
    "Qwen3ForCausalLM": ("qwen3", _hf_llama),
    "MixtralForCausalLM": ("mixtral", _hf_mixtral),
    "Qwen2MoeForCausalLM": ("qwen2_moe", _hf_qwen_moe),
    "Qwen3MoeForCausalLM": ("qwen3_moe", _hf_qwen_moe),
    "DeepseekV2ForCausalLM": ("deepseek_v2", _hf_deepseek),
    "DeepseekV3ForCausalLM": ("deepseek_v3", _hf_deepseek),
    "GptOssForCausalLM": ("gpt_oss", _hf_gpt_oss),
    "MptForCausalLM": ("mpt", _hf_mpt),
    "GPT2LMHeadModel": ("gpt2", _hf_gpt2),
    "GPTNeoXForCausalLM": ("gpt_neox", _hf_gpt_neox),
    "NemotronForCausalLM": ("nemotron", _hf_nemotron),
}
_HF_BY_MODEL_TYPE = {model_type: (arch, reader) for arch, (model_type, reader) in HF_ARCHITECTURES.items()}


def read_json(path: Path, what: str = "model file") -> Any:
    """A JSON file through the guarded reader (:mod:`tierwise.files`): duplicate keys and NaN are errors."""
    return load_json(read_user_text(path, what=what), f"{what} {str(path)!r}")


def _hf_reader(cfg: Mapping[str, Any], where: str) -> tuple[str, Any]:
    archs = cfg.get("architectures") or []
    if isinstance(archs, str):
        archs = [archs]
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecError(f"architectures={short_repr(archs)} in {where} must be a list of class names such as "
                        "[\"LlamaForCausalLM\"]")
    for arch in archs:
        if arch in HF_ARCHITECTURES:
            return arch, HF_ARCHITECTURES[arch][1]
    model_type = cfg.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise SpecError(f"model_type={short_repr(model_type)} in {where} must be a string such as \"llama\"")
    if model_type in _HF_BY_MODEL_TYPE:
        return _HF_BY_MODEL_TYPE[model_type]
    got = archs or model_type
    raise SpecError(
        f"unsupported Hugging Face architecture {short_repr(got)} in {where}; supported: "
        f"{', '.join(HF_ARCHITECTURES)} (or describe the model inline with num_layers, hidden_size, ...)"
    )


def hf_model_values(path_or_dict: str | Path | Mapping[str, Any], *,
                    name: str | None = None) -> tuple[dict[str, Any], str]:
    """The inline model keys read from a Hugging Face ``config.json`` (a path or the parsed dict), with the
    ``name`` and ``source`` filled, and where they came from (for error messages).

    The architecture is read from ``architectures`` (else ``model_type``); see :data:`HF_ARCHITECTURES`.
    Name defaults to the config's ``_name_or_path``, else the folder holding ``config.json``, else the
    file's stem.
    """
    if isinstance(path_or_dict, Mapping):
        cfg, where, default_name = path_or_dict, "Hugging Face config", "hf-model"
    else:
        path = Path(path_or_dict)
        cfg, where = read_json(path), f"Hugging Face config {str(path)!r}"
        # ".../Llama-3.1-8B/config.json" -> "Llama-3.1-8B"; "Llama-3.1-8B.config.json" -> "Llama-3.1-8B"
        default_name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        default_name = default_name.removesuffix(".config")
        if not isinstance(cfg, Mapping):
            raise SpecError(f"{where} holds {describe_type(cfg)}, not a JSON object; is it a config.json?")
    arch, reader = _hf_reader(cfg, where)
    values = reader(_HFConfig(cfg, where, arch), arch)
    cfg_name = cfg.get("_name_or_path")
    if cfg_name is not None and not isinstance(cfg_name, str):
        raise SpecError(f"_name_or_path={short_repr(cfg_name)} in {where} must be a string (the model's name)")
    values["name"] = name or cfg_name or default_name
    values["source"] = f"Hugging Face config.json ({arch}): {where}"
    return values, where
