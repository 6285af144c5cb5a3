"""Argument checks shared by every config: each failure names the argument, the value and what is allowed."""

from __future__ import annotations

import math
from numbers import Integral, Real


def require_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` as an int, or raise naming ``name`` if it is not an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def require_float(
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
) -> float:
    """Return ``value`` as a finite float, or raise naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if above is not None and not number > above:
        raise ValueError(f"{name} must be > {above}, got {value!r}")
    if at_least is not None and not number >= at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    return number


def require_choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise listing the choices."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return str(value)


def require_rotary_dim(
    name: str, value: object, *, head_dim: int | None = None, minimum: int = 2, note: str = ""
) -> int:
    """Return ``value`` as an int rotary dim: even (dims rotate in pairs), ``>= minimum``, ``<= head_dim`` if given.

    The one check of a rotary dim; every failure names ``name``, the value and the rule it breaks (``note``, e.g.
    ``" (from head_dim)"``, is appended to the message).

    Example:
        >>> require_rotary_dim("rotary_dim", 64, head_dim=128)
        64
        >>> require_rotary_dim("rotary_dim", 7)
        Traceback (most recent call last):
        ...
        ValueError: rotary_dim must be even (dims rotate in pairs), got 7
    """
    dim = require_int(name, value, minimum=minimum)
    if head_dim is not None and dim > head_dim:
        raise ValueError(f"{name} must be <= head_dim ({head_dim}), got {dim}{note}")
    if dim % 2:
        raise ValueError(f"{name} must be even (dims rotate in pairs), got {dim}{note}")
    return dim
