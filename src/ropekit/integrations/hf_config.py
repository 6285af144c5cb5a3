"""Reading and writing Hugging Face transformers RoPE configs (no transformers import needed).

transformers 5.x keeps RoPE settings in ``rope_parameters`` (with ``rope_type``, ``rope_theta`` and
``partial_rotary_factor``); 4.x used ``rope_scaling`` (legacy key ``type``) beside a top-level ``rope_theta``.
Both are read. transformers' quirks are reproduced here, the compatible mode, and nowhere else:

* YaRN ``beta_fast``/``beta_slow`` of 0 (or null) mean the defaults 32 and 1 (transformers uses ``or``).
* YaRN and LongRoPE ``factor`` missing means ``max_position_embeddings / original_max_position_embeddings``.
* yarn, longrope and llama3 take ``original_max_position_embeddings`` from the top level first (Phi-3),
  then from the rope dict, then fall back to ``max_position_embeddings``.
* dynamic NTK's original length is the model's ``max_position_embeddings``.
* The rotary dim is ``int(head_dim * partial_rotary_factor)`` (GPT-NeoX's ``rotary_pct`` is the same thing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ropekit.config import RopeConfig
from ropekit.scaling.ntk import ntk_base
from ropekit.scaling.registry import get_scaling

_REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": (),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
}
_NOT_SCALING_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    raise TypeError(f"config must be a dict or a transformers PretrainedConfig, got {type(config).__name__}")


def _head_dim(top: dict[str, Any]) -> int:
    if top.get("head_dim"):
        return int(top["head_dim"])
    if top.get("hidden_size") and top.get("num_attention_heads"):
        return int(top["hidden_size"]) // int(top["num_attention_heads"])
    raise ValueError("config needs head_dim, or hidden_size and num_attention_heads, to know the head size")


def from_hf_config(config: Any, *, interleaved: bool = False) -> RopeConfig:
    """Build a :class:`RopeConfig` from a transformers config object or its ``config.json`` dict.

    Args:
        config: a ``PretrainedConfig`` or a dict (5.x ``rope_parameters`` or 4.x ``rope_scaling``).
        interleaved: the weights' pair layout; transformers' own models are half-split (``False``).

    Raises:
        ValueError: a required key is missing, the rope type is unknown, or a value is out of range.
    """
    top = _as_dict(config)
    params = dict(top.get("rope_parameters") or top.get("rope_scaling") or {})
    rope_type = params.get("rope_type", params.get("type", "default"))
    method = get_scaling(rope_type)
    base = params.get("rope_theta", top.get("rope_theta", 10000.0))
    partial = params.get("partial_rotary_factor", top.get("partial_rotary_factor", top.get("rotary_pct", 1.0)))
    head_dim = _head_dim(top)
    rotary_dim = int(head_dim * partial)
    if method.name == "proportional":
        rotary_dim = 2 * int(partial * head_dim // 2)
    missing = [key for key in _REQUIRED.get(method.name, ()) if params.get(key) is None]
    if missing:
        raise ValueError(f"rope_parameters for rope_type {rope_type!r} is missing required key(s) {missing}")
    scaling_params = {k: v for k, v in params.items() if k not in _NOT_SCALING_KEYS}
    max_len = top.get("max_position_embeddings")
    if method.name in ("yarn", "longrope", "llama3"):
        original = top.get("original_max_position_embeddings") or params.get("original_max_position_embeddings")
        original = original or max_len
        if original is None:
            raise ValueError(
                f"rope_type {rope_type!r} needs original_max_position_embeddings (or max_position_embeddings)"
            )
        scaling_params["original_max_position_embeddings"] = int(original)
        if scaling_params.get("factor") is None:
            if method.name == "llama3":
                raise ValueError("rope_parameters for rope_type 'llama3' is missing required key(s) ['factor']")
            if max_len is None:
                raise ValueError(f"rope_type {rope_type!r} without factor needs max_position_embeddings")
            scaling_params["factor"] = max_len / original
    if method.name == "yarn":
        for key, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
            scaling_params[key] = scaling_params.get(key) or default
        scaling_params = {k: v for k, v in scaling_params.items() if v is not None}
    if method.name == "dynamic":
        if max_len is None:
            raise ValueError("rope_type 'dynamic' needs max_position_embeddings (its original length)")
        scaling_params["original_max_position_embeddings"] = int(max_len)
    if method.name == "longrope":
        scaling_params = {k: v for k, v in scaling_params.items() if v is not None}
    scaling = None if method.name == "default" else method.make(**scaling_params)
    return RopeConfig(
        head_dim,
        base=float(base),
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        interleaved=interleaved,
        scaling=scaling,
    )


def to_hf_dict(rope: RopeConfig) -> dict[str, Any]:
    """transformers 5.x ``rope_parameters`` for ``rope`` (see :meth:`RopeConfig.to_hf_dict`).

    For ``dynamic``, transformers reads the original length from the model's ``max_position_embeddings``;
    set that key on the model config to ``original_max_position_embeddings``.
    """
    scaling = rope.scaling
    rope_type, base, params = "default", rope.base, {}
    if scaling is not None:
        params = scaling.hf_params()
        if scaling.rope_type == "ntk":
            base, params = ntk_base(rope.base, scaling.factor, rope.dim), {}
        elif scaling.rope_type == "base":
            base, params = scaling.base, {}
        else:
            rope_type = scaling.rope_type
        if rope_type == "dynamic":
            params.pop("original_max_position_embeddings")
    result: dict[str, Any] = {"rope_type": rope_type, "rope_theta": base}
    if rope.dim != rope.head_dim:
        result["partial_rotary_factor"] = rope.dim / rope.head_dim
    result.update(params)
    return result
