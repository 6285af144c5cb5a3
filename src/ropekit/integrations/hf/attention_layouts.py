"""Attention layouts of transformers models that change what a RoPE swap or an attention method must do.

* **DeepSeek's softmax-scale term.** transformers' DeepSeek-V2-style attention classes (those whose module
  defines ``yarn_apply_mscale``: DeepSeek-V2, V3, V3.2, Mistral 4, LongCat-Flash, MiniCPM3, GLM-4-MoE-Lite, ...)
  multiply the softmax scale by g(s, mscale_all_dim)² once, when the layer is built, from the config's YaRN factor.
  :func:`sync_softmax_scale` sets it again for the scaling :func:`~ropekit.integrations.hf.patch_rope.apply_scaling`
  installs (:meth:`~ropekit.scaling.base.ScalingConfig.softmax_mscale`), so the patched model equals one
  transformers builds from the new config.
* **Multi-head latent attention** (``qk_rope_head_dim`` in the config): only the last ``qk_rope_head_dim`` dims of
  each head rotate, and queries, keys and values have different head sizes. ropekit's attention methods re-rotate
  the leading dims of q and k, so :func:`refuse_attention_method` refuses such models by name.
* **Attention sinks** (gpt-oss's learned per-head ``sinks``, passed to attention as ``s_aux``): an extra softmax
  column ropekit's attention core does not have; refused by name (:func:`refuse_attention_method`, and
  :func:`refuse_sinks` at call time).
* **Half-width rotary tables** (gpt-oss: its rotary module returns one cos/sin column per pair for its own
  ``_apply_rotary_emb``, where Llama-style models repeat them for ``rotate_half``): ropekit's rotary adapter returns
  the Llama form, so :func:`~ropekit.integrations.hf.patch_rope.apply_scaling` refuses these models by name
  (:func:`refuse_rotary_swap`); ``ropekit extend`` writes their native config instead.
"""

from __future__ import annotations

import sys
from typing import Any

from torch import nn

from ropekit.scaling.registry import ScalingConfig
from ropekit.scaling.yarn import YarnScaling

__all__ = [
    "applies_softmax_mscale",
    "refuse_attention_method",
    "refuse_rotary_swap",
    "refuse_sinks",
    "sync_softmax_scale",
]

#: model types whose rotary module returns half-width cos/sin tables (one column per pair)
HALF_TABLE_MODELS = frozenset({"gpt_oss"})


def applies_softmax_mscale(layer: nn.Module) -> bool:
    """Whether transformers built ``layer`` (an attention module) with DeepSeek's softmax-scale term."""
    module = sys.modules.get(type(layer).__module__)
    return hasattr(layer, "scaling") and getattr(module, "yarn_apply_mscale", None) is not None


def _loaded_term(config: Any) -> float:
    """The term transformers applied when it built the model (its ``yarn_apply_mscale`` on the loaded dict)."""
    params = getattr(config, "rope_parameters", None) or {}
    if params.get("rope_type", "default") == "default" or not params.get("mscale_all_dim"):
        return 1.0
    return YarnScaling(
        factor=float(params["factor"]), original_max_position_embeddings=1, mscale_all_dim=params["mscale_all_dim"]
    ).softmax_mscale()


def sync_softmax_scale(model: nn.Module, source_config: Any, scaling: ScalingConfig | None) -> int:
    """Set the softmax scale of every layer built with DeepSeek's term to the one ``scaling`` gives.

    Args:
        model: the transformers model, in place.
        source_config: the config the model was built from (its term is divided out once, then remembered).
        scaling: the scaling now installed (``None``: plain RoPE, term 1).

    Returns:
        How many layers were set (0 for models without the term).
    """
    layers = [m for m in model.modules() if hasattr(m, "layer_idx") and applies_softmax_mscale(m)]
    term = 1.0 if scaling is None else scaling.softmax_mscale()
    for layer in layers:
        if getattr(layer, "ropekit_unscaled_softmax", None) is None:
            layer.ropekit_unscaled_softmax = float(layer.scaling) / _loaded_term(source_config)
        layer.scaling = layer.ropekit_unscaled_softmax * term
    return len(layers)


def refuse_attention_method(model: nn.Module) -> None:
    """Raise ``ValueError`` for models whose attention layout ropekit's attention methods cannot re-position."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if any(getattr(m, "sinks", None) is not None and hasattr(m, "layer_idx") for m in model.modules()):
        refuse_sinks(model, {"s_aux": True})
    rope_dims = getattr(config, "qk_rope_head_dim", None)
    if rope_dims:
        raise ValueError(
            f"{type(model).__name__} uses multi-head latent attention (qk_rope_head_dim={rope_dims}): only the last "
            f"{rope_dims} dims of each head rotate and q, k, v differ in head size; ropekit's attention methods "
            "re-rotate the leading dims, so they are not supported on this model"
        )


def refuse_sinks(module: nn.Module, kwargs: dict[str, Any]) -> None:
    """Raise ``ValueError`` when transformers passes learned attention sinks (``s_aux``) to the attention function."""
    if kwargs.get("s_aux") is not None:
        raise ValueError(
            f"{type(module).__name__} has learned attention sinks (s_aux, gpt-oss): an extra softmax column that "
            "ropekit's attention methods do not model; they are not supported on this model"
        )


def refuse_rotary_swap(model: nn.Module) -> None:
    """Raise ``ValueError`` for models whose rotary tables ropekit's adapter cannot stand in for (:data:`HALF_TABLE_MODELS`)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    model_type = getattr(config, "model_type", None)
    if model_type in HALF_TABLE_MODELS:
        raise ValueError(
            f"{type(model).__name__} ({model_type}) rotates with half-width cos/sin tables of its own; ropekit's rotary "
            "adapter returns rotate_half tables, so apply_scaling and the attention methods are not supported on it "
            "(ropekit extend writes its native config instead)"
        )
