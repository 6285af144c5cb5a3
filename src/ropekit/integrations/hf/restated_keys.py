"""Config keys outside ``rope_parameters`` that restate its base, partial rotary factor or scaling: kept in step
when ``extend`` writes a new RoPE, and compared when it reads one.

transformers 5 reads a model's RoPE from ``rope_parameters`` (``rope_scaling`` first when both are given, and the
dict's ``rope_theta``/``partial_rotary_factor`` over any top-level key). Other readers take the older spellings the
architecture's config once had, per architecture in transformers' config classes and MLX-LM 0.32's model files:

* base: ``rope_theta`` (every architecture), ``rotary_emb_base`` (GPT-NeoX, GPT-NeoX-Japanese), and for the sliding
  layers of Gemma 3 ``rope_local_base_freq``;
* partial rotary: ``partial_rotary_factor`` (Phi, StableLM, Persimmon, ...), ``rotary_pct`` (GPT-NeoX), ``rotary_dim``
  in pairs×2 (MiniMax-M2);
* scaling: ``rope_scaling`` (with the 4.x key ``type``).

:mod:`~ropekit.integrations.hf.legacy_keys` writes ``rope_theta``/``rope_scaling``/``rope_local_base_freq``;
:func:`restated` gives the others the written values (only those the config already has, so nothing new appears);
:func:`disagreements` names the keys of a source config whose readers would run different RoPEs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: top-level key → the rope dict key it restates (each as written, except ``rotary_dim``: a count of dims)
RESTATED = {
    "rope_theta": "rope_theta",
    "rotary_emb_base": "rope_theta",
    "partial_rotary_factor": "partial_rotary_factor",
    "rotary_pct": "partial_rotary_factor",
    "rotary_dim": "partial_rotary_factor",
}
_DEFAULTS = {"rope_theta": 10000.0, "partial_rotary_factor": 1.0}
_NESTED = {"full_attention": "rope_theta", "sliding_attention": "rope_local_base_freq"}


def _head_dim(config: Mapping[str, Any]) -> int | None:
    if config.get("head_dim"):
        return int(config["head_dim"])
    if config.get("hidden_size") and config.get("num_attention_heads"):
        return int(config["hidden_size"]) // int(config["num_attention_heads"])
    return None


def _value(config: Mapping[str, Any], key: str, params: Mapping[str, Any]) -> Any:
    """What top-level ``key`` must hold to say what ``params`` (one rope dict) says."""
    value = params.get(RESTATED[key], _DEFAULTS[RESTATED[key]])
    if key == "rotary_dim":
        head_dim = _head_dim(config)
        return None if head_dim is None else int(head_dim * value)
    return value


def restated(config: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level restating keys ``config`` has (except ``rope_theta``, written by ``legacy_keys``), set to what its
    single ``rope_parameters`` dict says; empty for a per-layer-type config."""
    params = config.get("rope_parameters")
    if not isinstance(params, Mapping) or "rope_type" not in params:
        return {}
    found = {key: _value(config, key, params) for key in RESTATED if key != "rope_theta" and key in config}
    return {key: value for key, value in found.items() if value is not None}


def disagreements(config: Mapping[str, Any]) -> list[str]:
    """One phrase per key of ``config`` that says another base, partial rotary factor or scaling than the rope dict
    transformers 5 reads (``rope_parameters`` against its restatements); empty when all agree."""
    params = config.get("rope_parameters")
    scaling = config.get("rope_scaling")
    found = []
    if isinstance(params, Mapping) and isinstance(scaling, Mapping) and params:
        legacy = {("rope_type" if key == "type" else key): value for key, value in scaling.items()}
        for key in sorted(legacy.keys() & params.keys()):
            if legacy[key] != params[key] and not isinstance(params[key], Mapping):
                found.append(f"rope_scaling.{key} = {legacy[key]!r} but rope_parameters.{key} = {params[key]!r}")
    if not isinstance(params, Mapping):
        return found
    if "rope_type" in params:
        for key in RESTATED:
            stated = config.get(key)
            if stated is None or RESTATED[key] not in params:
                continue
            wanted = _value(config, key, params)
            if wanted is not None and stated != wanted:
                found.append(f"{key} = {stated!r} but rope_parameters.{RESTATED[key]} = {params[RESTATED[key]]!r}")
        return found
    for layer_type, key in _NESTED.items():
        inner = params.get(layer_type)
        stated = config.get(key)
        if isinstance(inner, Mapping) and stated is not None and stated != inner.get("rope_theta", stated):
            found.append(f"{key} = {stated!r} but rope_parameters.{layer_type}.rope_theta = {inner['rope_theta']!r}")
    return found
