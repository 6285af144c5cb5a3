"""Which scaling config each evaluated method gets at a given length."""

from __future__ import annotations

from typing import Any

from ropekit.scaling.registry import MissingParameters, ScalingConfig, get_scaling

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
    """The scaling config for ``method`` at ``factor`` (clamped to at least 1).

    ``none`` is plain RoPE; ``native`` the model's own scaling. Every other method is built by its own
    :meth:`~ropekit.scaling.registry.ScalingConfig.from_options` from the factor, the training length as the
    original length, the model's own scaling and ``extra``. A method with a required parameter that these do not
    give (``longrope``'s searched factors on a model without them, ``base`` without ``extra={"base": ...}``)
    raises ``LookupError`` so callers can skip it.

    Raises:
        LookupError: the method needs parameters that cannot be derived here.
        ValueError: the method is unknown or a parameter is out of range.
    """
    if method == "none":
        return None
    if method == "native":
        return native
    spec = get_scaling(method)
    params = dict(extra or {})  # explicit parameters win over the derived factor and length
    factor = params.pop("factor", max(1.0, factor))
    original = params.pop("original_max_position_embeddings", train_length)
    try:
        return spec.config_class.from_options(factor=factor, original_length=original, native=native, **params)
    except MissingParameters as error:
        raise LookupError(f"{error}, which an evaluation sweep cannot derive") from error


def describe_scaling(scaling: ScalingConfig | None) -> dict[str, Any]:
    """JSON-ready description of a scaling config (``{"rope_type": "default"}`` for none)."""
    if scaling is None:
        return {"rope_type": "default"}
    return scaling.describe()
