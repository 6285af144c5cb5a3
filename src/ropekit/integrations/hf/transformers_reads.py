"""Whether transformers loads a written ``config.json`` and runs the RoPE ropekit meant: the check every config
``extend`` (and ``finetune``'s export) writes passes before it is committed.

A config can be valid JSON with a known ``rope_type`` and still not load: Phi-3's config class accepts only
``default`` and ``longrope`` (it raises on ``linear``, ``llama3`` and ``dynamic``, and renames ``yarn`` to
``longrope``, which then has no ``short_factor``). So the check asks transformers itself: the model type's config
class (``CONFIG_MAPPING``) reads the dict, and transformers' own ``ROPE_INIT_FUNCTIONS`` for the rope type it read
(plain RoPE: θ_i = b^(−2i/d) from the base and partial rotary factor it read) must give ropekit's inverse frequencies
(1e-5 relative: transformers computes in float32) and attention factor at each length where a length-following
RoPE may switch. A model type transformers does not know is not checked (nothing can load it by type).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ropekit.config import RopeConfig

#: relative tolerance between transformers' float32 and ropekit's float64 inverse frequencies
RTOL = 1e-5


def read_config(config: Mapping[str, Any]) -> Any:
    """transformers' config object for the ``config.json`` dict ``config`` (a copy: config classes edit the dict),
    its log output silenced; ``None`` for a model type transformers does not know.

    Raises:
        ValueError: the config class refuses the dict (one line: the class and transformers' own message).
    """
    from transformers import CONFIG_MAPPING

    model_type = config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        return None
    config_class = CONFIG_MAPPING[model_type]
    try:
        with quietly():
            plain = json.loads(json.dumps(dict(config)))
            # what transformers' own file reader does: {"__float__": "Infinity"} is how it saves inf (Bamba's
            # time_step_limit); transformers before 5 has no such tags
            decode = getattr(config_class, "_decode_special_floats", None)
            return config_class.from_dict(decode(plain) if decode else plain)
    except Exception as error:
        raise ValueError(f"transformers' {config_class.__name__} cannot load it: {_one_line(error)}") from None


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """transformers' log output and stderr silenced (it warns about the small or unusual configs it reads)."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def _one_line(error: BaseException) -> str:
    cause = error.__cause__ or error
    text = " ".join(str(cause).split()) or type(cause).__name__
    return f"{type(cause).__name__}: {text}"[:300]


def transformers_mismatch(
    config: Mapping[str, Any], ropes: Mapping[str | None, RopeConfig], lengths: Iterable[int]
) -> str | None:
    """``None`` when transformers loads ``config`` and computes ``ropes`` from it, else one phrase saying why not.

    Args:
        config: the ``config.json`` dict to check.
        ropes: the RoPE meant for each layer type (``None``: the one RoPE of every layer).
        lengths: sequence lengths to compare at (besides transformers' default, no length).
    """
    import numpy as np

    from ropekit.scaling.registry import frequencies

    try:
        loaded = read_config(config)
    except ValueError as error:
        return str(error)
    if loaded is None:
        return None
    text = loaded.get_text_config() if hasattr(loaded, "get_text_config") else loaded
    for layer_type, rope in ropes.items():
        for length in [None, *sorted(set(lengths))]:
            try:
                theirs, factor = _transformers_frequencies(text, layer_type, length)
            except Exception as error:
                return f"transformers cannot compute its RoPE{_where(layer_type)}: {_one_line(error)}"
            ours = frequencies(rope, seq_len=length)
            same = theirs.shape == ours.inv_freq.shape and np.allclose(theirs, ours.inv_freq, rtol=RTOL, atol=0)
            if not same or not np.isclose(factor, ours.attention_factor, rtol=RTOL):
                return (
                    f"transformers reads {_rope_dict(text, layer_type)}{_where(layer_type)} and computes other "
                    f"frequencies or attention factor than ropekit's {rope.scaling.rope_type if rope.scaling else 'default'}"
                    + ("" if length is None else f" at length {length}")
                )
    return None


def _where(layer_type: str | None) -> str:
    return "" if layer_type is None else f" for {layer_type}"


def _rope_dict(config: Any, layer_type: str | None) -> Any:
    params = getattr(config, "rope_parameters", None) or {}
    return params.get(layer_type, params) if layer_type is not None else params


def _transformers_frequencies(config: Any, layer_type: str | None, length: int | None) -> tuple[Any, float]:
    """transformers' (inv_freq as float64 numpy, attention factor) for one layer type of a loaded config."""
    import numpy as np
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = _rope_dict(config, layer_type)
    kind = params.get("rope_type", "default")
    if kind == "default":  # each model class computes plain RoPE itself: b^(-2i/d) over the rotary dim
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        dim = int(head_dim * params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0) or 1.0))
        exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        return (1.0 / (params["rope_theta"] ** exponents)).double().numpy(), 1.0
    extra = {} if layer_type is None else {"layer_type": layer_type}
    inv_freq, factor = ROPE_INIT_FUNCTIONS[kind](config, None, seq_len=length, **extra)
    return np.asarray(inv_freq.double().numpy()), float(factor)


def as_transformers_reads(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (a ``config.json`` dict) with its RoPE as transformers' config class for the model type reads it.

    ``rope_parameters`` becomes the dict (or the dicts per layer type) the class builds from every key it accepts
    (``rope_scaling``, ``rope_theta``, ``rotary_dim``, ``rotary_pct``, ``rope_local_base_freq``, its own defaults:
    OLMo 3 gives ``rope_scaling`` to its full-attention layers only, Gemma 3 its sliding layers
    ``rope_local_base_freq``), and ``rope_scaling``, folded into it, is dropped (per layer type, so are ``rope_theta``
    and ``rope_local_base_freq``: each dict states its base, and ``extend`` writes them again). Every other key stays as it is, the
    older ones that restate the RoPE included (``extend`` writes them in step). ``config`` is returned as it is where
    transformers is not installed, does not know the model type or refuses the dict, or where the RoPE lives in
    ``text_config``.
    """
    try:
        loaded = read_config(config)
    except (ImportError, ValueError):
        return dict(config)
    if loaded is None or isinstance(config.get("text_config"), Mapping):
        return dict(config)
    params = getattr(loaded, "rope_parameters", None)
    if not isinstance(params, Mapping) or not params:
        return dict(config)
    folded = ("rope_scaling",) if "rope_type" in params else ("rope_scaling", "rope_theta", "rope_local_base_freq")
    read = {key: value for key, value in config.items() if key not in folded}  # per layer type: each dict its base
    read["rope_parameters"] = json.loads(json.dumps(dict(params)))
    return read
