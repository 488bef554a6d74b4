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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError, did_you_mean
from tierwise.files import describe_type, require_document, short_repr
from tierwise.limits import MAX_DIM, MAX_LAYERS, check_float
from tierwise.specs import catalog
from tierwise.specs.hf_config import hf_model_values, read_json

__all__ = [
    "MoESpec",
    "MLASpec",
    "ModelSpec",
    "model_from_mapping",
    "model_from_hf_config",
    "load_model",
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
# Hugging Face config.json (read in tierwise.specs.hf_config)


def model_from_hf_config(path_or_dict: str | Path | Mapping[str, Any], *, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (a path or the parsed dict).

    The architecture is read from ``architectures`` (else ``model_type``); see
    :data:`tierwise.specs.hf_config.HF_ARCHITECTURES`. Name defaults to the config's ``_name_or_path``, else
    the folder holding ``config.json``, else the file's stem. Attention biases, GPT-OSS attention sinks and
    learned position embeddings are dropped (a fraction of a percent of the parameters). Every field a reader
    uses is type- and range-checked: a head count of 0, ``"4096"`` where a number belongs, ``"false"`` where a
    boolean belongs or a list where a mapping belongs is one :class:`SpecError` naming the field, the value and
    the file.
    """
    values, where = hf_model_values(path_or_dict, name=name)
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
        data = read_json(path)
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
