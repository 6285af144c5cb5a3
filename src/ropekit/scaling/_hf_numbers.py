"""Reading numbers from transformers config dicts: each failure is a ``ValueError`` naming the key.

A config.json is data, not code, so a wrong value there (a string, a null, 4096.7 where a length belongs) is a
``ValueError`` that names the key and says what is allowed; nothing is truncated or coerced silently. Shared by
:mod:`ropekit.hf_format` and the methods' ``from_hf`` hooks; never imports transformers.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from ropekit._validate import require_float


def hf_int(key: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int: an integer, or a float with no fractional part (JSON may write 4096.0).

    Raises:
        ValueError: naming ``key`` for null, a non-number, a fractional value (127.9 is not truncated) or a value
            below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r} ({type(value).__name__})")
    if not isinstance(value, Integral):
        number = float(value)
        if not math.isfinite(number) or not number.is_integer():
            raise ValueError(f"{key} must be a whole number >= {minimum}, got {value!r} (it is not truncated)")
        value = int(number)
    if value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def hf_float(key: str, value: object, *, above: float | None = None) -> float:
    """``value`` as a finite float, or a ``ValueError`` naming ``key`` (null and strings included)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        allowed = "a real number" if above is None else f"a real number > {above}"
        raise ValueError(f"{key} must be {allowed}, got {value!r} ({type(value).__name__})")
    return require_float(key, value, above=above)


def hf_original_length(params: dict[str, Any], model: dict[str, Any], name: str) -> int:
    """L0 for yarn, longrope and llama3, in transformers' order.

    transformers quirk: the top-level ``original_max_position_embeddings`` wins (Phi-3 writes it there),
    then the rope dict's, then ``max_position_embeddings``; a null or 0 counts as absent (``or``). ropekit: the
    same order; a value that is not a positive whole number raises ``ValueError`` naming its key.
    """
    key = "original_max_position_embeddings"
    for value in (model.get(key), params.get(key)):
        if value:
            return hf_int(key, value)
    if model.get("max_position_embeddings"):
        return hf_int("max_position_embeddings", model["max_position_embeddings"])
    raise ValueError(f"rope_type {name!r} needs original_max_position_embeddings (or max_position_embeddings)")


def max_length(model: dict[str, Any]) -> int | None:
    """The model's ``max_position_embeddings`` (validated), or ``None`` when absent or null."""
    value = model.get("max_position_embeddings")
    return None if value is None else hf_int("max_position_embeddings", value)


def hf_fields(params: dict[str, Any], model: dict[str, Any], name: str) -> tuple[dict[str, Any], float | None]:
    """``(fields, derived factor)`` of a length-scaling rope dict (yarn, longrope): its non-null fields with L0 in
    transformers' order (:func:`hf_original_length`), and, where ``factor`` is missing or null, the factor
    transformers derives, ``max_position_embeddings / L0`` (``None`` when the dict gives one).

    Raises:
        ValueError: no L0, or no factor and no ``max_position_embeddings`` to derive it from.
    """
    values = {key: value for key, value in params.items() if value is not None}
    values["original_max_position_embeddings"] = original = hf_original_length(params, model, name)
    if values.get("factor") is not None:
        return values, None
    length = max_length(model)
    if length is None:
        raise ValueError(f"rope_type {name!r} without factor needs max_position_embeddings")
    return values, length / original
