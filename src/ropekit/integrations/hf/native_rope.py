"""The native transformers form of any RoPE: what ``extend``, ``finetune`` and a patched model's config write.

This module only translates the export decision of :func:`ropekit.scaling.static_form.static_form` into
transformers' keys. The rule, one for every method (checked against transformers' ``modeling_rope_utils``):

* Methods transformers names itself (``linear``, ``yarn`` with its own ramp, ``llama3``, ``proportional``, and the
  length-following ``dynamic`` and ``longrope``) are written as themselves. ``dynamic`` reads its original length
  from the model's ``max_position_embeddings``, so that key is set to the original length for it.
* Every other method is *static* (its frequencies do not follow the sequence length): ropekit computes its float64
  frequencies and writes the simplest native config with exactly those frequencies —

  - a pure base change (static NTK, ``--base``, a frozen dynamic NTK: θ'_i = b'^(−2i/d) with attention factor 1)
    becomes ``default`` with ``rope_theta = b'``;
  - any other per-pair scaling (YaRN with the paper's ramp, a frozen LongRoPE, user-given factors) becomes
    ``longrope`` with ``short_factor = long_factor = θ_i / θ'_i`` and an explicit ``attention_factor``.
    transformers picks ``long_factor`` when ``max(position) + 1 > original_max_position_embeddings`` and
    ``short_factor`` otherwise (``_compute_longrope_parameters`` and ``dynamic_rope_update``); with the two lists
    equal the choice cannot matter at any length, and the explicit attention factor makes the result independent
    of ``factor`` and ``max_position_embeddings``.

* Not expressible (a clear ``ValueError`` saying why and what to use): pairs with frequency 0 or below (a per-pair
  factor would be infinite; use ``proportional``), and an interleaved pair layout (transformers' models rotate
  half-split pairs; convert the weights first).

Per-layer-type models (Gemma 3: ``rope_parameters`` keyed by layer type) keep that form: the scaling is written for
the chosen layer types (:func:`~ropekit.integrations.hf.model_config.scaled_layer_types`: ``full_attention`` when
present, as transformers scales Gemma 3, else every layer type), each at its own base, and the other layer types are
copied unchanged. There the ``longrope`` form is refused: transformers' ``dynamic_rope_update`` for a per-layer-type
``longrope`` raises ``UnboundLocalError`` on its second call beyond the original length (it caches the long frequencies
under ``{layer_type}_long_inv_freq`` but reads a local variable).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ropekit.config import RopeConfig
from ropekit.hf_format import to_hf_dict
from ropekit.scaling.registry import ScalingConfig
from ropekit.scaling.static_form import plain_at, static_form


@dataclass(frozen=True)
class NativeRope:
    """How one RoPE is written natively.

    Attributes:
        rope_parameters: the transformers 5.x ``rope_parameters`` dict (JSON-ready).
        max_position_embeddings: the value the model-level key must have for the dict to mean what it should
            (``dynamic`` only: its original length), else ``None`` (the caller's choice).
        how: one sentence: which native form was used and why.
    """

    rope_parameters: dict[str, Any]
    max_position_embeddings: int | None
    how: str


def native_rope(rope: RopeConfig, *, original_length: int, named: bool = True) -> NativeRope:
    """The native transformers form of ``rope`` (base, rotary dim and scaling), exact to float32 rounding.

    Args:
        rope: the model's RoPE with the scaling to write.
        original_length: the pre-training length, written as ``original_max_position_embeddings`` when the
            native form needs one the scaling does not carry (the ``longrope`` form).
        named: write a method transformers names as itself; ``False``: its static form (for config classes that
            accept only some rope types: Phi-3 takes ``default`` and ``longrope``).

    Returns:
        A :class:`NativeRope`.

    Raises:
        ValueError: ``rope`` cannot be written natively (interleaved pairs, pairs with frequency <= 0).
    """
    if rope.interleaved:
        raise ValueError(
            "interleaved=True cannot be written as a transformers config: transformers' models rotate half-split "
            "pairs (i, i + d/2); permute the q/k projection weights to the half-split layout first"
        )
    form = static_form(rope)
    if form.named and (named or rope.scaling is None):
        params = to_hf_dict(rope)
        name = params["rope_type"]
        length = None if rope.scaling is None else rope.scaling.hf_model_keys(None).get("max_position_embeddings")
        if length is not None:  # dynamic: transformers reads its original length from max_position_embeddings
            return NativeRope(params, length, f"{name} (native; max_position_embeddings = {length}, its L)")
        return NativeRope(params, None, f"{name} (native)")
    if form.new_base is not None:
        params = to_hf_dict(plain_at(rope, form))
        plain = form.base_declared and form.frozen_at is None  # a base change by name, not by freezing
        why = form.rope_type if plain else f"{form.rope_type} is a base change"
        return NativeRope(params, None, f"default with rope_theta = {params['rope_theta']:.9g} ({why})")
    if form.follows_length is not None:
        raise ValueError(f"{form.rope_type} has no static transformers form: {form.follows_length}")
    if form.factors is None:
        raise ValueError(
            f"{form.unexpressible} (it would be infinite); use rope_type 'proportional' for pairs that do not rotate"
        )
    from ropekit.scaling.longrope import LongRopeScaling

    as_longrope = LongRopeScaling(
        short_factor=form.factors,
        long_factor=form.factors,
        original_max_position_embeddings=form.original_length or original_length,
        factor=max(form.factor or 1.0, 1.0),
        attention_factor=form.attention_factor,
    )
    params = to_hf_dict(dataclasses.replace(rope, scaling=as_longrope))
    return NativeRope(
        params,
        None,
        f"longrope with per-pair factors and attention_factor {form.attention_factor:.9g} ({form.rope_type} is "
        "static; short_factor = long_factor, so transformers' choice between them cannot matter)",
    )


def default_target(scaling: ScalingConfig | None, original: int) -> int:
    """``original × factor`` for methods with a factor (rounded), else ``original``."""
    factor = None if scaling is None else scaling.stated_factor()
    return math.floor(original * factor + 0.5) if factor else original


def extended_length(scaling: ScalingConfig | None, original: int, target_length: int | None) -> int:
    """The context an extended model declares: ``target_length``, else :func:`default_target`; the one check both
    ``extend`` writers (a folder's ``max_position_embeddings``, a GGUF file's ``context_length``) make.

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``target_length``, or ``factor`` where the
            target is the default) longer than ropekit's longest length (:data:`ropekit._costs.MAX_LENGTH`).
    """
    from ropekit._costs import MAX_LENGTH
    from ropekit.errors import InvalidArgument

    target = default_target(scaling, original) if target_length is None else int(target_length)
    if target > MAX_LENGTH:
        if target_length is not None:
            raise InvalidArgument("target_length", target, f"at most {MAX_LENGTH:,} tokens (ropekit's longest length)")
        factor = scaling.stated_factor() if scaling is not None else None
        message = (
            f"factor {factor:g} on the original length {original:,} gives {target:,} tokens, longer than "
            f"{MAX_LENGTH:,} (ropekit's longest length)"
        )
        raise InvalidArgument("factor", factor, message=message)
    return target


def older_transformers_note(rope: RopeConfig, written: dict[str, Any], max_position_embeddings: int) -> str | None:
    """Which transformers versions read a written ``yarn`` dict the same, when some do not; ``None`` otherwise.

    transformers 5 (checked: the installed 5.18) places YaRN's ramp at the dict's
    ``original_max_position_embeddings``. transformers 4.x releases from before it read that key in
    ``_compute_yarn_parameters`` (4.46 among them) place it at the model's ``max_position_embeddings`` instead, and
    read no ``truncate`` (they always round the ramp ends to whole pairs).
    """
    import numpy as np

    from ropekit.scaling.registry import frequencies

    scaling = rope.scaling
    if written.get("rope_type") != "yarn" or scaling is None or scaling.rope_type != "yarn":
        return None
    older = dataclasses.replace(scaling, original_max_position_embeddings=int(max_position_embeddings), truncate=True)
    ours, theirs = frequencies(rope), frequencies(rope.replace(scaling=older))
    if np.allclose(ours.inv_freq, theirs.inv_freq, rtol=1e-6, atol=0):
        return None
    return (
        "transformers 5.x reads this yarn as written (checked: 5.18); transformers 4.x releases that place the ramp at "
        f"max_position_embeddings (4.46 among them) run it at L0 = {max_position_embeddings:,} instead of "
        f"{scaling.original_max_position_embeddings:,}, with other frequencies"
    )
