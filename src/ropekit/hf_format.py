"""RopeConfig <-> Hugging Face transformers RoPE dicts, as plain dicts (this module never imports transformers).

transformers 5.x keeps RoPE settings in ``rope_parameters`` (with ``rope_type``, ``rope_theta`` and
``partial_rotary_factor``); 4.x used ``rope_scaling`` (legacy key ``type``) beside a top-level ``rope_theta``.
Both are read. This module holds the rules every rope type shares; each method's own keys and quirks are read
and written by its config class (``from_hf``/``to_hf`` in :mod:`ropekit.scaling`, documented there, once).
The shared transformers quirks (checked against the transformers version in :data:`ropekit._versions.CHECKED`) and how ropekit treats each one:

* ``rope_scaling`` wins over ``rope_parameters`` when a config has both (transformers does
  ``rope_scaling or rope_parameters``). ropekit: the same, with a warning when they disagree on a key.
* ``rope_theta`` and ``partial_rotary_factor`` inside the rope dict win over top-level keys; a missing base is
  10000. ropekit: the same, with a warning when a top-level value disagrees; GPT-NeoX's top-level
  ``rotary_emb_base``/``rotary_pct`` are read as ``rope_theta``/``partial_rotary_factor``. Model-specific
  defaults (GPT-NeoX's ``rotary_pct`` defaults to 0.25 when absent, some models have another default base) are
  not known here: such configs must state the key.
* The head size is ``head_dim or hidden_size // num_attention_heads`` (the two sizes under the names the config class
  maps to them where it has no such key: DBRX's ``d_model``/``n_heads``). ropekit: the same, but a ``hidden_size``
  that ``num_attention_heads`` does not divide raises ``ValueError`` (give ``head_dim``) instead of flooring.
* The rotary dim is ``int(head_dim * partial_rotary_factor)``, a truncation (each method may count otherwise:
  :meth:`~ropekit.scaling.base.ScalingConfig.hf_rotary_dim`). An odd result makes transformers compute
  ceil(d/2) frequencies with exponents 2i/d. ropekit: the same truncation, and an odd or zero rotary dim raises
  ``ValueError`` (pairs need an even dim). :func:`to_hf_dict` writes a factor that truncates back exactly.
* Values transformers only warns about (factor < 1, beta_fast < beta_slow, low_freq_factor > high_freq_factor,
  LongRoPE lists of the wrong length) raise ``ValueError`` in ropekit; so do keys ropekit does not know, and
  values of the wrong kind (a null or string ``rope_theta``, a fractional length such as 4096.7, which
  transformers' ``int()`` would truncate).
* Keys of the model's attention that some configs keep in the rope dict (:data:`ATTENTION_KEYS`: Ministral 3's
  ``llama_4_scaling_beta``) are not RoPE: they are skipped here and kept as they are by ``extend``. So is a copy of
  the model's ``max_position_embeddings`` in the rope dict (Ministral 3's), which transformers' validation skips.
* Nested per-layer-type rope dicts (Gemma-style ``{"full_attention": {...}, "sliding_attention": {...}}``) are
  read one layer type at a time: pass ``layer_type``.
* M-RoPE (:class:`~ropekit.config.MRope`): ``mrope_section`` in the rope dict gives the sections. The layout is
  the model class's in transformers (Qwen2-VL and Qwen2.5-VL blocked, Qwen3-VL and Qwen3.5 interleaved, whatever the
  dict says). ropekit: the model type's layout for the types it knows (:data:`BLOCKED_MROPE`,
  :data:`INTERLEAVED_MROPE`), with a warning when ``mrope_interleaved`` disagrees; ``mrope_interleaved`` (default
  blocked) for other model types; a known model type without ``mrope_section`` is refused (transformers would use
  its class default). Qwen2-VL's ``rope_type: "mrope"`` means ``default``, as in transformers. A
  multimodal config whose RoPE lives in ``text_config`` (transformers 5.x's nested form) is read from there.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

from ropekit.config import MRope, RopeConfig
from ropekit.hf_model_keys import mscale_pair_factor, ntk_alpha_base, rotary_dim_factor
from ropekit.scaling._hf_numbers import hf_float, hf_int
from ropekit.scaling.registry import ScalingConfig, get_scaling

__all__ = ["from_hf_config", "to_hf_config", "to_hf_dict"]

#: keys of a rope dict that belong to every rope type; the rest are the method's.
_SHARED_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved"}
#: keys some models keep in the rope dict that are not RoPE: the model's attention reads them, the rotation does not
#: (Ministral 3's ``llama_4_scaling_beta``: a query scale 1 + β·ln(1 + ⌊p/L0⌋) by position)
ATTENTION_KEYS = {"llama_4_scaling_beta"}
#: keys some config classes write in the rope dict that no rope function reads, which transformers skips when it
#: validates the dict (``ignore_keys_at_rope_validation``: Ministral 3 copies the model's ``max_position_embeddings``)
_UNREAD_KEYS = {"max_position_embeddings"}
#: model types whose transformers class runs M-RoPE interleaved (Qwen3-VL's recomposition) and blocked (Qwen2-VL's)
INTERLEAVED_MROPE = frozenset(
    f"{name}{suffix}"
    for name in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_omni_moe")
    for suffix in ("", "_text")
)
BLOCKED_MROPE = frozenset(
    f"{name}{suffix}" for name in ("qwen2_vl", "qwen2_5_vl", "qwen2_5_omni") for suffix in ("", "_text")
)
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta")
#: top-level keys read as the rope dict's (transformers' own name first, then GPT-NeoX's).
_TOP_LEVEL = {
    "rope_theta": ("rope_theta", "rotary_emb_base"),
    "partial_rotary_factor": ("partial_rotary_factor", "rotary_pct"),
}
_DEFAULTS = {"rope_theta": 10000.0, "partial_rotary_factor": 1.0}
#: the names a config.json gives the sizes the head size is computed from: transformers' own, then those its config
#: classes map to them (``attribute_map``: DBRX's d_model and n_heads, GPT-J's and CodeGen's n_embd and n_head)
_ALIASES = {
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "num_attention_heads": ("num_attention_heads", "n_heads", "n_head"),
}


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    raise TypeError(f"config must be a dict or a transformers PretrainedConfig, got {type(config).__name__}")


def text_part(top: dict[str, Any]) -> dict[str, Any]:
    """The part of a config that holds the RoPE: its ``text_config`` where that has RoPE keys (transformers builds a
    multimodal model's language model from it, whatever the top level says: Fuyu keeps a base there its Persimmon
    never reads), else ``top``."""
    text = top.get("text_config")
    if isinstance(text, Mapping) and any(text.get(key) for key in _ROPE_KEYS):
        return dict(text)
    return top


def _mrope(params: dict[str, Any], top: dict[str, Any], source: str) -> MRope | None:
    """The M-RoPE of a rope dict, by transformers' rules (see the module docstring)."""
    model_type = str(top.get("model_type") or "")
    sections = params.get("mrope_section")
    if sections is None:
        if model_type in INTERLEAVED_MROPE | BLOCKED_MROPE:
            raise ValueError(
                f"{source} of a {model_type!r} model has no mrope_section; give it (transformers would use the model "
                "class's default sections)"
            )
        return None
    flag = params.get("mrope_interleaved")
    if flag is not None and not isinstance(flag, bool):
        raise ValueError(f"mrope_interleaved in {source} must be true or false, got {flag!r}")
    interleaved = bool(flag)
    if model_type in INTERLEAVED_MROPE | BLOCKED_MROPE:
        interleaved = model_type in INTERLEAVED_MROPE
        if flag is not None and flag != interleaved:
            warnings.warn(
                f"{source} says mrope_interleaved={flag}, but transformers runs {model_type!r} "
                f"{'interleaved' if interleaved else 'blocked'} whatever the key says; using that",
                UserWarning,
                stacklevel=4,
            )
    if isinstance(sections, str) or not isinstance(sections, list | tuple):
        raise ValueError(f"mrope_section in {source} must be a list of three pair counts, got {sections!r}")
    try:
        return MRope(tuple(sections), layout="interleaved" if interleaved else "blocked")
    except TypeError as error:
        raise ValueError(f"mrope_section in {source}: {error}") from error


def _head_dim(top: dict[str, Any]) -> int:
    if top.get("head_dim"):  # transformers: `head_dim or hidden_size // num_attention_heads`
        return hf_int("head_dim", top["head_dim"])
    hidden_key = next((key for key in _ALIASES["hidden_size"] if top.get(key)), None)
    heads_key = next((key for key in _ALIASES["num_attention_heads"] if top.get(key)), None)
    if hidden_key and heads_key:
        hidden = hf_int(hidden_key, top[hidden_key])
        heads = hf_int(heads_key, top[heads_key])
        if hidden % heads:
            raise ValueError(
                f"{hidden_key}={hidden} is not divisible by {heads_key}={heads}, so the head size is not "
                f"{hidden_key} // {heads_key} = {hidden // heads}; give head_dim"
            )
        return hidden // heads
    raise ValueError("config needs head_dim, or hidden_size and num_attention_heads, to know the head size")


def _rope_dict(top: dict[str, Any], layer_type: str | None) -> tuple[dict[str, Any], str]:
    """The rope dict of the config and its key (``rope_scaling`` first, as transformers), for ``layer_type``."""
    found = {}
    for key in ("rope_scaling", "rope_parameters"):
        value = top.get(key)
        if value and not isinstance(value, Mapping):
            raise ValueError(
                f"{key} must be a dict such as {{'rope_type': 'linear', 'factor': 2.0}}, got {value!r} "
                f"({type(value).__name__})"
            )
        if value:
            found[key] = dict(value)
    if len(found) == 2:
        legacy, current = ({"rope_type" if k == "type" else k: v for k, v in found[key].items()} for key in found)
        differ = sorted(key for key in legacy.keys() & current.keys() if legacy[key] != current[key])
        if differ:
            warnings.warn(
                f"config has both rope_scaling and rope_parameters, and they disagree on {differ}; using "
                "rope_scaling (transformers reads `rope_scaling or rope_parameters`)",
                UserWarning,
                stacklevel=3,
            )
    source = next(iter(found), "rope_parameters")
    params = found.get(source, {})
    nested = sorted(key for key, value in params.items() if isinstance(value, Mapping))
    if nested:
        if layer_type not in nested:
            raise ValueError(f"{source} is nested by layer type; pass layer_type, one of {nested}")
        return dict(params[layer_type]), f"{source}[{layer_type!r}]"
    if layer_type is not None:
        raise ValueError(f"layer_type={layer_type!r} given, but {source} is not nested by layer type")
    return params, source


def _shared_value(
    key: str, params: dict[str, Any], source: str, top: dict[str, Any], layer_type: str | None = None
) -> tuple[str, Any]:
    """``(where, value)`` of ``rope_theta`` or ``partial_rotary_factor``: the rope dict's, else the top level's. The
    disagreement warning is for one rope dict only: beside dicts per layer type, a top-level value is at most one
    type's (DeepSeek-V4's ``rope_theta`` is its ``main`` base), not a rival of each."""
    top_keys = [name for name in _TOP_LEVEL[key] if top.get(name) is not None]
    if key in params:
        for name in top_keys if layer_type is None else ():
            if top[name] != params[key]:
                warnings.warn(
                    f"config has {name}={top[name]!r} at the top level and {key}={params[key]!r} in {source}; "
                    f"using {params[key]!r} from {source} (transformers' rule)",
                    UserWarning,
                    stacklevel=3,
                )
        return key, params[key]
    if top_keys:
        return top_keys[0], top[top_keys[0]]
    if key == "rope_theta" and any(name in top for name in _TOP_LEVEL[key]):  # a null base is an error, not 10000
        name = next(name for name in _TOP_LEVEL[key] if name in top)
        return name, top[name]
    return key, _DEFAULTS[key]


def from_hf_config(config: Any, *, interleaved: bool = False, layer_type: str | None = None) -> RopeConfig:
    """Build a :class:`~ropekit.RopeConfig` from a transformers config object or its ``config.json`` dict.

    Follows transformers' reading rules, quirks included (the shared ones in this module's docstring, each
    method's in its config class).

    Args:
        config: a ``PretrainedConfig`` (anything with ``to_dict()``) or a dict (5.x ``rope_parameters`` or 4.x
            ``rope_scaling``).
        interleaved: the weights' pair layout; transformers' own models are half-split (``False``).
        layer_type: for rope dicts nested by layer type, which one to read (e.g. ``"full_attention"``).

    Returns:
        The equivalent config; ``frequencies(result, seq_len)`` equals transformers' ``ROPE_INIT_FUNCTIONS``
        output to float32 precision. It is the RoPE of the layers that rotate q and k: which layers those are
        (SmolLM3 and Llama 4 have NoPE layers) is ``ropekit.integrations.hf.rope_layers.rope_layout(config)``.

    Raises:
        ValueError: naming the key, when a required key is missing or null, a value is of the wrong kind or out
            of range, or the rope type is unknown.

    Warns:
        UserWarning: ``rope_scaling`` and ``rope_parameters`` disagree, or a top-level ``rope_theta`` (or
            ``partial_rotary_factor``) disagrees with the rope dict's; the warning says which value is used.

    Example:
        >>> from_hf_config({"head_dim": 128, "max_position_embeddings": 131072,
        ...                 "rope_scaling": {"type": "linear", "factor": 4.0}}).scaling
        LinearScaling(factor=4.0)
    """
    top = text_part(_as_dict(config))
    params, source = _rope_dict(top, layer_type)
    head_dim = _head_dim(top)
    where, partial = _shared_value("partial_rotary_factor", params, source, top, layer_type)
    if (
        where == "partial_rotary_factor"
        and "partial_rotary_factor" not in params
        and "partial_rotary_factor" not in top
    ):
        where, partial = "rotary_dim", rotary_dim_factor(top, head_dim) or partial  # MiniMax-M2's count of dims
    partial = hf_float(where, partial, above=0.0)
    if partial > 1:
        raise ValueError(f"{where} must be in (0, 1], got {partial!r}")
    where, base = _shared_value("rope_theta", params, source, top, layer_type)
    base = hf_float(where, base, above=1.0)
    base = ntk_alpha_base(params, top, base, head_dim, int(head_dim * partial)) or base  # Hunyuan's NTK-alpha
    name = params.get("rope_type", params.get("type", "default"))
    if not isinstance(name, str):
        raise ValueError(f"rope_type in {source} must be a string such as 'yarn', got {name!r}")
    if name == "mrope":  # Qwen2-VL's 4.x spelling; transformers reads it as default
        name = "default"
    method = get_scaling(name).config_class
    rotary_dim = method.hf_rotary_dim(head_dim, partial)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"partial_rotary_factor={partial!r} with head_dim={head_dim} gives rotary dim {rotary_dim} "
            "(transformers truncates head_dim * partial_rotary_factor); ropekit needs an even rotary dim >= 2"
        )
    skipped = _SHARED_KEYS | ATTENTION_KEYS | _UNREAD_KEYS
    params = dict(params)
    mscale_pair_factor(params, top, {field.name for field in dataclasses.fields(method)}, f"{source}: {name}")
    scaling_params = {key: value for key, value in params.items() if key not in skipped}
    try:
        scaling = method.from_hf(scaling_params, top, name=name)
    except TypeError as error:  # a value of the wrong kind in the dict: bad data, so a ValueError naming it
        raise ValueError(f"{source}: {error}") from error
    return RopeConfig(
        head_dim,
        base=base,
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        interleaved=interleaved,
        scaling=scaling,
        mrope=_mrope(params, top, source),
    )


def _partial_rotary_factor(rope: RopeConfig, method: type[ScalingConfig]) -> float:
    """The smallest float p >= rotary_dim/head_dim that transformers' truncation maps back to rotary_dim."""
    partial = rope.dim / rope.head_dim
    while method.hf_rotary_dim(rope.head_dim, partial) < rope.dim:
        partial = math.nextafter(partial, 2.0)  # one ulp up: 56/110 * 110 is 55.99…, truncated to 55
    return partial


def to_hf_dict(rope: RopeConfig) -> dict[str, Any]:
    """transformers 5.x ``rope_parameters`` for ``rope``: the dict to store under that key in a config.json.

    Methods transformers lacks are written as the equivalent ``default`` dict where one exists (static ``ntk``
    and ``base`` become ``default`` with the changed ``rope_theta``). ``interleaved`` is a property of the
    weights' layout, not of the config, and is not written. transformers builds a config from the result without
    any warning, except where a method's docstring says otherwise (``proportional`` with ``factor != 1``). The
    model-level keys are the caller's (:func:`to_hf_config` sets them):

    * ``dynamic``: transformers reads the original length from the model's ``max_position_embeddings``; set
      that key to ``original_max_position_embeddings`` (the dict written here has no length).
    * ``llama3``: transformers warns unless ``max_position_embeddings > original_max_position_embeddings``.
    * ``yarn``: transformers warns when ``max_position_embeddings / original_max_position_embeddings`` is
      neither 1 nor ``factor``.

    Args:
        rope: the config to write.

    Returns:
        A new dict with ``rope_type``, ``rope_theta``, ``partial_rotary_factor`` (when only part of the head
        rotates, chosen so that transformers' truncation ``int(head_dim * p)`` gives back exactly the rotary dim)
        and the method's keys; plain Python floats, ints and lists, so ``json.dumps`` accepts it.

    Raises:
        ValueError: a ropekit-only option (``fixed_seq_len``, YaRN's paper ramp) is set.

    Example:
        >>> to_hf_dict(RopeConfig(64, base=5e5))
        {'rope_type': 'default', 'rope_theta': 500000.0}
    """
    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a RopeConfig, got {type(rope).__name__}")
    rope_type, base, params = ("default", rope.base, {}) if rope.scaling is None else rope.scaling.to_hf(rope)
    method = get_scaling(rope_type).config_class
    result: dict[str, Any] = {"rope_type": rope_type, "rope_theta": float(base)}
    if rope.dim != rope.head_dim or method.hf_always_writes_partial:
        result["partial_rotary_factor"] = _partial_rotary_factor(rope, method)
    result.update(params)
    if rope.mrope is not None:
        result["mrope_section"] = list(rope.mrope.sections)
        if rope.mrope.layout == "interleaved":
            result["mrope_interleaved"] = True
    return result


def to_hf_config(
    rope: RopeConfig,
    config: Mapping[str, Any] | None = None,
    *,
    max_position_embeddings: int | None = None,
    layer_type: str | None = None,
) -> dict[str, Any]:
    """A transformers ``config.json`` dict: ``config`` (copied, not changed) with its RoPE replaced by ``rope``.

    Writes ``rope_parameters`` (:func:`to_hf_dict`) and removes the 4.x ``rope_scaling``, which transformers would
    otherwise read first. Top-level keys that restate the rope dict (``rope_theta``, ``partial_rotary_factor``,
    GPT-NeoX's ``rotary_emb_base``/``rotary_pct``) are updated where present, so readers agree.
    ``from_hf_config(to_hf_config(rope, config))`` gives back ``rope`` (for methods transformers has).

    Args:
        rope: the config to write.
        config: the model's config dict (``None``: start from ``{"head_dim": rope.head_dim}``).
        max_position_embeddings: the context length to declare; ``None`` keeps the config's. For ``dynamic`` it is
            always the original length L0, because transformers reads L0 from this key (the base then follows
            the length at run time).
        layer_type: for a config whose ``rope_parameters`` is nested by layer type, the entry to replace.

    Returns:
        A new dict, ready for ``json.dump``.

    Raises:
        ValueError: the config's head size differs from ``rope.head_dim``, ``layer_type`` does not match the
            config's nesting, ``max_position_embeddings`` is not a positive integer, or ``rope`` has a ropekit-only
            option.
    """
    result = copy.deepcopy(dict(config)) if config is not None else {"head_dim": rope.head_dim}
    params = to_hf_dict(rope)
    if not (result.get("head_dim") or result.get("hidden_size")):
        result["head_dim"] = rope.head_dim
    if _head_dim(result) != rope.head_dim:
        raise ValueError(f"config has head size {_head_dim(result)}, but rope.head_dim is {rope.head_dim}")
    existing = result.pop("rope_scaling", None) or result.get("rope_parameters") or {}
    nested = isinstance(existing, Mapping) and any(isinstance(value, Mapping) for value in existing.values())
    if nested != (layer_type is not None):
        raise ValueError(
            f"layer_type={layer_type!r}, but the config's rope_parameters is "
            + ("nested by layer type: pass one of " + repr(sorted(existing)) if nested else "not nested by layer type")
        )
    result["rope_parameters"] = {**existing, layer_type: params} if nested else params
    if not nested:
        for key, names in _TOP_LEVEL.items():
            for name in names:
                if name in result:
                    result[name] = params.get(key, _DEFAULTS[key])
    if max_position_embeddings is not None:
        max_position_embeddings = hf_int("max_position_embeddings", max_position_embeddings)
    if rope.scaling is not None:
        result.update(rope.scaling.hf_model_keys(max_position_embeddings))
    elif max_position_embeddings is not None:
        result["max_position_embeddings"] = max_position_embeddings
    return result
