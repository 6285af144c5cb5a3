"""Using ropekit's scaling methods inside local transformers models (optional extra; imported lazily).

:func:`apply_scaling` replaces a model's rotary embedding module(s) with :class:`HFRotaryAdapter`, which
produces the ``(cos, sin)`` pair transformers' attention layers expect — ``(batch, seq, rotary_dim)``,
halves duplicated for ``rotate_half``, times the attention factor — from ropekit's float64 frequencies. Any
registry method works, including ones transformers lacks (static ``ntk``, YaRN's paper ramp, frozen dynamic
NTK or LongRoPE). Supported: architectures with a ``*RotaryEmbedding`` module called as
``rotary_emb(x, position_ids)`` (or ``rotary_emb(x, position_ids, layer_type)``) — Llama, Mistral, Qwen2,
Phi-3 (LongRoPE), GPT-NeoX (partial rotary), Gemma, and models with one RoPE per layer type (Gemma 3: a
``layer_types`` list and ``rope_parameters`` keyed by layer type, sliding layers at base 1e4, full-attention
layers at base 1e6).

The evaluation adapter for transformers models is :class:`ropekit.eval.models.HFEvalModel`; this module knows
nothing about evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ropekit.config import RopeConfig
from ropekit.integrations.hf_config import from_hf_config
from ropekit.module import RotaryEmbedding
from ropekit.scaling.registry import ScalingConfig

SUPPORTED = ("Llama", "Mistral", "Qwen2", "Phi3", "GPTNeoX", "Gemma", "Gemma3 (per layer type)")
#: the layer types a method is applied to by default on models with one RoPE per layer type (what transformers
#: does when a Gemma 3 config carries scaling)
DEFAULT_LAYER_TYPES = ("full_attention",)


class HFRotaryAdapter(nn.Module):
    """Drop-in for a transformers ``*RotaryEmbedding``: ``forward(x, position_ids[, layer_type]) -> (cos, sin)``.

    Args:
        rope: the RoPE of every layer, or a mapping layer type → RoPE for models with one RoPE per layer type
            (then ``forward`` needs ``layer_type``).

    Shapes:
        position_ids ``(batch, seq)`` → cos, sin ``(batch, seq, rotary_dim)`` in ``x.dtype``.

    Precision: angles in float64, tables rounded once to fp32 and then to ``x.dtype`` (as transformers does).
    """

    def __init__(self, rope: RopeConfig | Mapping[str, RopeConfig]) -> None:
        super().__init__()
        self.per_layer_type = isinstance(rope, Mapping)
        ropes = dict(rope) if isinstance(rope, Mapping) else {"": rope}
        self.ropes = ropes
        self.rotaries = nn.ModuleDict({key or "all": RotaryEmbedding(value) for key, value in ropes.items()})
        first = next(iter(ropes.values()))
        self.rope = first
        self.rotary = self.rotaries[next(iter(self.rotaries))]
        self.attention_scaling = self.rotary.frequencies.attention_factor
        self.rope_type = first.rope_type

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None):
        if self.per_layer_type:
            if layer_type not in self.ropes:
                raise ValueError(f"layer_type must be one of {sorted(self.ropes)}, got {layer_type!r}")
            rotary = self.rotaries[layer_type]
        else:
            rotary = self.rotary
        cos, sin = rotary.cos_sin(position_ids, device=x.device)  # (b, seq, r/2)
        return torch.cat((cos, cos), dim=-1).to(x.dtype), torch.cat((sin, sin), dim=-1).to(x.dtype)


def _config_of(model_or_config: Any) -> Any:
    if isinstance(model_or_config, nn.Module):
        config = getattr(model_or_config, "config", None)
        if config is None:
            raise ValueError(f"{type(model_or_config).__name__} has no .config; pass a transformers PreTrainedModel")
        return config
    return model_or_config


def _name_of(model_or_config: Any) -> str:
    if isinstance(model_or_config, nn.Module):
        return type(model_or_config).__name__
    architectures = getattr(model_or_config, "architectures", None)
    return architectures[0] if architectures else type(model_or_config).__name__


def layer_types_of(model_or_config: Any) -> list[str] | None:
    """The layer types whose RoPE differs (``rope_parameters`` keyed by layer type), sorted; ``None`` if one RoPE."""
    params = getattr(_config_of(model_or_config), "rope_parameters", None)
    if isinstance(params, Mapping) and params and all(isinstance(v, Mapping) for v in params.values()):
        return sorted(params)
    return None


def rope_of(model_or_config: Any, layer_type: str | None = None) -> RopeConfig:
    """The model's own RoPE (with its native scaling), read from a model's ``.config`` or a config object.

    Args:
        layer_type: for models with one RoPE per layer type, which one; default the first of
            :data:`DEFAULT_LAYER_TYPES` the model has (the layers a method is applied to by default).

    Raises:
        ValueError: not a RoPE model, or an unknown ``layer_type``.
    """
    config = _config_of(model_or_config)
    if getattr(config, "rope_parameters", None) is None and getattr(config, "rope_theta", None) is None:
        raise ValueError(
            f"{_name_of(model_or_config)} is not a RoPE model: its config has no rope_parameters or rope_theta "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    types = layer_types_of(config)
    if types is not None and layer_type is None:
        layer_type = next((t for t in DEFAULT_LAYER_TYPES if t in types), types[0])
    if types is not None and layer_type not in types:
        raise ValueError(f"layer_type must be one of {types}, got {layer_type!r}")
    return from_hf_config(config, layer_type=layer_type if types is not None else None)


def rotary_modules(model: nn.Module) -> list[tuple[nn.Module, str]]:
    """(parent, attribute) of every rotary embedding module; an installed adapter counts as one (its inner
    :class:`ropekit.RotaryEmbedding` modules are not targets of their own)."""
    found = []
    for _, parent in model.named_modules():
        if isinstance(parent, HFRotaryAdapter):
            continue
        for child_name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding") or isinstance(child, HFRotaryAdapter):
                found.append((parent, child_name))
    return found


def apply_scaling(
    model: nn.Module, scaling: ScalingConfig | None, *, layer_types: Sequence[str] | None = None
) -> nn.Module:
    """Make ``model`` use ``scaling`` (``None``: plain RoPE at the model's base), in place; returns ``model``.

    On a model with one RoPE per layer type (Gemma 3), ``scaling`` goes to the layers of ``layer_types``
    (default :data:`DEFAULT_LAYER_TYPES`, the full-attention layers), each at its own base; the other layer types
    keep their own RoPE exactly as the config states it. The scaled layer types are recorded in
    ``model.ropekit_scaled_layer_types``.

    Raises:
        ValueError: the model has no RoPE config, no rotary embedding module ropekit knows how to replace,
            ``layer_types`` names a type the model lacks, or is given for a model with one RoPE for all layers.
    """
    native = rope_of(model)  # refuses non-RoPE models by name before looking for rotary modules
    types = layer_types_of(model)
    targets = rotary_modules(model)
    if not targets:
        raise ValueError(
            f"{type(model).__name__} has no *RotaryEmbedding module called as rotary_emb(x, position_ids); "
            f"ropekit supports {', '.join(SUPPORTED)}"
        )
    if types is None:
        if layer_types is not None:
            raise ValueError(
                f"layer_types={list(layer_types)!r} given, but {type(model).__name__} has one RoPE for all layers "
                "(its rope_parameters are not keyed by layer type)"
            )
        rope: RopeConfig | dict[str, RopeConfig] = dataclasses.replace(native, scaling=scaling)
        scaled = None
    else:
        chosen = [t for t in DEFAULT_LAYER_TYPES if t in types] if layer_types is None else list(layer_types)
        unknown = [t for t in chosen if t not in types]
        if unknown or not chosen:
            raise ValueError(f"layer_types must name some of {types}, got {list(chosen)!r}")
        rope = {
            t: dataclasses.replace(rope_of(model, t), scaling=scaling) if t in chosen else rope_of(model, t)
            for t in types
        }
        scaled = sorted(chosen)
    for parent, name in targets:
        setattr(parent, name, HFRotaryAdapter(rope))
    model.ropekit_scaled_layer_types = scaled
    return model


def train_length_of(rope: RopeConfig, config: Any) -> int:
    """The pre-training length: the scaling's original length if it has one, else ``max_position_embeddings``."""
    original = getattr(rope.scaling, "original_max_position_embeddings", None)
    return int(original or config.max_position_embeddings)
