"""Reading and writing Hugging Face transformers RoPE configs (no transformers import needed).

transformers 5.x keeps RoPE settings in ``rope_parameters`` (with ``rope_type``, ``rope_theta`` and
``partial_rotary_factor``); 4.x used ``rope_scaling`` (legacy key ``type``) beside a top-level ``rope_theta``.
Both are read. transformers' quirks (checked against transformers 5.18) and how ropekit treats each one;
they are reproduced here, in the compatible mode, and nowhere else:

* ``rope_scaling`` wins over ``rope_parameters`` when a config has both (transformers does
  ``rope_scaling or rope_parameters``). ropekit: the same.
* ``rope_theta`` and ``partial_rotary_factor`` inside the rope dict win over top-level keys; a missing base is
  10000. ropekit: the same, and GPT-NeoX's top-level ``rotary_emb_base``/``rotary_pct`` are read as
  ``rope_theta``/``partial_rotary_factor``. Model-specific defaults (GPT-NeoX's ``rotary_pct`` defaults to 0.25
  when absent, some models have another default base) are not known here: such configs must state the key.
* The rotary dim is ``int(head_dim * partial_rotary_factor)``, a truncation: 56/110 gives 55, not 56. An odd
  result makes transformers compute ceil(d/2) frequencies with exponents 2i/d. ropekit: the same truncation,
  and an odd or zero rotary dim raises ``ValueError`` (pairs need an even dim). ``to_hf_dict`` writes a factor
  that truncates back to the exact rotary dim.
* ``proportional`` uses ``2 * int(partial_rotary_factor * head_dim // 2)`` rotating dims. ropekit: the same.
* YaRN ``beta_fast``/``beta_slow`` of 0 (or null) mean the defaults 32 and 1 (transformers uses ``or``).
  ropekit: the same here; ``YarnScaling`` itself requires values > 0.
* YaRN ``truncate: null`` disables truncation (transformers tests ``if truncate:``). ropekit: read as ``False``.
* YaRN ``factor`` is a required key (transformers raises ``KeyError`` without it), but ``factor: null`` means
  ``max_position_embeddings / original_max_position_embeddings``. ropekit: a missing key raises ``ValueError``,
  null is derived the same way (and raises if the ratio is below 1).
* LongRoPE ``factor`` missing or null means ``max_position_embeddings / original_max_position_embeddings``, and
  only feeds the attention factor, which is 1 for any ratio <= 1. ropekit: derived the same way, clamped to 1
  (identical frequencies and attention factor).
* yarn, longrope and llama3 take ``original_max_position_embeddings`` from the top level first (Phi-3), then
  from the rope dict, then fall back to ``max_position_embeddings``. ropekit: the same order.
* dynamic NTK's original length is the model's ``max_position_embeddings``; an ``original_max_position_embeddings``
  in its rope dict is ignored. ropekit: the same.
* Values transformers only warns about (factor < 1, beta_fast < beta_slow, low_freq_factor >= high_freq_factor,
  LongRoPE lists of the wrong length) raise ``ValueError`` in ropekit; so do keys ropekit does not know.
* Nested per-layer-type rope dicts (Gemma-style ``{"full_attention": {...}, "sliding_attention": {...}}``) are
  read one layer type at a time: pass ``layer_type``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ropekit._validate import require_float
from ropekit.config import RopeConfig
from ropekit.scaling.ntk import ntk_base
from ropekit.scaling.registry import get_scaling

#: keys transformers' own validation requires (beyond ``rope_type``), after its standardisation step.
_REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
}
#: (rope_type, key) pairs where transformers accepts an explicit null and derives the value.
_NULL_MEANS_DERIVED = {("yarn", "factor")}
_NOT_SCALING_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
_USES_ORIGINAL_LENGTH = ("yarn", "longrope", "llama3")


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


def _rope_dict(top: dict[str, Any], layer_type: str | None) -> dict[str, Any]:
    """The rope dict of the config (``rope_scaling`` first, as transformers), for ``layer_type`` if nested."""
    params = top.get("rope_scaling") or top.get("rope_parameters") or {}
    nested = sorted(key for key, value in params.items() if isinstance(value, Mapping))
    if nested:
        if layer_type not in nested:
            raise ValueError(f"rope_parameters is nested by layer type; pass layer_type, one of {nested}")
        return dict(params[layer_type])
    if layer_type is not None:
        raise ValueError(f"layer_type={layer_type!r} given, but rope_parameters is not nested by layer type")
    return dict(params)


def _rotary_dim(head_dim: int, partial: float, proportional: bool) -> int:
    """transformers' rotary dim: ``int(head_dim * p)``, or ``2 * int(p * head_dim // 2)`` for proportional."""
    return 2 * int(partial * head_dim // 2) if proportional else int(head_dim * partial)


def from_hf_config(config: Any, *, interleaved: bool = False, layer_type: str | None = None) -> RopeConfig:
    """Build a :class:`RopeConfig` from a transformers config object or its ``config.json`` dict.

    Follows transformers' reading rules, quirks included (see the module docstring for each quirk and how
    ropekit treats it).

    Args:
        config: a ``PretrainedConfig`` or a dict (5.x ``rope_parameters`` or 4.x ``rope_scaling``).
        interleaved: the weights' pair layout; transformers' own models are half-split (``False``).
        layer_type: for rope dicts nested by layer type, which one to read (e.g. ``"full_attention"``).

    Returns:
        The equivalent config; ``frequencies(result, seq_len)`` equals transformers' ``ROPE_INIT_FUNCTIONS``
        output to float32 precision.

    Raises:
        ValueError: a required key is missing, the rope type is unknown, or a value is out of range.

    Example:
        >>> from_hf_config({"head_dim": 128, "max_position_embeddings": 131072,
        ...                 "rope_scaling": {"type": "linear", "factor": 4.0}}).scaling
        LinearScaling(factor=4.0)
    """
    top = _as_dict(config)
    params = _rope_dict(top, layer_type)
    rope_type = params.get("rope_type", params.get("type", "default"))
    method = get_scaling(rope_type)
    base = params.get("rope_theta", top.get("rope_theta", top.get("rotary_emb_base", 10000.0)))
    partial = params.get("partial_rotary_factor", top.get("partial_rotary_factor", top.get("rotary_pct", 1.0)))
    partial = require_float("partial_rotary_factor", partial, above=0.0)
    if partial > 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial!r}")
    head_dim = _head_dim(top)
    rotary_dim = _rotary_dim(head_dim, partial, method.name == "proportional")
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"partial_rotary_factor={partial!r} with head_dim={head_dim} gives rotary dim {rotary_dim} "
            "(transformers truncates head_dim * partial_rotary_factor); ropekit needs an even rotary dim >= 2"
        )
    missing = [
        key
        for key in _REQUIRED.get(method.name, ())
        if key not in params or (params[key] is None and (method.name, key) not in _NULL_MEANS_DERIVED)
    ]
    if missing:
        raise ValueError(f"rope_parameters for rope_type {rope_type!r} is missing required key(s) {missing}")
    scaling_params = {k: v for k, v in params.items() if k not in _NOT_SCALING_KEYS and v is not None}
    max_len = top.get("max_position_embeddings")
    if method.name in _USES_ORIGINAL_LENGTH:
        original = top.get("original_max_position_embeddings") or params.get("original_max_position_embeddings")
        original = original or max_len
        if original is None:
            raise ValueError(
                f"rope_type {rope_type!r} needs original_max_position_embeddings (or max_position_embeddings)"
            )
        scaling_params["original_max_position_embeddings"] = int(original)
        if scaling_params.get("factor") is None and method.name != "llama3":
            if max_len is None:
                raise ValueError(f"rope_type {rope_type!r} without factor needs max_position_embeddings")
            derived = max_len / original
            if method.name == "yarn" and derived < 1:
                raise ValueError(
                    "yarn factor is null, so it is max_position_embeddings / original_max_position_embeddings = "
                    f"{max_len}/{original} = {derived}, which must be >= 1"
                )
            scaling_params["factor"] = max(derived, 1.0)
    if method.name == "yarn":
        for key, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
            scaling_params[key] = scaling_params.get(key) or default
        if "truncate" in params and params["truncate"] is None:
            scaling_params["truncate"] = False
    if method.name == "dynamic":
        if max_len is None:
            raise ValueError("rope_type 'dynamic' needs max_position_embeddings (its original length)")
        scaling_params["original_max_position_embeddings"] = int(max_len)
    scaling = None if method.name == "default" else method.make(**scaling_params)
    return RopeConfig(
        head_dim,
        base=float(base),
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        interleaved=interleaved,
        scaling=scaling,
    )


def _partial_rotary_factor(rope: RopeConfig, proportional: bool) -> float:
    """The smallest float p >= rotary_dim/head_dim that transformers' truncation maps back to rotary_dim."""
    partial = rope.dim / rope.head_dim
    while _rotary_dim(rope.head_dim, partial, proportional) < rope.dim:
        partial = math.nextafter(partial, 2.0)  # one ulp up: 56/110 * 110 is 55.99…, truncated to 55
    return partial


def to_hf_dict(rope: RopeConfig) -> dict[str, Any]:
    """transformers 5.x ``rope_parameters`` for ``rope`` (see :meth:`RopeConfig.to_hf_dict`).

    transformers builds a config from the result without any warning, except for one transformers quirk:
    ``proportional`` with ``factor != 1`` (its validation does not list the ``factor`` key it reads, so it logs
    "Unrecognized keys"; ropekit writes ``factor`` only when it is not 1). The model-level keys are the caller's:

    * ``dynamic``: transformers reads the original length from the model's ``max_position_embeddings``; set
      that key to ``original_max_position_embeddings`` (the dict written here has no length).
    * ``llama3``: transformers warns unless ``max_position_embeddings > original_max_position_embeddings``.
    * ``yarn``: transformers warns when ``max_position_embeddings / original_max_position_embeddings`` is
      neither 1 nor ``factor``.

    Returns:
        The ``rope_parameters`` dict (plain floats and ints, JSON-ready). ``partial_rotary_factor`` is chosen so
        that transformers' truncation ``int(head_dim * p)`` gives back exactly the rotary dim.

    Raises:
        ValueError: a ropekit-only option (``fixed_seq_len``, YaRN's paper ramp) is set.
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
        if rope_type == "proportional" and params.get("factor") == 1.0:
            params.pop("factor")
    result: dict[str, Any] = {"rope_type": rope_type, "rope_theta": base}
    if rope.dim != rope.head_dim or rope_type == "proportional":
        result["partial_rotary_factor"] = _partial_rotary_factor(rope, rope_type == "proportional")
    result.update(params)
    return result
