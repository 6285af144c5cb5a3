"""Argument checks shared by every config: each failure names the argument, the value and what is allowed."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from numbers import Integral, Real

from ropekit.errors import ArgumentType, InvalidArgument


def require_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` as an int, or raise naming ``name`` if it is not an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ArgumentType(name, value, message=f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise InvalidArgument(name, value, f"must be an integer >= {minimum}", allowed=f">= {minimum}")
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
        message = f"{name} must be a real number, got {value!r} ({type(value).__name__})"
        raise ArgumentType(name, value, message=message)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgument(name, value, "must be finite", allowed="a finite number")
    if above is not None and not number > above:
        raise InvalidArgument(name, value, f"must be > {above}", allowed=f"> {above}")
    if at_least is not None and not number >= at_least:
        raise InvalidArgument(name, value, f"must be >= {at_least}", allowed=f">= {at_least}")
    return number


def require_choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise listing the choices."""
    if value not in allowed:
        message = f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}"
        raise InvalidArgument(name, value, allowed=allowed, message=message)
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
        ropekit.errors.InvalidArgument: rotary_dim must be even (dims rotate in pairs), got 7
    """
    dim = require_int(name, value, minimum=minimum)
    if head_dim is not None and dim > head_dim:
        message = f"{name} must be <= head_dim ({head_dim}), got {dim}{note}"
        raise InvalidArgument(name, dim, allowed=f"<= {head_dim}", message=message)
    if dim % 2:
        message = f"{name} must be even (dims rotate in pairs), got {dim}{note}"
        raise InvalidArgument(name, dim, allowed="an even number", message=message)
    return dim


def parse_number(name: str, text: str) -> int | float:
    """A parameter's value from its text on a command line: an integer stays an integer, else a finite number.

    Example:
        >>> parse_number("group", "4"), parse_number("k", "2.5")
        (4, 2.5)
    """
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            message = f"{name}={text!r}: the value must be a number"
            raise InvalidArgument(name, text, allowed="a number", message=message) from None


def parse_value(name: str, text: str) -> int | float | bool | str | tuple[float, ...]:
    """A config field's value from its text on a command line: a comma-separated list of finite numbers (a tuple
    of floats), ``true``/``false``, an integer, a number, else the text itself.

    Example:
        >>> parse_value("short_factor", "1,1.5"), parse_value("beta_fast", "16"), parse_value("ramp", "paper")
        ((1.0, 1.5), 16, 'paper')
    """
    text = text.strip()
    if "," in text:
        items = [item.strip() for item in text.split(",")]
        if not all(items):
            message = f"{name} has an empty item in {text!r} (two commas or a trailing comma)"
            raise InvalidArgument(name, text, allowed="a list of numbers", message=message)
        values = []
        for item in items:
            try:
                value = float(item)
            except ValueError:
                message = f"{name} must be a comma-separated list of numbers, got {text!r} ({item!r})"
                raise InvalidArgument(name, text, allowed="a list of numbers", message=message) from None
            if not math.isfinite(value):
                raise InvalidArgument(
                    name, item, allowed="finite numbers", message=f"{name} must hold finite numbers, got {item!r}"
                )
            values.append(value)
        return tuple(values)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def parse_tokens(name: str, text: str) -> int:
    """A length in tokens from its text on a command line: ``4096``, ``32k`` or ``1M`` (k = 1024, as context sizes
    are), exact: a length that is not a whole number of tokens is refused.

    Example:
        >>> parse_tokens("fixed_seq_len", "32k"), parse_tokens("fixed_seq_len", "1.5k")
        (32768, 1536)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if match is None:
        message = f"{name} must be a length such as 4096, 32k or 1M (k = 1024), got {text!r}"
        raise InvalidArgument(name, text, allowed="a length in tokens", message=message)
    exact = Fraction(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[match.group(2).lower()]
    if exact.denominator != 1:
        raise InvalidArgument(name, text, "must be a whole number of tokens", allowed="a whole number of tokens")
    return int(exact)
