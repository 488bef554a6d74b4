"""Model specs: the shape of a decoder-only transformer, as the workload formulas need it.

A model comes from one of three places, all ending in the same frozen :class:`ModelSpec`:

* a catalog name (``specs/catalog/models.yaml``, every entry with its ``source``);
* an inline mapping with the same keys (a scenario's ``model:``, or a ``.yaml`` file);
* a Hugging Face ``config.json`` (:func:`model_from_hf_config`).

:func:`load_model` accepts any of them. Every malformed input raises a one-line :class:`SpecError`
(or :class:`CatalogError` for an unknown name) that names the value and the fix.

Inline keys (the issue's contract)::

    num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_kv_heads, head_dim, vocab_size,
    gated_mlp, tied_embeddings, sliding_window, sliding_window_layers, mtp_layers, params_b, display_name,
    source, notes, moe: {num_experts, top_k, ffn_hidden_size, shared_experts, shared_ffn_hidden_size,
                 first_dense_layers, layer_freq},
    mla: {q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim}

Under ``moe``, ``ffn_hidden_size`` is one routed expert's MLP width; the top-level ``ffn_hidden_size`` is
the dense layers' MLP width.

>>> m = model_from_mapping({"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 256,
...                         "num_attention_heads": 4, "vocab_size": 100, "gated_mlp": False},
...                        origin="example")
>>> m.num_kv_heads, m.head_dim, m.num_dense_layers
(4, 16, 2)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError, did_you_mean
from tierwise.files import describe_type, load_json, read_user_text, require_document, short_repr
from tierwise.limits import MAX_DIM, MAX_LAYERS, check_float
from tierwise.specs import catalog

__all__ = [
    "MoESpec",
    "MLASpec",
    "ModelSpec",
    "model_from_mapping",
    "model_from_hf_config",
    "load_model",
    "HF_ARCHITECTURES",
]


# --------------------------------------------------------------------------------------------------
# spec types


MAX_DIMENSION = MAX_DIM
"""Largest value of any model dimension or count (2^24 = 16,777,216; layer counts 2^16): far above any
real model (vocabularies are ~10^5, widths ~10^4), low enough that the estimator's integer arithmetic
cannot overflow."""


def _bound(name: str) -> int:
    return MAX_LAYERS if name.endswith("layers") or name == "layer_freq" else MAX_DIM


def _positive(owner: str, name: str, value: object) -> None:
    """A positive integer at most 2^24 (2^16 for layer counts): bigger widths overflow the FLOP arithmetic."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _bound(name):
        raise SpecError(f"{owner}: {name}={short_repr(value)} must be a positive integer; use 1 <= {name} <= "
                        f"{_bound(name):,}")


def _non_negative(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _bound(name):
        raise SpecError(f"{owner}: {name}={short_repr(value)} must be an integer >= 0; use 0 <= {name} <= "
                        f"{_bound(name):,}")


MOE_BALANCE = ("aux-loss", "aux-free")
"""How a router's load is balanced (:attr:`MoESpec.balance`)."""


@dataclass(frozen=True, kw_only=True)
class MoESpec:
    """The mixture-of-experts part of a model (routed experts, optional shared experts, layer pattern)."""

    num_experts: int
    """Routed experts per MoE layer."""
    top_k: int
    """Routed experts each token is sent to."""
    ffn_hidden_size: int
    """MLP intermediate width of one routed expert."""
    shared_experts: int = 0
    """Always-on shared experts per MoE layer (DeepSeek-V3: 1)."""
    shared_ffn_hidden_size: int | None = None
    """MLP intermediate width of one shared expert; ``None`` on input means ``ffn_hidden_size`` and is
    resolved on construction, so it is always an int afterwards."""
    first_dense_layers: int = 0
    """Leading dense (non-MoE) layers (DeepSeek-V3: 3)."""
    layer_freq: int = 1
    """After ``first_dense_layers``, every ``layer_freq``-th layer is MoE, the others dense: with
    ``j`` counted from 0 after the leading dense layers, layer ``j`` is MoE when ``(j + 1) % layer_freq == 0``
    (Hugging Face's ``decoder_sparse_step`` convention; 1 = every layer)."""
    n_group: int = 1
    """Groups the routed experts are split into for group-limited routing (Hugging Face DeepSeek config
    ``n_group``; DeepSeek-V3: 8). 1 = no grouping."""
    topk_group: int = 0
    """Groups a token's experts may come from (config ``topk_group``; DeepSeek-V3: 4). With one group per
    node this is the report's node-limited routing, "each token will be sent to at most M nodes"
    (arXiv:2412.19437 sec. 2.1.2 and 3.2.2, M = 4). 0 = ``n_group`` (no limit)."""
    balance: str = "aux-loss"
    """How the router was trained to spread the load: ``aux-loss`` (an auxiliary balance loss: GShard, Switch,
    Mixtral, Qwen3; the experts keep a skewed popularity, :func:`tierwise.parallel.eplb.expert_load_imbalance`) or
    ``aux-free`` (DeepSeek-V3's auxiliary-loss-free balancing, arXiv:2412.19437 sec. 2.1.2: a per-expert bias
    nudged each step toward equal loads; Hugging Face config ``topk_method: noaux_tc``)."""

    def __post_init__(self) -> None:
        owner = "moe"
        if self.balance not in MOE_BALANCE:
            raise SpecError(f"moe: balance={short_repr(self.balance)} is not one of {', '.join(MOE_BALANCE)}")
        for name in ("num_experts", "top_k", "ffn_hidden_size", "layer_freq"):
            _positive(owner, name, getattr(self, name))
        for name in ("shared_experts", "first_dense_layers"):
            _non_negative(owner, name, getattr(self, name))
        if self.shared_ffn_hidden_size is None:
            object.__setattr__(self, "shared_ffn_hidden_size", self.ffn_hidden_size)
        _positive(owner, "shared_ffn_hidden_size", self.shared_ffn_hidden_size)
        _positive(owner, "n_group", self.n_group)
        if self.topk_group == 0:
            object.__setattr__(self, "topk_group", self.n_group)
        if not 1 <= self.topk_group <= self.n_group or self.num_experts % self.n_group:
            raise SpecError(f"moe: topk_group={self.topk_group} and n_group={self.n_group}: n_group must divide "
                            f"num_experts={self.num_experts} and 1 <= topk_group <= n_group")
        if self.top_k > self.num_experts:
            raise SpecError(
                f"moe: top_k={self.top_k} exceeds num_experts={self.num_experts}; "
                f"a token can be routed to at most {self.num_experts} experts"
            )


@dataclass(frozen=True, kw_only=True)
class MLASpec:
    """DeepSeek multi-head latent attention (DeepSeek-V2 paper, arXiv 2405.04434, Sec. 2.1).

    Queries: ``h -> q_lora_rank -> heads * (qk_nope_head_dim + qk_rope_head_dim)`` (a direct
    ``h -> heads * (nope + rope)`` projection when ``q_lora_rank`` is ``None``). Keys and values: ``h ->
    kv_lora_rank`` (the cached latent) plus a shared ``qk_rope_head_dim`` rotary key, then ``kv_lora_rank ->
    heads * (qk_nope_head_dim + v_head_dim)``. Output: ``heads * v_head_dim -> h``.
    """

    q_lora_rank: int | None
    """Rank of the query down-projection; ``None`` = no query compression (DeepSeek-V2-Lite)."""
    kv_lora_rank: int
    """Rank of the joint key-value latent."""
    qk_nope_head_dim: int
    """Per-head query/key width without rotary embedding."""
    qk_rope_head_dim: int
    """Per-head query/key width that carries the rotary embedding (the key part is shared by all heads)."""
    v_head_dim: int
    """Per-head value width."""

    def __post_init__(self) -> None:
        if self.q_lora_rank is not None:
            _positive("mla", "q_lora_rank", self.q_lora_rank)
        for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _positive("mla", name, getattr(self, name))

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query-key dot product: ``qk_nope_head_dim + qk_rope_head_dim``."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer: the dimensions FLOP, memory and traffic formulas read.

    Every layer has attention and an MLP; with ``moe`` set, some layers' MLP is a mixture of experts
    (see :attr:`moe_layer_mask`). Biases, learned position embeddings and norms' shapes are not modelled
    separately (they are a fraction of a percent of parameters and FLOPs).
    """

    name: str
    """Catalog name (lowercase, hyphens) or a name given by the user."""
    num_layers: int
    """Transformer layers (decoder blocks)."""
    hidden_size: int
    """Model width ``h``."""
    ffn_hidden_size: int
    """Dense layers' MLP intermediate width."""
    num_attention_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads (= ``num_attention_heads`` for multi-head attention, fewer for GQA/MQA)."""
    head_dim: int = 0
    """Per-head width; 0 on input means ``hidden_size // num_attention_heads``, resolved on construction.
    With ``mla`` set it is the query-key width ``qk_nope_head_dim + qk_rope_head_dim``."""
    vocab_size: int
    """Vocabulary size as the embedding table holds it (padded, where the framework pads)."""
    gated_mlp: bool
    """True for SwiGLU/GeGLU (three matrices: gate, up, down), False for GeLU/ReLU^2 (two: up, down)."""
    tied_embeddings: bool = False
    """Whether the output projection shares the input embedding's weights."""
    norm: str = ""
    """``rmsnorm`` or ``layernorm``; empty: RMSNorm for gated-MLP (Llama-style) models, LayerNorm otherwise."""
    rotary: bool | None = None
    """Rotary position embedding on q and k; None: true for gated-MLP (Llama-style) models, false otherwise."""
    bias: bool = False
    """Linear layers and LayerNorms carry bias vectors (GPT-2, GPT-3 and Megatron's GPT; Llama-family, Mixtral,
    Qwen and MPT models have none). It sets how many parameter tensors a layer has (ZeRO-3 ``tensor-list``
    gathers issue one collective per tensor); the biases' few parameters are not counted in FLOPs or bytes."""
    moe: MoESpec | None = None
    """Mixture-of-experts part, or None for a dense model."""
    mla: MLASpec | None = None
    """Multi-head latent attention dimensions, or None for standard (GQA/MHA) attention."""
    sliding_window: int | None = None
    """Window (tokens) of the sliding-window attention layers (GPT-OSS: 128), None without any."""
    sliding_window_layers: int = 0
    """How many layers use the sliding window (GPT-OSS-120B: 18 of 36, alternating)."""
    mtp_layers: int = 0
    """Multi-token-prediction modules trained beside the main model (Hugging Face config
    ``num_nextn_predict_layers``; DeepSeek-V3: 1, arXiv:2412.19437 sec. 2.2 and 4.2 "we set the number of MTP
    modules D to 1"). Each is one more transformer block of the model's last layer's kind, a projection ``M_k`` of
    ``2h -> h`` and two RMSNorms, sharing the embedding and the output head with the main model; not counted in
    ``num_layers`` nor in ``params_b`` (DeepSeek-V3 README_WEIGHTS.md: 11.5B unique MTP parameters beside the 671B).
    0 = none."""
    params_b: float | None = None
    """Published parameter count in billions, for reference and tests."""
    training_precision: str = "bf16"
    """Matmul precision the model was trained in, the planner's default (bf16 unless the source says otherwise;
    DeepSeek-V3: fp8, arXiv:2412.19437 Sec. 3.3). 16-bit (fp16) runs count as bf16: the same dense peak."""
    display_name: str = ""
    """Human-readable name; defaults to ``name``."""
    source: str = ""
    """Where the values come from (paper section, config.json URL)."""
    notes: str = ""
    """Caveats: simplifications, ambiguities, which source won where sources disagree."""

    def __post_init__(self) -> None:
        owner = f"model {short_repr(self.name)}"
        for name in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                     "num_kv_heads", "vocab_size"):
            _positive(owner, name, getattr(self, name))
        if self.head_dim == 0:
            if self.hidden_size % self.num_attention_heads:
                raise SpecError(
                    f"{owner}: hidden_size={self.hidden_size} is not a multiple of "
                    f"num_attention_heads={self.num_attention_heads}; give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        _positive(owner, "head_dim", self.head_dim)
        if self.num_attention_heads % self.num_kv_heads:
            divisors = [d for d in range(1, self.num_attention_heads + 1) if self.num_attention_heads % d == 0]
            raise SpecError(
                f"{owner}: num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_kv_heads={self.num_kv_heads}; use num_kv_heads in {{{', '.join(map(str, divisors))}}}"
            )
        self._check_flags(owner)
        if not self.norm:
            object.__setattr__(self, "norm", "rmsnorm" if self.gated_mlp else "layernorm")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise SpecError(f"{owner}: norm={short_repr(self.norm)}; use rmsnorm or layernorm")
        if self.rotary is None:
            object.__setattr__(self, "rotary", self.gated_mlp)
        if not isinstance(self.rotary, bool):
            raise SpecError(f"{owner}: rotary={short_repr(self.rotary)} must be true or false")
        self._check_moe(owner)
        self._check_sliding_window(owner)
        if self.params_b is not None:
            try:
                check_float(self.params_b, "params_b", minimum=0.0, min_open=True, maximum=1e6, error=SpecError,
                            sep="=", hint=" (billions)")
            except SpecError as exc:
                raise SpecError(f"{owner}: {exc}") from None
        if self.training_precision not in ("bf16", "fp8"):
            raise SpecError(f"{owner}: training_precision={short_repr(self.training_precision)}; use bf16 or fp8")
        if not self.display_name:
            object.__setattr__(self, "display_name", self.name)

    def _check_flags(self, owner: str) -> None:
        for name in ("gated_mlp", "tied_embeddings", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"{owner}: {name}={short_repr(getattr(self, name))} must be true or false")
        for name in ("name", "display_name", "source", "notes"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(f"{owner}: {name}={short_repr(getattr(self, name))} must be a string")

    def _check_moe(self, owner: str) -> None:
        if self.moe is None:
            return
        if self.moe.first_dense_layers >= self.num_layers:
            raise SpecError(
                f"{owner}: moe.first_dense_layers={self.moe.first_dense_layers} leaves no MoE layer of "
                f"num_layers={self.num_layers}; use first_dense_layers < {self.num_layers}, or drop moe"
            )
        if self.num_moe_layers == 0:
            raise SpecError(
                f"{owner}: moe.layer_freq={self.moe.layer_freq} leaves no MoE layer among the "
                f"{self.num_layers - self.moe.first_dense_layers} layers after the dense ones; lower layer_freq"
            )

    def _check_sliding_window(self, owner: str) -> None:
        if self.sliding_window is not None:
            _positive(owner, "sliding_window", self.sliding_window)
        _non_negative(owner, "sliding_window_layers", self.sliding_window_layers)
        _non_negative(owner, "mtp_layers", self.mtp_layers)
        if self.sliding_window_layers > self.num_layers:
            raise SpecError(
                f"{owner}: sliding_window_layers={self.sliding_window_layers} exceeds "
                f"num_layers={self.num_layers}"
            )
        if self.sliding_window_layers and self.sliding_window is None:
            raise SpecError(
                f"{owner}: sliding_window_layers={self.sliding_window_layers} needs sliding_window "
                f"(the window size in tokens)"
            )

    # derived values -------------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        """Whether some layers are mixture-of-experts layers."""
        return self.moe is not None

    @property
    def moe_layer_mask(self) -> tuple[bool, ...]:
        """Per layer (0 .. num_layers-1), whether its MLP is an MoE layer.

        Layer ``i`` is MoE when ``i >= first_dense_layers`` and ``(i - first_dense_layers + 1) %
        layer_freq == 0``; all False for a dense model. Pipeline stages slice this to count their layers.
        """
        if self.moe is None:
            return (False,) * self.num_layers
        first, freq = self.moe.first_dense_layers, self.moe.layer_freq
        return tuple(i >= first and (i - first + 1) % freq == 0 for i in range(self.num_layers))

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return sum(self.moe_layer_mask)

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP of width ``ffn_hidden_size``."""
        return self.num_layers - self.num_moe_layers

    @property
    def kv_channels(self) -> int:
        """Width of the key (and of the value) projection output: ``num_kv_heads * head_dim``."""
        return self.num_kv_heads * self.head_dim

    @property
    def q_channels(self) -> int:
        """Width of the query projection output: ``num_attention_heads * head_dim``."""
        return self.num_attention_heads * self.head_dim


# --------------------------------------------------------------------------------------------------
# inline mappings and catalog entries

_MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec))
_MOE_FIELDS = tuple(f.name for f in dataclasses.fields(MoESpec))
_MLA_FIELDS = tuple(f.name for f in dataclasses.fields(MLASpec))
_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "gated_mlp")
_MOE_REQUIRED = ("num_experts", "top_k", "ffn_hidden_size")
_MLA_REQUIRED = _MLA_FIELDS


def _check_keys(data: Mapping[str, Any], valid: tuple[str, ...], where: str, prefix: str = "") -> None:
    for key in data:
        if key not in valid:
            raise SpecError(
                f"unknown model key {short_repr(prefix + str(key))} in {where}{did_you_mean(str(key)[:100], list(valid))}; "
                f"valid keys{' under ' + prefix.rstrip('.') if prefix else ''}: {', '.join(valid)}"
            )


def _check_required(data: Mapping[str, Any], required: tuple[str, ...], where: str, prefix: str = "") -> None:
    missing = [k for k in required if k not in data]
    if missing:
        raise SpecError(
            f"model in {where} is missing required key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(prefix + k for k in missing)}; add {'them' if len(missing) > 1 else 'it'}"
        )


def _sub_mapping(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(f"model key {key!r} in {where} must be a mapping of keys, not {describe_type(value)} "
                        f"({short_repr(value)})")
    return value


def model_from_mapping(data: Mapping[str, Any], *, origin: str) -> ModelSpec:
    """Build a :class:`ModelSpec` from an inline mapping or a catalog entry.

    ``origin`` says where the mapping came from ("catalog model 'llama3.1-8b'", a file path, "scenario
    model"); every error names it. Defaults: ``num_kv_heads`` = ``num_attention_heads``, ``head_dim`` =
    ``hidden_size // num_attention_heads``, ``ffn_hidden_size`` = ``moe.ffn_hidden_size`` when the model has
    no dense layer (it is required otherwise), ``name`` = ``"custom"``.
    """
    if not isinstance(data, Mapping):
        raise SpecError(f"model in {origin} must be a mapping of keys (num_layers, hidden_size, ...), not "
                        f"{describe_type(data)}")
    _check_keys(data, _MODEL_FIELDS, origin)
    _check_required(data, _REQUIRED, origin)
    kwargs: dict[str, Any] = {k: v for k, v in data.items() if k not in ("moe", "mla")}
    moe_data = _sub_mapping(data, "moe", origin)
    mla_data = _sub_mapping(data, "mla", origin)
    try:
        if moe_data is not None:
            _check_keys(moe_data, _MOE_FIELDS, origin, prefix="moe.")
            _check_required(moe_data, _MOE_REQUIRED, origin, prefix="moe.")
            kwargs["moe"] = MoESpec(**moe_data)
        if mla_data is not None:
            _check_keys(mla_data, _MLA_FIELDS, origin, prefix="mla.")
            _check_required(mla_data, _MLA_REQUIRED, origin, prefix="mla.")
            kwargs["mla"] = MLASpec(**mla_data)
        kwargs.setdefault("name", "custom")
        kwargs.setdefault("num_kv_heads", kwargs.get("num_attention_heads"))
        if "ffn_hidden_size" not in kwargs:
            moe = kwargs.get("moe")
            if moe is None or moe.first_dense_layers > 0 or moe.layer_freq > 1:
                raise SpecError(
                    f"model in {origin} is missing required key ffn_hidden_size (the dense layers' MLP "
                    f"width); add it"
                )
            kwargs["ffn_hidden_size"] = moe.ffn_hidden_size
        if kwargs.get("head_dim") == 0:
            raise SpecError("head_dim=0 must be a positive integer")
        return ModelSpec(**kwargs)
    except SpecError as exc:
        message = str(exc)
        if origin in message:
            raise
        owner = f"model {short_repr(kwargs.get('name'))}: "
        if message.startswith(owner):
            message = message[len(owner):]
        raise SpecError(f"{origin}: {message}") from None


# --------------------------------------------------------------------------------------------------
# Hugging Face config.json

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
        """A whole number >= ``minimum`` (and <= :data:`MAX_DIMENSION`); required unless ``default`` is given."""
        value = self._raw(key, required=default is _ABSENT)
        if value is _ABSENT:
            return default
        want = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_DIMENSION:
            raise self._bad(key, value, f"at most {MAX_DIMENSION:,}")  # 10**400 too: past a float, not "not whole"
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) \
                or int(value) != value:
            raise self._bad(key, value, want)
        if value < minimum:
            raise self._bad(key, value, want)
        if value > MAX_DIMENSION:
            raise self._bad(key, value, f"at most {MAX_DIMENSION:,}")
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


def _read_json(path: Path, what: str = "model file") -> Any:
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


def model_from_hf_config(path_or_dict: str | Path | Mapping[str, Any], *, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (a path or the parsed dict).

    The architecture is read from ``architectures`` (else ``model_type``); see :data:`HF_ARCHITECTURES`.
    Name defaults to the config's ``_name_or_path``, else the folder holding ``config.json``, else the
    file's stem. Attention biases, GPT-OSS attention sinks and learned position embeddings are dropped
    (a fraction of a percent of the parameters). Every field a reader uses is type- and range-checked:
    a head count of 0, ``"4096"`` where a number belongs, ``"false"`` where a boolean belongs or a list where
    a mapping belongs is one :class:`SpecError` naming the field, the value and the file.
    """
    if isinstance(path_or_dict, Mapping):
        cfg, where, default_name = path_or_dict, "Hugging Face config", "hf-model"
    else:
        path = Path(path_or_dict)
        cfg, where = _read_json(path), f"Hugging Face config {str(path)!r}"
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
    return model_from_mapping(values, origin=where)


# --------------------------------------------------------------------------------------------------
# one entry point


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or "/" in ref or "\\" in ref


def load_model(ref: str | Path | Mapping[str, Any] | ModelSpec) -> ModelSpec:
    """A model from a catalog name, an inline mapping, a ``.yaml``/``.yml`` file of that mapping, or a
    ``.json`` file (a Hugging Face config when it has ``architectures`` or ``model_type``).

    An unknown catalog name raises :class:`~tierwise.errors.CatalogError` with did-you-mean suggestions.
    """

    if isinstance(ref, ModelSpec):
        return ref
    if isinstance(ref, Mapping):
        return model_from_mapping(ref, origin="inline model")
    if isinstance(ref, Path) or (isinstance(ref, str) and _looks_like_path(ref)):
        return _load_model_file(Path(ref))
    if isinstance(ref, str):
        key = ref.strip().lower()
        data = catalog.entry("models", key)
        return model_from_mapping({**data, "name": key}, origin=f"catalog model {key!r}")
    raise SpecError(f"model must be a catalog name, a mapping or a file path, not {short_repr(ref)}")


def _load_model_file(path: Path) -> ModelSpec:

    if path.suffix == ".json":
        data = _read_json(path)
        if isinstance(data, Mapping) and ("architectures" in data or "model_type" in data):
            return model_from_hf_config(path)
    elif path.suffix in (".yaml", ".yml"):
        data = catalog.load_yaml_file(path, what="model file")
    else:
        raise SpecError(f"model file {str(path)!r} must end in .yaml, .yml or .json (a Hugging Face config)")
    data = require_document(data, f"model file {str(path)!r}", "it needs num_layers, hidden_size, "
                            "num_attention_heads, vocab_size and gated_mlp, one key: value per line (or a Hugging "
                            "Face config.json)")
    data = {"name": path.stem, **data}
    return model_from_mapping(data, origin=str(path))
