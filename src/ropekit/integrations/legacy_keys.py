"""The older RoPE keys (``rope_theta``, ``rope_scaling``) written beside transformers 5's ``rope_parameters``.

transformers 5 writes a model's RoPE only as ``rope_parameters``. Readers of the older keys (MLX-LM, llama.cpp's
``convert_hf_to_gguf.py``, transformers 4.x, tools that parse config.json themselves) then silently run
``rope_theta`` = 10,000 and no scaling. So every config ropekit writes also carries:

* one RoPE: ``rope_theta`` = its base and ``rope_scaling`` = the same dict as ``rope_parameters`` (``null`` for
  plain RoPE). transformers (``PreTrainedConfig.convert_rope_params_to_dict``) takes ``rope_scaling`` in place
  of ``rope_parameters`` when both are given, so an equal dict means the same;
* per layer type with exactly ``full_attention`` and ``sliding_attention`` (Gemma 3): the 4.x form ``rope_theta``
  (full), ``rope_local_base_freq`` (sliding) and ``rope_scaling`` (full attention's scaling, ``null`` when plain);
  transformers' Gemma 3 config merges ``rope_scaling`` into ``full_attention``.

Each candidate is checked with transformers' own config class: loading the dict with the older keys must give the
same ``rope_parameters`` as without them. Where it does not, or there is no such form (other layer types, a
scaled sliding-window layer, a model type transformers does not know), nothing is added and the note says why.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from typing import Any

#: the keys this module may add at the top level of a config.json
LEGACY_KEYS = ("rope_theta", "rope_scaling", "rope_local_base_freq")
_NESTED = ("full_attention", "sliding_attention")


def with_legacy_keys(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``config`` (a config.json dict with ``rope_parameters``) with the older keys added where they mean the same.

    Returns:
        ``(new_config, note)``: ``note`` is ``None`` when the older keys were written, else one sentence saying why
        they were not (readers of the older keys would then run another RoPE).
    """
    base = {key: value for key, value in config.items() if key not in LEGACY_KEYS}
    params = base.get("rope_parameters")
    candidate, why = _candidate(params)
    if candidate is None:
        return base, f"rope_theta/rope_scaling not written: {why}; readers of the older keys run another RoPE"
    new = {**base, **candidate}
    problem = _same_meaning(base, new)
    if problem is not None:
        return base, f"rope_theta/rope_scaling not written: {problem}; readers of the older keys run another RoPE"
    return new, None


def _candidate(params: Any) -> tuple[dict[str, Any] | None, str]:
    """The older keys for ``params`` (a rope_parameters dict), or ``(None, why)``."""
    if not isinstance(params, dict):
        return None, "the config has no rope_parameters dict"
    if "rope_type" in params:
        scaling = None if params["rope_type"] == "default" else json.loads(json.dumps(params))
        return {"rope_theta": params.get("rope_theta", 10000.0), "rope_scaling": scaling}, ""
    if sorted(params) != sorted(_NESTED):
        return None, f"the older keys have no form for per-layer-type RoPE with layer types {sorted(params)}"
    full, sliding = params["full_attention"], params["sliding_attention"]
    if sliding.get("rope_type", "default") != "default":
        return None, "the older keys cannot scale sliding-window layers (rope_local_base_freq is a base only)"
    scaling = None if full.get("rope_type", "default") == "default" else json.loads(json.dumps(full))
    keys = {"rope_theta": full.get("rope_theta"), "rope_local_base_freq": sliding.get("rope_theta")}
    return {**keys, "rope_scaling": scaling}, ""


def _same_meaning(without: dict[str, Any], with_keys: dict[str, Any]) -> str | None:
    """``None`` when transformers' config class reads the same ``rope_parameters`` from both dicts, else why not."""
    from transformers import CONFIG_MAPPING

    model_type = without.get("model_type")
    try:
        config_class = CONFIG_MAPPING[model_type]
        read = [_rope_parameters(config_class, config) for config in (without, with_keys)]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return f"transformers cannot read model type {model_type!r} to check the older keys ({error})"
    if read[0] != read[1]:
        return f"transformers would read them as another RoPE ({read[1]} instead of {read[0]})"
    return None


def _rope_parameters(config_class: Any, config: dict[str, Any]) -> Any:
    """The ``rope_parameters`` transformers' ``config_class`` reads from ``config`` (a copy: it edits the dict)."""
    values = json.loads(json.dumps(config))
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return json.loads(json.dumps(config_class.from_dict(values).rope_parameters))
    finally:
        logger.setLevel(level)
