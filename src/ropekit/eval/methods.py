"""Which scaling config each evaluated method gets at a given length."""

from __future__ import annotations

import dataclasses
from typing import Any

from ropekit.scaling.registry import ScalingConfig, get_scaling

#: what ``--methods`` means by default: every training-free method that needs no searched parameters
DEFAULT_METHODS = ("none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")


def factor_for(length: int, train_length: int, factor: float | str) -> float:
    """``auto``: s = length / train_length (at least 1); otherwise the given number."""
    if factor == "auto":
        return max(1.0, length / train_length)
    return float(factor)


def scaling_for(
    method: str,
    *,
    factor: float,
    train_length: int,
    native: ScalingConfig | None = None,
    extra: dict[str, Any] | None = None,
) -> ScalingConfig | None:
    """The scaling config for ``method`` at ``factor``.

    ``none`` is plain RoPE; ``native`` the model's own scaling. ``longrope`` needs searched per-pair
    factors, which only a model that ships them has (its native config, with ``factor`` updated); for
    other models it raises ``LookupError`` so callers can skip it. So does any method with a required
    parameter other than ``factor`` and the original length (e.g. ``base``) that ``extra`` does not give.

    Raises:
        LookupError: the method needs parameters that cannot be derived here.
        ValueError: the method is unknown or a parameter is out of range.
    """
    if method == "none":
        return None
    if method == "native":
        return native
    spec = get_scaling(method)
    if spec.name == "longrope":
        if native is None or native.rope_type != "longrope":
            raise LookupError("longrope needs searched short/long factors; this model has none")
        return dataclasses.replace(native, factor=max(1.0, factor))
    fields = {f.name for f in dataclasses.fields(spec.config_class)}
    params: dict[str, Any] = dict(extra or {})
    if "factor" in fields:
        params.setdefault("factor", max(1.0, factor))
    if "original_max_position_embeddings" in fields:
        params.setdefault("original_max_position_embeddings", train_length)
    missing = [
        f.name
        for f in dataclasses.fields(spec.config_class)
        if f.init
        and f.name not in params
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise LookupError(f"{method} needs parameter(s) {missing} that an evaluation sweep cannot derive")
    return spec.make(**params)


def describe_scaling(scaling: ScalingConfig | None) -> dict[str, Any]:
    """JSON-ready description of a scaling config (``{"rope_type": "default"}`` for none)."""
    if scaling is None:
        return {"rope_type": "default"}
    fields = dataclasses.asdict(scaling)
    for key in ("short_factor", "long_factor"):
        if key in fields:
            fields[key] = f"<{len(fields[key])} values>"
    return {"rope_type": scaling.rope_type, **fields}
