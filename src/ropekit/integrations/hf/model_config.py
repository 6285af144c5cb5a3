"""What a transformers model's config says about its RoPE, and its config with a new RoPE: one place for every command.

``extend``, ``finetune``, ``eval`` and :func:`ropekit.integrations.hf.patch_rope.apply_scaling` all read a model through
these functions, so they agree on which layer types a method scales, what the original length is and whether the model
has RoPE at all (they load it with :mod:`ropekit.integrations.hf.load`); :func:`extended_config` is the ``config.json``
of the same model with a new RoPE, in the native form of :mod:`ropekit.integrations.hf.native_rope`. Each function takes
a ``config.json`` dict, a transformers config object or a model (its ``.config``).

The layer-type rule (:func:`scaled_layer_types`): a model with one RoPE per layer type (Gemma 3: ``rope_parameters``
keyed by layer type) gets a method on its ``full_attention`` layers by default, as transformers scales Gemma 3 (its
sliding layers see only their window, so they never meet the longer distances); DeepSeek-V4 (``rope_parameters`` keyed
by ``main`` and ``compress``) gets it on ``compress``, the RoPE of its compressed attention layers, as its release
scales them (``main`` serves only its sliding-window layers, which keep their own base); a per-layer-type model with
neither gets it on every layer type its layers run, since nothing says which of them are local.
Only the types in the config's per-layer ``layer_types`` list count: transformers adds a ``full_attention`` RoPE to a
Gemma 3 config that lacks one, so the raw ``config.json`` (read by ``extend``) and the loaded config (``eval``) give
the same answer. Asking for layer types on a model with one RoPE is refused.

Which layers rotate at all (NoPE layers: SmolLM3, Llama 4) is :func:`ropekit.integrations.hf.rope_layers.rope_layout`;
a NoPE layer takes no RoPE of any layer type, so a written RoPE never reaches it (:func:`extended_config` says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument
from ropekit.hf_format import ATTENTION_KEYS, from_hf_config
from ropekit.hf_model_keys import with_mscale_pair
from ropekit.integrations.hf.amplitude_rule import kept_amplitude, rescaled
from ropekit.integrations.hf.dual_chunk_config import CONFIG_KEY as DUAL_CHUNK_KEY
from ropekit.integrations.hf.legacy_keys import with_legacy_keys
from ropekit.integrations.hf.native_rope import native_rope, older_transformers_note
from ropekit.integrations.hf.rope_layers import rope_layout
from ropekit.scaling.registry import ScalingConfig

#: the layer types a method goes to by default on a per-layer-type model that has them (see :func:`scaled_layer_types`):
#: the layers that meet the longest distances (full attention; DeepSeek-V4's ``compress`` RoPE, which its compressed
#: attention layers run, while its ``main`` RoPE serves only its sliding-window layers)
DEFAULT_LAYER_TYPES = ("full_attention", "compress")
#: config keys that carry a RoPE (a rope dict, or the base)
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base")


def _config_of(model_or_config: Any) -> Any:
    if isinstance(model_or_config, Mapping) or not hasattr(model_or_config, "named_modules"):
        return model_or_config
    config = getattr(model_or_config, "config", None)
    if config is None:
        raise ValueError(f"{type(model_or_config).__name__} has no .config; pass a transformers PreTrainedModel")
    return config


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)


def name_of(model_or_config: Any) -> str:
    """The model's class (a model), first architecture, or ``model_type`` (a config), for messages."""
    if hasattr(model_or_config, "named_modules"):
        return type(model_or_config).__name__
    architectures = _get(model_or_config, "architectures")
    if architectures:
        return str(architectures[0])
    return str(_get(model_or_config, "model_type") or "this model")


def has_rope(model_or_config: Any) -> bool:
    """Whether the config describes a RoPE model (it has a rope dict or a RoPE base)."""
    config = _config_of(model_or_config)
    return any(_get(config, key) is not None for key in _ROPE_KEYS)


def layer_types_of(model_or_config: Any) -> list[str] | None:
    """The layer types of a per-layer-type RoPE config (a rope dict keyed by layer type), sorted; ``None`` if one
    RoPE serves every layer."""
    config = _config_of(model_or_config)
    params = _get(config, "rope_scaling") or _get(config, "rope_parameters") or {}
    if not isinstance(params, Mapping):
        return None
    nested = sorted(key for key, value in params.items() if isinstance(value, Mapping))
    return nested or None


def scaled_layer_types(model_or_config: Any, layer_types: Sequence[str] | None = None) -> list[str] | None:
    """The layer types a method is applied to: the one rule of ``extend``, ``finetune``, ``eval`` and
    :func:`~ropekit.integrations.hf.patch_rope.apply_scaling`.

    Args:
        layer_types: the types asked for; ``None`` (or empty): the default — :data:`DEFAULT_LAYER_TYPES` where the
            model has them, else every layer type.

    Returns:
        The chosen layer types, sorted; ``None`` for a model with one RoPE for all layers.

    Raises:
        ValueError: ``layer_types`` names a type the model lacks, or is given for a model with one RoPE.
    """
    types = layer_types_of(model_or_config)
    if types is None:
        if layer_types:
            name = name_of(model_or_config)
            raise InvalidArgument(
                "layer_types",
                list(layer_types),
                allowed="none (one RoPE for all layers)",
                message=lambda n: (
                    f"{n('layer_types')}={list(layer_types)!r} given, but {name} has one RoPE for all "
                    f"layers (its rope_parameters are not keyed by layer type); leave {n('layer_types')} out"
                ),
            )
        return None
    if not layer_types:
        used = set(_get(_config_of(model_or_config), "layer_types") or types)  # the types the layers run
        present = [t for t in types if t in used] or types
        return [t for t in DEFAULT_LAYER_TYPES if t in present] or present
    unknown = [t for t in layer_types if t not in types]
    if unknown:
        raise InvalidArgument("layer_types", list(layer_types), f"must name some of {types}", allowed=types)
    return sorted(set(layer_types))


def first_scaled_type(model_or_config: Any, layer_types: Sequence[str] | None = None) -> str | None:
    """The first of :func:`scaled_layer_types` (whose RoPE gives the original length and the plan), ``None`` for a
    model with one RoPE.

    Raises:
        ValueError: as :func:`scaled_layer_types`.
    """
    chosen = scaled_layer_types(model_or_config, layer_types)
    return chosen[0] if chosen else None


def rope_of(model_or_config: Any, layer_type: str | None = None) -> RopeConfig:
    """The model's own RoPE, its native scaling included.

    Args:
        layer_type: on a per-layer-type model, whose RoPE; default the first of :func:`scaled_layer_types` (the
            layers a method goes to by default). Ignored for a model with one RoPE.

    Raises:
        ValueError: not a RoPE model (an :class:`~ropekit.errors.InvalidArgument` about ``model_or_config``), or an
            unknown ``layer_type``.
    """
    config = _config_of(model_or_config)
    if not has_rope(config):
        name = name_of(model_or_config)
        if has_rope(_get(config, "text_config") or {}):
            message = (
                f"{name} keeps its RoPE in text_config (its language model's config), which ropekit reads (inspect, "
                "plan) but does not rewrite: extend the language model's own folder"
            )
            raise InvalidArgument("model_or_config", name, message=message, leads=False)
        message = (
            f"{name} is not a RoPE model: its config has no rope_parameters, rope_scaling or rope_theta; ropekit "
            "scales and extends RoPE models only (Llama, Mistral, Qwen2, Phi-3, GPT-NeoX, Gemma, Gemma 3, ...)"
        )
        raise InvalidArgument("model_or_config", name, message=message, leads=False)
    types = layer_types_of(config)
    if types is None:
        return from_hf_config(dict(config) if isinstance(config, Mapping) else config)
    if layer_type is None:
        layer_type = scaled_layer_types(config)[0]
    if layer_type not in types:
        raise ValueError(f"layer_type must be one of {types}, got {layer_type!r}")
    return from_hf_config(dict(config) if isinstance(config, Mapping) else config, layer_type=layer_type)


def original_length_of(model_or_config: Any, rope: RopeConfig | None = None) -> int:
    """The pre-training length: the native scaling's ``original_max_position_embeddings`` if it has one, else
    ``max_position_embeddings``.

    Args:
        rope: the model's RoPE (default :func:`rope_of`).

    Raises:
        ValueError: neither is in the config.
    """
    config = _config_of(model_or_config)
    rope = rope_of(config) if rope is None else rope
    original = (rope.scaling and rope.scaling.stated_original_length()) or _get(config, "max_position_embeddings")
    if not original:
        raise ValueError("original_length is needed: the config has no max_position_embeddings")
    return int(original)


def extended_config(
    config: Mapping[str, Any],
    scaling: ScalingConfig | None,
    *,
    target_length: int,
    layer_types: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A ``config.json`` dict whose RoPE is the model's own with ``scaling`` (replacing any native scaling), which
    transformers loads and runs as ropekit means it (:mod:`~ropekit.integrations.hf.transformers_reads`).

    A method of the model's own ``rope_type`` keeps the model's amplitude rule where the request states none
    (:mod:`~ropekit.integrations.hf.amplitude_rule`). A method transformers names is written as itself; where the model's config class does not load that name (Phi-3
    accepts ``default`` and ``longrope`` only) its static form is written instead (a new base, or ``longrope`` with
    per-pair factors), and the notes say so; a method with neither form the config class loads is refused.

    Args:
        config: the source model's ``config.json`` dict.
        scaling: the method to write (``None``: plain RoPE at the model's base).
        target_length: written as ``max_position_embeddings`` (except for ``dynamic``, which needs its L there).
        layer_types: for per-layer-type configs, which layer types get ``scaling``
            (:func:`~ropekit.integrations.hf.model_config.scaled_layer_types`: default ``full_attention`` when present,
            else all); refused for a model with one RoPE.

    Returns:
        ``(new_config, notes)``; ``notes`` says, per layer type, which native form was written, which layers take no
        RoPE (they are unchanged; ``no_rope_layers`` is copied as it is), and, where the older keys
        ``rope_theta``/``rope_scaling`` cannot say the same (:mod:`~ropekit.integrations.hf.legacy_keys`), why they
        were left out, and which amplitude keys a written method keeps from the model's own rule
        (:mod:`~ropekit.integrations.hf.amplitude_rule`: DeepSeek-V4's ``attention_factor`` 1.0 on ``compress``).

    Raises:
        ValueError: no RoPE, an unknown layer type, a scaling transformers cannot express, or a config transformers'
            config class for the model type would not load or would run otherwise (naming the model type).
    """
    from ropekit.integrations.hf.transformers_reads import transformers_mismatch

    new, notes, ropes = _with_rope(config, scaling, target_length=target_length, layer_types=layer_types, named=True)
    lengths = _check_lengths(new, ropes, target_length)
    why = transformers_mismatch(new, ropes, lengths)
    if why is None:
        return new, notes
    model_type = config.get("model_type") or name_of(config)
    try:
        static = _with_rope(config, scaling, target_length=target_length, layer_types=layer_types, named=False)
    except ValueError as error:
        raise ValueError(f"{model_type}: {why}; and no static form: {error}") from None
    if static[0] == new or transformers_mismatch(static[0], static[2], lengths) is not None:
        raise ValueError(f"{model_type}: {why}; ropekit writes nothing transformers cannot load") from None
    return static[0], [f"{model_type}: {why}; written in its static form instead", *static[1]]


def _check_lengths(config: Mapping[str, Any], ropes: Mapping[str | None, RopeConfig], target: int) -> set[int]:
    """Sequence lengths at which a written RoPE may switch: 1, around each original length, the target."""
    lengths = {1, int(target), int(target) + 1, int(config.get("max_position_embeddings") or target)}
    for rope in ropes.values():
        original = rope.scaling and rope.scaling.stated_original_length()
        if original:
            lengths |= {int(original), int(original) + 1}
    return lengths


def _with_rope(
    config: Mapping[str, Any],
    scaling: ScalingConfig | None,
    *,
    target_length: int,
    layer_types: Sequence[str] | None,
    named: bool,
) -> tuple[dict[str, Any], list[str], dict[str | None, RopeConfig]]:
    """``(new_config, notes, ropes)``: :func:`extended_config`'s dict written with methods named (``named``) or in
    their static form, and the RoPE meant for each layer type (``None``: every layer)."""
    new = json.loads(json.dumps(dict(config)))  # deep copy, JSON-clean
    nested = layer_types_of(new)
    key = "rope_parameters"
    new.pop("rope_scaling", None)  # 4.x key; transformers prefers it over rope_parameters, so it must not linger
    notes: list[str] = []
    if new.pop(DUAL_CHUNK_KEY, None) is not None:  # vLLM/SGLang would build its rotary from the base alone
        notes.append(
            f"{DUAL_CHUNK_KEY} dropped: it was written for the source's RoPE, and vLLM and SGLang build a "
            "dual-chunk rotary from the base alone wherever it is present; --attention dual_chunk writes a new one"
        )
    lengths: set[int] = set()
    ropes: dict[str | None, RopeConfig] = {}
    chosen = scaled_layer_types(config, layer_types)  # refuses layer types a model lacks or cannot have
    if nested is None:
        native = rope_of(config)
        ropes[None] = rescaled(native, scaling)
        written = native_rope(ropes[None], original_length=original_length_of(config, native), named=named)
        # its rope_theta/partial_rotary_factor win over top-level keys
        new[key] = _keep_rotary_key(written.rope_parameters, config.get("rope_scaling") or config.get(key))
        amplitude = new[key].get("attention_factor") or _amplitude(ropes[None].scaling)
        new[key] = with_mscale_pair(new[key], config.get("model_type"), amplitude, original_length_of(config, native))
        notes += [written.how, *_amplitude_note(native, None, scaling)]
        if written.max_position_embeddings is not None:
            lengths.add(written.max_position_embeddings)
        original = written.rope_parameters.get("original_max_position_embeddings")
    else:
        params = dict(config.get("rope_scaling") or config.get("rope_parameters"))
        original = None
        for layer_type in nested:
            native = rope_of(config, layer_type)
            if layer_type not in chosen:
                ropes[layer_type] = native
                continue
            ropes[layer_type] = rescaled(native, scaling)
            length = original_length_of(config, native)
            written = native_rope(ropes[layer_type], original_length=length, named=named)
            if written.rope_parameters["rope_type"] == "longrope":
                raise ValueError(
                    f"{scaling.rope_type} on a per-layer-type model needs rope_type 'longrope' for {layer_type}, which "
                    "transformers cannot run per layer type (dynamic_rope_update raises UnboundLocalError on its "
                    "second call beyond original_max_position_embeddings); use a method transformers names (yarn with "
                    "its own ramp, linear, llama3) or a base change (ntk, or a new base)"
                )
            params[layer_type] = _keep_rotary_key(written.rope_parameters, params[layer_type])
            notes += [f"{layer_type}: {written.how}", *_amplitude_note(native, layer_type, scaling)]
            if written.max_position_embeddings is not None:
                lengths.add(written.max_position_embeddings)
            original = written.rope_parameters.get("original_max_position_embeddings", original)
        notes += [f"{t}: unchanged" for t in nested if t not in chosen]
        new[key] = params
    layout = rope_layout(config)
    if layout is not None and layout.nope_layers:  # transformers applies rope_parameters where use_rope holds only
        notes.append(f"layers {', '.join(map(str, layout.nope_layers))}: no RoPE (NoPE), unchanged")
    if original is not None and "original_max_position_embeddings" in new:
        new["original_max_position_embeddings"] = original  # Phi-3 style: the top-level key wins in transformers
    new["max_position_embeddings"] = lengths.pop() if lengths else int(target_length)
    for layer_type, rope in ropes.items():
        params = new[key] if layer_type is None else new[key][layer_type]
        older = older_transformers_note(rope, params, new["max_position_embeddings"])
        if older is not None and older not in notes:
            notes.append(older)
    new, legacy = with_legacy_keys(new)  # rope_theta/rope_scaling for readers of the older keys, where they agree
    return new, notes + ([legacy] if legacy else []), ropes


def _amplitude_note(native: RopeConfig, layer_type: str | None, scaling: ScalingConfig | None) -> list[str]:
    """A note naming the amplitude keys the written method keeps from the model's own rule
    (:mod:`~ropekit.integrations.hf.amplitude_rule`), if any."""
    kept = kept_amplitude(native.scaling, scaling)
    if not kept:
        return []
    where = f"{layer_type}: " if layer_type else ""
    keys = ", ".join(f"{key} {value:g}" for key, value in kept.items())
    return [f"{where}{keys} kept: the model's own amplitude rule for {scaling.rope_type}, not the method's formula"]


def _amplitude(scaling: Any) -> float:
    """The factor on cos/sin of ``scaling`` as transformers computes it where the dict states none: YaRN's and
    LongRoPE's from their formula, 1 for every other method."""
    resolve = getattr(scaling, "resolved_attention_factor", None)
    return float(resolve()) if resolve is not None else 1.0


def _keep_rotary_key(written: dict[str, Any], source: Any) -> dict[str, Any]:
    """``written`` with ``partial_rotary_factor: 1.0`` where the source rope dict stated the key and the native form
    (full rotary) leaves it out: some config classes (Phi-3) require it; and with the source's attention keys
    (:data:`~ropekit.hf_format.ATTENTION_KEYS`), which the model's attention reads from the rope dict."""
    if not isinstance(source, Mapping):
        return written
    kept = {key: source[key] for key in ATTENTION_KEYS if key in source}
    if "partial_rotary_factor" in source and "partial_rotary_factor" not in written:
        kept["partial_rotary_factor"] = 1.0
    return {**written, **kept}
