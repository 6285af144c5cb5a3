"""The older RoPE keys (``rope_theta``, ``rope_scaling``) written beside transformers 5's ``rope_parameters``.

transformers 5 writes a model's RoPE only as ``rope_parameters``. Readers of the older keys (MLX-LM, llama.cpp's
``convert_hf_to_gguf.py``, transformers 4.x, tools that parse config.json themselves) then silently run
``rope_theta`` = 10,000 and no scaling. So every config ropekit writes also carries:

* one RoPE: ``rope_theta`` = its base and ``rope_scaling`` = the rope dict with the 4.x key ``type`` beside
  ``rope_type`` (``null`` for plain RoPE). MLX-LM's Phi-3 requires ``type``; transformers 5 takes ``rope_scaling``
  in place of ``rope_parameters`` when both are given and reads ``type`` as ``rope_type``;
* per layer type with exactly ``full_attention`` and ``sliding_attention`` (Gemma 3): the 4.x form ``rope_theta``
  (full), ``rope_local_base_freq`` (sliding) and ``rope_scaling`` (full attention's scaling, ``null`` when plain);
  transformers' Gemma 3 config merges ``rope_scaling`` into ``full_attention``;
* the architecture's other spellings of the base and partial rotary factor that the config already has
  (GPT-NeoX's ``rotary_emb_base`` and ``rotary_pct``, ...: :mod:`~ropekit.integrations.hf.restated_keys`), set to
  the written values, so that no reader runs the source's.

YaRN's attention factor A has two spellings: an explicit ``attention_factor`` (transformers, vLLM's ``yarn``) and
the ratio g(s, ``mscale``)/g(s, ``mscale_all_dim``) with g(s, m) = 0.1·m·ln s + 1 (MLX-LM's ``yarn``, which
reads no ``attention_factor``, with ``mscale`` 1 and ``mscale_all_dim`` 0 when absent; vLLM's DeepSeek class).
Where the ratio of a yarn dict does not give its A, the dict (``rope_parameters`` and ``rope_scaling`` alike) gets
``attention_factor`` = A and ``mscale`` = (A·g(s, ``mscale_all_dim``) − 1)/(0.1·ln s), which keeps
``mscale_all_dim`` (DeepSeek's softmax-scale term) as it is; transformers then computes what it computed before.

Each candidate is checked with transformers itself: its config class reads the dict with and without the added
keys, and its own ``ROPE_INIT_FUNCTIONS`` must give the same inverse frequencies and attention factor at every
length that matters (each layer type), with the rope dicts differing at most in the keys above. Where they do not,
or there is no such form (other layer types, a scaled sliding-window layer, a model type transformers does not
know), nothing is added and the note says why. :func:`older_reader_gaps` says what a written ``rope_scaling``
still cannot tell MLX-LM 0.32, the reader of these keys that runs here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ropekit.integrations.hf.restated_keys import restated
from ropekit.scaling.yarn import yarn_mscale

#: the keys this module may add at the top level of a config.json
LEGACY_KEYS = ("rope_theta", "rope_scaling", "rope_local_base_freq")
#: the keys this module may add inside a rope dict (they change nothing transformers computes; checked)
ADDED_ROPE_KEYS = ("type", "attention_factor", "mscale", "mscale_all_dim")
_NESTED = ("full_attention", "sliding_attention")
#: model types whose config class reads ``rope_local_base_freq`` (written for them even where the source lacks it)
LOCAL_BASE_TYPES = ("gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "t5gemma2")


def with_legacy_keys(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``config`` (a config.json dict with ``rope_parameters``) with the older keys added where they mean the same.

    Returns:
        ``(new_config, note)``: ``note`` is ``None`` when the older keys were written and say everything, else one
        sentence saying why they were not written (readers of the older keys would then run another RoPE) or what
        MLX-LM cannot read from them (:func:`older_reader_gaps`).
    """
    base = {key: value for key, value in config.items() if key not in LEGACY_KEYS}
    base.update(restated(base))  # rotary_emb_base, rotary_pct, ...: the written values where the config has them
    params = _with_ratio(base.get("rope_parameters"))
    candidate, why = _candidate(
        params, "rope_local_base_freq" in config or config.get("model_type") in LOCAL_BASE_TYPES
    )
    if candidate is None:
        return base, f"rope_theta/rope_scaling not written: {why}; readers of the older keys run another RoPE"
    new = {**base, "rope_parameters": params, **candidate}
    problem = _same_meaning(base, new)
    if problem is not None:
        return base, f"rope_theta/rope_scaling not written: {problem}; readers of the older keys run another RoPE"
    gaps = older_reader_gaps(new)
    return new, (f"MLX-LM cannot express this RoPE: {'; '.join(gaps)}" if gaps else None)


def _with_ratio(params: Any) -> Any:
    """``params`` (a rope dict, or one per layer type) with each yarn dict's ``mscale`` giving its attention factor
    by the ratio rule too (module docstring); other dicts as they are."""
    if not isinstance(params, dict):
        return params
    if "rope_type" not in params:
        return {key: _with_ratio(value) for key, value in params.items()}
    if params.get("rope_type") != "yarn" or yarn_factors(params) is None:
        return params
    wanted, ratio = yarn_factors(params)
    mscale = _mscale_for(params, wanted)
    if math.isclose(ratio, wanted, rel_tol=1e-12) or mscale is None:
        return params  # already said, or never (older_reader_gaps says so)
    return {**params, "attention_factor": wanted, "mscale": mscale, "mscale_all_dim": params.get("mscale_all_dim", 0.0)}


def yarn_factors(params: dict[str, Any]) -> tuple[float, float] | None:
    """``(transformers' A, the ratio's A)`` of a yarn dict; ``None`` without a numeric ``factor``.

    transformers: ``attention_factor``, else g(s, mscale)/g(s, mscale_all_dim) when both are non-zero, else
    g(s, 1). The ratio (MLX-LM 0.32): g(s, mscale)/g(s, mscale_all_dim) with 1 and 0 for absent keys.
    """
    factor = params.get("factor")
    if not isinstance(factor, (int, float)) or isinstance(factor, bool):
        return None
    mscale, all_dim = params.get("mscale"), params.get("mscale_all_dim")
    ratio = yarn_mscale(factor, 1.0 if mscale is None else mscale) / yarn_mscale(factor, all_dim or 0.0)
    if params.get("attention_factor") is not None:
        return float(params["attention_factor"]), ratio
    if params.get("mscale") and params.get("mscale_all_dim"):
        return yarn_mscale(factor, params["mscale"]) / yarn_mscale(factor, params["mscale_all_dim"]), ratio
    return yarn_mscale(factor), ratio


def _mscale_for(params: dict[str, Any], wanted: float) -> float | None:
    """The ``mscale`` >= 0 whose ratio with the dict's ``mscale_all_dim`` is ``wanted``; ``None`` if there is none
    (s <= 1 and A != 1, or A below 1/g(s, mscale_all_dim))."""
    factor = params["factor"]
    if factor <= 1:
        return None
    mscale = (wanted * yarn_mscale(factor, params.get("mscale_all_dim") or 0.0) - 1.0) / (0.1 * math.log(factor))
    if mscale < -1e-12:
        return None
    rounded = max(float(f"{mscale:.15g}"), 0.0)  # 1.0, not 1.0000000000000002, where the ratio stays the same
    return rounded if math.isclose(yarn_mscale(factor, rounded), yarn_mscale(factor, mscale), rel_tol=1e-15) else mscale


def _candidate(params: Any, local_base: bool = True) -> tuple[dict[str, Any] | None, str]:
    """The older keys for ``params`` (a rope_parameters dict), or ``(None, why)``."""
    if not isinstance(params, dict):
        return None, "the config has no rope_parameters dict"
    if "rope_type" in params:
        return {"rope_theta": params.get("rope_theta", 10000.0), "rope_scaling": _scaling(params)}, ""
    if sorted(params) != sorted(_NESTED):
        return None, f"the older keys have no form for per-layer-type RoPE with layer types {sorted(params)}"
    full, sliding = params["full_attention"], params["sliding_attention"]
    if sliding.get("rope_type", "default") != "default":
        return None, "the older keys cannot scale sliding-window layers (rope_local_base_freq is a base only)"
    keys = {"rope_theta": full.get("rope_theta")}
    if local_base:  # a key of Gemma 3's config classes only: OLMo 3's would carry it as an unread extra
        keys["rope_local_base_freq"] = sliding.get("rope_theta")
    return {**keys, "rope_scaling": _scaling(full)}, ""


def _scaling(params: dict[str, Any]) -> dict[str, Any] | None:
    """``rope_scaling`` for one rope dict: a copy with ``type`` beside ``rope_type``; ``None`` for plain RoPE."""
    kind = params.get("rope_type", "default")
    return None if kind == "default" else {**json.loads(json.dumps(params)), "type": kind}


def _same_meaning(without: dict[str, Any], with_keys: dict[str, Any]) -> str | None:
    """``None`` when transformers computes the same RoPE from both dicts (its config class, then its
    ``ROPE_INIT_FUNCTIONS`` per layer type), else why not."""
    from ropekit.integrations.hf.transformers_reads import read_config

    model_type = without.get("model_type")
    try:
        read = [read_config(config) for config in (without, with_keys)]
        if read[0] is None:
            return f"transformers does not know model type {model_type!r}, so the older keys cannot be checked"
        return _compare(*read)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return f"transformers cannot read model type {model_type!r} to check the older keys ({error})"


def _compare(ours: Any, theirs: Any) -> str | None:
    """Why transformers' configs ``ours`` and ``theirs`` (read without and with the keys) run another RoPE."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    mine, other = ours.rope_parameters, theirs.rope_parameters
    nested = "rope_type" not in mine
    if nested != ("rope_type" not in other) or (nested and sorted(mine) != sorted(other)):
        return f"transformers would read them as another RoPE ({other} instead of {mine})"
    for layer_type in sorted(mine) if nested else [None]:
        a, b = (mine[layer_type], other[layer_type]) if nested else (mine, other)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k not in ADDED_ROPE_KEYS)
        if differ:
            return f"transformers would read {differ} otherwise ({[b.get(k) for k in differ]}, not {[a.get(k) for k in differ]})"
        compute = ROPE_INIT_FUNCTIONS.get(a.get("rope_type"))
        if compute is None:
            continue
        extra = {} if layer_type is None else {"layer_type": layer_type}
        for length in _lengths(ours, a):
            first, second = (compute(config, None, seq_len=length, **extra) for config in (ours, theirs))
            if not torch.equal(first[0], second[0]) or float(first[1]) != float(second[1]):
                return f"transformers would compute other frequencies or attention factor at length {length}"
    return None


def _lengths(config: Any, params: dict[str, Any]) -> list[int | None]:
    """The sequence lengths at which a length-following RoPE may change: around L0 and the model's length."""
    longest = int(getattr(config, "max_position_embeddings", None) or 2048)
    original = int(params.get("original_max_position_embeddings") or longest)
    return [None, 1, original, original + 1, longest, longest + 1, 2 * longest]


def older_reader_gaps(config: dict[str, Any]) -> list[str]:
    """What the ``rope_scaling`` of ``config`` says that MLX-LM 0.32 (``mlx_lm/models/rope_utils.py``) cannot read,
    one phrase each (empty: nothing, or no ``rope_scaling``):

    * any scaling at all, where MLX-LM's model file for the model type reads none
      (:mod:`~ropekit.integrations.hf.mlx_lm_scaling`; then that is the one phrase);
    * yarn ``truncate: false`` whose ramp ends are not whole pairs: MLX-LM always floors/ceils them;
    * a yarn attention factor that no ``mscale`` >= 0 gives by the ratio g(s, mscale)/g(s, mscale_all_dim) (A
      below 1/g(s, mscale_all_dim), or a factor s <= 1 with A != 1); a ratio that merely differs is a config
      written without :func:`with_legacy_keys`, not a gap;
    * a longrope attention factor (``attention_factor``, or from ``factor``) other than MLX-LM's own
      √(1 + ln(M/L0)/ln L0) (M = ``max_position_embeddings``; 1 when M <= L0): it reads neither key.
    """
    from ropekit.integrations.hf.mlx_lm_scaling import mlx_scaling_gap

    unread = mlx_scaling_gap(config)
    if unread is not None:
        return [unread]
    scaling = config.get("rope_scaling")
    if not isinstance(scaling, dict):
        return []
    kind = scaling.get("type") or scaling.get("rope_type")
    gaps = []
    if kind == "yarn" and scaling.get("truncate") is False and not _whole_ramp(config):
        gaps.append("its yarn always rounds the ramp ends to whole pairs (floor/ceil); truncate: false is lost")
    factors = yarn_factors(scaling) if kind == "yarn" else None
    if factors is not None and _mscale_for(scaling, factors[0]) is None and factors[0] != factors[1]:
        gaps.append(
            f"its yarn attention factor is g(s, mscale)/g(s, mscale_all_dim) (it reads no attention_factor), which "
            f"no mscale >= 0 makes {factors[0]:.6g} at factor {scaling['factor']:g}"
        )
    if kind == "longrope":
        wanted, own = _longrope_factors(config, scaling)
        if not math.isclose(own, wanted, rel_tol=1e-6):
            gaps.append(
                f"its longrope attention factor is sqrt(1 + ln(M/L0)/ln L0) = {own:.6g} from max_position_embeddings "
                f"(it reads neither attention_factor nor factor); transformers uses {wanted:.6g}"
            )
    return gaps


def _longrope_factors(config: dict[str, Any], scaling: dict[str, Any]) -> tuple[float, float]:
    """``(transformers' A, MLX-LM's A)`` of a longrope ``rope_scaling``: transformers takes ``attention_factor``, else
    √(1 + ln f/ln L0) with f = ``factor`` (absent: M/L0), 1 when f <= 1; MLX-LM always the latter with f = M/L0, its
    Phi-3 with L0 = the top-level ``original_max_position_embeddings`` (absent: 4,096)."""
    longest = float(config.get("max_position_embeddings") or 0)
    original = float(scaling.get("original_max_position_embeddings") or config.get("original_max_position_embeddings"))

    def formula(factor: float, length: float) -> float:
        return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(length))

    wanted = scaling.get("attention_factor")
    if wanted is None:
        wanted = formula(float(scaling.get("factor") or longest / original), original)
    own_original = (
        float(config.get("original_max_position_embeddings") or 4096)
        if config.get("model_type") == "phi3"
        else original
    )
    return float(wanted), formula(longest / own_original, own_original)


def _whole_ramp(config: dict[str, Any]) -> bool:
    """Whether the yarn of ``config`` has the same frequencies with ``truncate`` true (its ramp ends are whole)."""
    import dataclasses

    import numpy as np

    from ropekit.hf_format import from_hf_config
    from ropekit.scaling.registry import frequencies

    rope = from_hf_config({**config, "rope_parameters": None, "rope_scaling": config["rope_scaling"]})
    rounded = rope.replace(scaling=dataclasses.replace(rope.scaling, truncate=True))
    return bool(np.array_equal(frequencies(rope).inv_freq, frequencies(rounded).inv_freq))
