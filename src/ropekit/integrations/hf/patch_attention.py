"""Training-free attention methods (:mod:`ropekit.attention`) inside transformers models, without forking their code.

:func:`apply_attention` registers one attention function, ``"ropekit"``, in transformers' attention-function
registry (``AttentionInterface``, with sdpa's mask builder under the same name in ``AttentionMaskInterface``) and
switches the model to it with ``set_attn_implementation``. The function receives the queries and keys the model
has already rotated (with whatever scaling :func:`ropekit.integrations.hf.patch_rope.apply_scaling` installed) and
re-positions them per the method (:func:`ropekit.attention.core.attend`); layers without a method fall through to sdpa.

Per-layer-type models (Gemma 3): the method goes to the full-attention (global) layers only by default; the
sliding-window layers keep sdpa and their window. ``model.ropekit_attention_layer_types`` records which.

Models with NoPE layers (SmolLM3, Llama 4: :func:`~ropekit.integrations.hf.rope_layers.rope_layout`): the method goes to
the layers that rotate q and k only. A NoPE layer's q and k carry no position, so re-positioning them would inject
positions the model never had; those layers keep sdpa, exactly the model's own attention.
``model.ropekit_attention_layers`` records the indices of the layers that got the method.

Positions: the queries are taken as the last tokens of the keys (prefill, or KV-cached decoding one token at a
time, batch without left padding); a padding mask transformers passes is applied on top of the method's pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from ropekit.attention.core import attend
from ropekit.attention.registry import AttentionConfig
from ropekit.errors import InvalidArgument
from ropekit.integrations.hf.attention_layouts import refuse_attention_method, refuse_sinks
from ropekit.integrations.hf.model_config import DEFAULT_LAYER_TYPES, rope_of
from ropekit.integrations.hf.patch_rope import HFRotaryAdapter, apply_scaling, rotary_modules
from ropekit.integrations.hf.rope_layers import layer_uses_rope, rope_layout

__all__ = ["IMPLEMENTATION", "apply_attention"]

#: the name the attention function is registered under in transformers
IMPLEMENTATION = "ropekit"


class _Binding:
    """What one attention layer runs: the method and where its frequencies live (a plain object, so the model is
    not registered as a submodule of its own layer)."""

    def __init__(self, method: AttentionConfig, parent: nn.Module, name: str, layer_type: str | None) -> None:
        self.method, self.parent, self.name, self.layer_type = method, parent, name, layer_type

    def frequencies(self):
        adapter = getattr(self.parent, self.name)  # looked up per call: set_scaling replaces the adapter
        rotary = adapter.rotaries[self.layer_type] if adapter.per_layer_type else adapter.rotary
        return rotary.frequencies

    def interleaved(self) -> bool:
        """The model's pair layout: interleaved for Llama 4's complex rotation, else rotate-half."""
        return getattr(self.parent, self.name).interleaved


def _forward(module: nn.Module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers attention function: ``(b, heads, q_len, d)`` rotated q/k → ``((b, q_len, heads, d), None)``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    binding = getattr(module, "ropekit_attention", None)
    if binding is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if dropout:
        raise ValueError(f"ropekit attention methods run in eval mode only (attention dropout {dropout})")
    refuse_sinks(module, kwargs)
    if getattr(module, "attn_logit_softcapping", None) or kwargs.get("softcap"):
        raise ValueError(f"{type(module).__name__}: attention-logit soft-capping is not supported by ropekit methods")
    out = attend(
        query,
        key,
        value,
        binding.method,
        binding.frequencies(),
        scale=scaling,
        attention_mask=attention_mask,
        interleaved=binding.interleaved(),
    )
    return out.transpose(1, 2).contiguous(), None  # (b, q_len, heads, d)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, _forward)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


def _layer_type(model: nn.Module, module: nn.Module) -> str | None:
    types = getattr(model.config, "layer_types", None) or getattr(model.config.get_text_config(), "layer_types", None)
    index = getattr(module, "layer_idx", None)
    return types[index] if types is not None and index is not None else None


def attention_layers(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of a transformers decoder (``*Attention`` modules with a ``layer_idx``)."""
    return [m for m in model.modules() if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx")]


def apply_attention(
    model: nn.Module, method: AttentionConfig | None, *, layer_types: Sequence[str] | None = None
) -> nn.Module:
    """Make ``model`` attend with ``method`` (``None``: back to sdpa), in place; returns ``model``.

    The model's current RoPE (its own, or the scaling :func:`~ropekit.integrations.hf.patch_rope.apply_scaling`
    installed) stays: the method composes with it. A model still on transformers' own rotary module first gets ropekit's
    float64 one at its native scaling, so re-positioning uses exactly the frequencies that rotated q and k.

    Args:
        layer_types: on per-layer-type models, which layer types get the method (default: full attention only).

    Raises:
        ValueError: not a RoPE model ropekit can patch, or ``layer_types`` names a type the model lacks.
    """
    native = rope_of(model)
    if method is not None:
        refuse_attention_method(model)
    layers = attention_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no *Attention layers with a layer_idx for ropekit to patch")
    if method is None:
        for layer in layers:
            layer.ropekit_attention = None
        model.set_attn_implementation(getattr(model, "ropekit_previous_attention", "sdpa"))
        model.ropekit_attention_layer_types = model.ropekit_attention_layers = model.ropekit_attention_method = None
        return model
    targets = rotary_modules(model)
    if not any(isinstance(getattr(parent, name), HFRotaryAdapter) for parent, name in targets):
        apply_scaling(model, native.scaling)
        targets = rotary_modules(model)
    parent, name = targets[0]
    present = sorted({t for t in (_layer_type(model, m) for m in layers) if t is not None})
    adapter = getattr(parent, name)
    if adapter.per_layer_type:
        chosen = (
            ([t for t in DEFAULT_LAYER_TYPES if t in present] or present) if layer_types is None else list(layer_types)
        )
        if not chosen or any(t not in present for t in chosen):
            raise InvalidArgument("layer_types", chosen, f"must name some of {present}", allowed=present)
    elif layer_types is not None:
        name, given = type(model).__name__, list(layer_types)
        raise InvalidArgument(
            "layer_types",
            given,
            allowed="none (one RoPE for all layers)",
            message=lambda n: f"{n('layer_types')}={given!r} given, but {name} has one RoPE for all layers",
        )
    else:
        chosen = None
    layout = rope_layout(model)
    bound = []
    for layer in layers:
        layer_type = _layer_type(model, layer) if adapter.per_layer_type else None
        wanted = (chosen is None or layer_type in chosen) and layer_uses_rope(layout, layer.layer_idx)
        layer.ropekit_attention = _Binding(method, parent, name, layer_type) if wanted else None
        if wanted:
            bound.append(layer.layer_idx)
    _register()
    if model.config._attn_implementation != IMPLEMENTATION:
        model.ropekit_previous_attention = model.config._attn_implementation
        model.set_attn_implementation(IMPLEMENTATION)
    model.ropekit_attention_layer_types = sorted(chosen) if chosen is not None else None
    model.ropekit_attention_layers = sorted(bound)
    model.ropekit_attention_method = method
    return model


def describe_attention(model: Any) -> dict[str, Any] | None:
    """The method the model runs (``None`` for sdpa) and where: ``layer_types`` on per-layer-type models (else
    ``None``), ``layers`` the indices of the layers that got it, and on models with NoPE layers ``nope_layers``,
    which keep the model's own attention (on a model whose layers are all NoPE, ``layers`` is empty)."""
    method = getattr(model, "ropekit_attention_method", None)
    if getattr(model, "ropekit_attention_layers", None) is None or method is None:
        return None
    described = {
        **method.describe(),
        "layer_types": getattr(model, "ropekit_attention_layer_types", None),
        "layers": list(model.ropekit_attention_layers),
    }
    layout = rope_layout(model)
    if layout is not None:
        described["nope_layers"] = layout.nope_layers
    return described
