"""Using ropekit's scaling methods inside local transformers models (optional extra; imported lazily).

:func:`apply_scaling` replaces a model's rotary embedding module(s) with :class:`HFRotaryAdapter`, which
produces the ``(cos, sin)`` pair transformers' attention layers expect — ``(batch, seq, rotary_dim)``,
halves duplicated for ``rotate_half``, times the attention factor — from ropekit's float64 frequencies. Any
registry method works, including ones transformers lacks (static ``ntk``, YaRN's paper ramp, frozen dynamic
NTK or LongRoPE). Supported: architectures with a ``*RotaryEmbedding`` module called as
``rotary_emb(x, position_ids)`` (or ``rotary_emb(x, position_ids, layer_type)``) — Llama, Mistral, Qwen2,
Phi-3 (LongRoPE), GPT-NeoX (partial rotary), Gemma, and models with one RoPE per layer type (Gemma 3: a
``layer_types`` list and ``rope_parameters`` keyed by layer type, sliding layers at base 1e4, full-attention
layers at base 1e6). Llama 4's rotary module returns complex ``freqs_cis`` for interleaved pairs instead; its
adapter does the same. Models with NoPE layers (SmolLM3, Llama 4) need nothing more: their NoPE layers never use
the rotary module's output, so a scaling reaches the RoPE layers only.

The patched model's ``config`` says what it computes: :func:`apply_scaling` rewrites its RoPE keys into the native
form ``ropekit extend`` writes (:func:`ropekit.integrations.hf.model_config.extended_config`), so ``save_pretrained``
writes a checkpoint that transformers alone loads with the same logits. Where no native form exists (a per-layer-type
model whose method needs ``longrope``, pairs with frequency 0) the model's ``save_pretrained`` refuses instead of
writing a config that describes a different model.

The evaluation adapter for transformers models is :class:`ropekit.eval.hf_model.HFEvalModel`; this module knows
nothing about evaluation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ropekit.config import RopeConfig
from ropekit.integrations.hf.amplitude_rule import rescaled
from ropekit.integrations.hf.attention_layouts import refuse_rotary_swap, sync_softmax_scale
from ropekit.integrations.hf.legacy_keys import LEGACY_KEYS
from ropekit.integrations.hf.model_config import (
    extended_config,
    layer_types_of,
    original_length_of,
    rope_of,
    scaled_layer_types,
)
from ropekit.module import RotaryEmbedding
from ropekit.scaling.registry import ScalingConfig

SUPPORTED = (
    "Llama",
    "Mistral",
    "Qwen2",
    "Phi3",
    "GPTNeoX",
    "Gemma",
    "Gemma3 (per layer type)",
    "SmolLM3 (NoPE layers)",
    "Llama4Text (NoPE layers, complex freqs_cis)",
)
#: rotary modules that return complex ``freqs_cis`` (``polar(1, angles) × attention factor``, ``(batch, seq,
#: rotary_dim / 2)``) for q and k whose pairs are interleaved, (0, 1), (2, 3), … (Llama 4's ``apply_rotary_emb``)
_COMPLEX_ROTARY = ("Llama4TextRotaryEmbedding",)


class HFRotaryAdapter(nn.Module):
    """Drop-in for a transformers ``*RotaryEmbedding``: ``forward(x, position_ids[, layer_type]) -> (cos, sin)``.

    Args:
        rope: the RoPE of every layer, or a mapping layer type → RoPE for models with one RoPE per layer type
            (then ``forward`` needs ``layer_type``).
        complex_output: return complex ``freqs_cis`` instead (Llama 4, whose pairs are interleaved).

    Shapes:
        position_ids ``(batch, seq)`` → cos, sin ``(batch, seq, rotary_dim)`` in ``x.dtype``; with
        ``complex_output``, freqs_cis ``(batch, seq, rotary_dim // 2)`` complex64.

    Precision: angles in float64, tables rounded once to fp32 and then to ``x.dtype`` (as transformers does);
    freqs_cis stays complex64 (transformers computes it in float32 too).
    """

    def __init__(self, rope: RopeConfig | Mapping[str, RopeConfig], *, complex_output: bool = False) -> None:
        super().__init__()
        self.complex_output = self.interleaved = complex_output
        self.per_layer_type = isinstance(rope, Mapping)
        ropes = dict(rope) if isinstance(rope, Mapping) else {"": rope}
        self.ropes = ropes
        self.rotaries = nn.ModuleDict({key or "all": RotaryEmbedding(value) for key, value in ropes.items()})
        first = next(iter(ropes.values()))
        self.rope = first
        self.rotary = self.rotaries[next(iter(self.rotaries))]
        self.attention_scaling = self.rotary.frequencies.attention_factor
        self.rope_type = first.rope_type
        #: each row's whole length while a shard of it is rotated (set by
        #: :func:`ropekit.integrations.hf.shard_length.sequence_lengths`); ``None``: the positions' own
        self.lengths: torch.Tensor | None = None

    def _tables(self, rotary: nn.Module, position_ids: torch.Tensor, device: torch.device):
        """``rotary``'s tables, its length-following choice made by ``self.lengths`` where set."""
        if self.lengths is None:
            return rotary.cos_sin(position_ids, device=device)
        if isinstance(rotary, RotaryEmbedding):  # one choice per batch, as transformers makes it
            return rotary.cos_sin(position_ids, device=device, length=int(self.lengths.max()))
        return rotary.cos_sin(position_ids, device=device, lengths=self.lengths)  # one per row (mixed windows)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None):
        if self.per_layer_type:
            if layer_type not in self.ropes:
                raise ValueError(f"layer_type must be one of {sorted(self.ropes)}, got {layer_type!r}")
            rotary = self.rotaries[layer_type]
        else:
            rotary = self.rotary
        cos, sin = self._tables(rotary, position_ids, x.device)  # (b, seq, r/2)
        if self.complex_output:
            return torch.complex(cos, sin)  # (b, seq, r/2): pair m of q turns by cos + i·sin
        return torch.cat((cos, cos), dim=-1).to(x.dtype), torch.cat((sin, sin), dim=-1).to(x.dtype)


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
    (default: :func:`~ropekit.integrations.hf.model_config.scaled_layer_types`, the full-attention layers, or every
    layer type where none is ``full_attention``), each at its own base; the other layer types keep their own RoPE
    exactly as the config states it. The scaled layer types are recorded in ``model.ropekit_scaled_layer_types``.
    A method of the model's own ``rope_type`` keeps its amplitude rule where ``scaling`` states none
    (:mod:`~ropekit.integrations.hf.amplitude_rule`), as ``extend`` writes it.

    ``model.config`` is rewritten to the native form of the new RoPE (as ``ropekit extend`` writes it: its
    ``rope_parameters``, ``max_position_embeddings`` = the original length × factor or more, and Phi-3's top-level
    ``original_max_position_embeddings``), so ``model.save_pretrained`` writes this model; where no native form
    exists, ``model.save_pretrained`` raises ``ValueError`` instead. The config as loaded is kept in
    ``model.ropekit_source_config`` and every later call starts from it.

    Raises:
        ValueError: the model has no RoPE config, no rotary embedding module ropekit knows how to replace,
            ``layer_types`` names a type the model lacks, or is given for a model with one RoPE for all layers.
    """
    source = getattr(model, "ropekit_source_config", None) or model  # the config as loaded (or the model's)
    native = rope_of(source)  # refuses non-RoPE models by name before looking for rotary modules
    refuse_rotary_swap(model)
    types = layer_types_of(source)
    chosen = scaled_layer_types(source, layer_types)  # refuses layer types the model lacks or cannot have
    targets = rotary_modules(model)
    if not targets:
        raise ValueError(
            f"{type(model).__name__} has no *RotaryEmbedding module called as rotary_emb(x, position_ids); "
            f"ropekit supports {', '.join(SUPPORTED)}"
        )
    if types is None:  # the method keeps the model's amplitude rule, as extend writes it
        rope: RopeConfig | dict[str, RopeConfig] = rescaled(native, scaling)
        installed = rope.scaling
    else:
        rope = {t: rescaled(rope_of(source, t), scaling) if t in chosen else rope_of(source, t) for t in types}
        installed = rope[chosen[0]].scaling
    for parent, name in targets:
        child = getattr(parent, name)
        complex_output = getattr(child, "complex_output", False) or type(child).__name__ in _COMPLEX_ROTARY
        setattr(parent, name, HFRotaryAdapter(rope, complex_output=complex_output))
    model.ropekit_scaled_layer_types = chosen
    sync_softmax_scale(model, source.config if hasattr(source, "named_modules") else source, installed)
    _write_native_config(model, source, scaling, chosen, native)
    return model


#: the config keys :func:`apply_scaling` rewrites (what ``extended_config`` changes)
_ROPE_CONFIG_KEYS = ("rope_parameters", "max_position_embeddings", "original_max_position_embeddings")


def _write_native_config(
    model: nn.Module, source: Any, scaling: ScalingConfig | None, chosen: list[str] | None, native: RopeConfig
) -> None:
    """``model.config`` ← the native form of ``scaling`` (from the config as loaded), or a refusing
    ``save_pretrained`` where there is none."""
    from ropekit.integrations.hf.native_rope import default_target

    if getattr(model, "ropekit_source_config", None) is None:
        model.ropekit_source_config = source = copy.deepcopy(model.config)
    model.__dict__.pop("save_pretrained", None)  # a refusal left by an earlier scaling
    loaded = source.to_dict() if hasattr(source, "to_dict") else dict(source)
    target = max(
        default_target(scaling, original_length_of(source, native)), int(loaded.get("max_position_embeddings") or 0)
    )
    try:
        written, _ = extended_config(loaded, scaling, target_length=target, layer_types=chosen)
    except ValueError as error:
        reason = str(error)

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise ValueError(
                f"save_pretrained: {type(model).__name__} runs a RoPE that no transformers config expresses ({reason}); "
                "saving would write a config that loads as a different model. Save with a method transformers can "
                "express, or keep ropekit's apply_scaling after loading"
            )

        model.save_pretrained = refuse
        return
    for key in _ROPE_CONFIG_KEYS:
        if key in written:
            setattr(model.config, key, written[key])
    legacy = {key: written[key] for key in LEGACY_KEYS if key in written}
    if legacy:
        _save_with_keys(model, legacy)


def _save_with_keys(model: nn.Module, keys: dict[str, Any]) -> None:
    """``model.save_pretrained`` that adds ``keys`` to the config.json it writes: in transformers the config
    object cannot hold them (``rope_scaling`` is an alias of ``rope_parameters`` there)."""
    save = type(model).save_pretrained

    def save_pretrained(save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        result = save(model, save_directory, *args, **kwargs)
        path = Path(save_directory) / "config.json"
        if path.is_file():
            config = json.loads(path.read_text())
            path.write_text(json.dumps({**config, **keys}, indent=2, sort_keys=True) + "\n")
        return result

    model.save_pretrained = save_pretrained
