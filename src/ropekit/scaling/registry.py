"""The registry of context-extension methods, keyed by the Hugging Face ``rope_type`` name.

A method is one frozen config dataclass (a :class:`ScalingConfig`) and one pure function
``(spec, rope, *, seq_len=None) -> Frequencies``. Dispatch is only ever ``SCALINGS[name]``.
This module is numpy-only: the theory tools and the torch module share it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ropekit._validate import require_float, require_int

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True)
class Frequencies:
    """What a scaling method produces.

    Attributes:
        inv_freq: float64 array of shape ``(rotary_dim // 2,)``, the angular frequency of each pair.
        attention_factor: multiplies cos and sin, so attention logits scale by its square (YaRN).
    """

    inv_freq: np.ndarray
    attention_factor: float = 1.0

    @property
    def wavelengths(self) -> np.ndarray:
        """``2π / inv_freq`` per pair (``inf`` for pairs that do not rotate)."""
        with np.errstate(divide="ignore"):
            return 2 * np.pi / self.inv_freq


@dataclass(frozen=True, kw_only=True)
class ScalingConfig:
    """Base class of every method's config. Subclasses set ``rope_type`` and add HF-named fields."""

    rope_type: ClassVar[str] = ""
    #: fields that only ropekit understands; ``to_hf_dict`` refuses non-default values of these.
    ropekit_only: ClassVar[tuple[str, ...]] = ()
    #: True when the frequencies depend on the current sequence length.
    depends_on_seq_len: ClassVar[bool] = False

    def check_rope(self, rope: RopeConfig) -> None:
        """Raise ``ValueError`` if this method cannot serve ``rope`` (e.g. factor lists of the wrong length)."""

    def hf_params(self) -> dict[str, Any]:
        """Fields in transformers' naming, without ``None`` values and ropekit-only options."""
        params = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in self.ropekit_only:
                if value != field.default:
                    raise ValueError(
                        f"{self.rope_type}.{field.name}={value!r} is a ropekit-only option that transformers "
                        "cannot express; leave it at its default to export"
                    )
                continue
            if value is not None:
                params[field.name] = list(value) if isinstance(value, tuple) else value
        return params


MethodFunction = Callable[..., Frequencies]


@dataclass(frozen=True)
class ScalingMethod:
    """A registered method: its name, config class and frequency function."""

    name: str
    config_class: type[ScalingConfig]
    compute: MethodFunction

    def make(self, **params: Any) -> ScalingConfig:
        """Build this method's config from keyword parameters (validated)."""
        known = {field.name for field in dataclasses.fields(self.config_class)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} for rope_type {self.name!r}; allowed: {sorted(known)}")
        return self.config_class(**params)


SCALINGS: dict[str, ScalingMethod] = {}
ALIASES: dict[str, str] = {}


def register_scaling(
    config_class: type[ScalingConfig], *, aliases: tuple[str, ...] = ()
) -> Callable[[MethodFunction], MethodFunction]:
    """Decorator registering ``function`` as the frequency function of ``config_class.rope_type``."""

    def decorate(function: MethodFunction) -> MethodFunction:
        name = config_class.rope_type
        if not name or name in SCALINGS:
            raise ValueError(f"rope_type {name!r} is empty or already registered")
        SCALINGS[name] = ScalingMethod(name, config_class, function)
        for alias in aliases:
            ALIASES[alias] = name
        return function

    return decorate


def list_scalings() -> list[str]:
    """The registered ``rope_type`` names, in registration order (aliases not included)."""
    return list(SCALINGS)


def get_scaling(name: str) -> ScalingMethod:
    """Look up a method by ``rope_type`` name or alias; unknown names raise listing the known ones."""
    key = ALIASES.get(name, name)
    if key not in SCALINGS:
        known = ", ".join(list(SCALINGS) + [f"{a} (= {t})" for a, t in ALIASES.items()])
        raise ValueError(f"unknown rope_type {name!r}; known: {known}")
    return SCALINGS[key]


def make_scaling(name: str, **params: Any) -> ScalingConfig | None:
    """Build a scaling config by name (``"default"``/``"none"`` give ``None``, i.e. plain RoPE)."""
    if name in ("none", "default") and not params:
        return None
    return get_scaling(name).make(**params)


def inv_freq(rotary_dim: int, base: float) -> np.ndarray:
    """Plain RoPE frequencies ``base ** (-2i / rotary_dim)`` for ``i = 0 … rotary_dim/2 − 1``, in float64.

    RoFormer (arXiv 2104.09864), eq. 15: θ_i = b^(−2(i−1)/d).

    Args:
        rotary_dim: the rotary dimension d (even, >= 2).
        base: the RoPE base b (finite, > 1).

    Returns:
        float64 array of shape ``(rotary_dim // 2,)``, decreasing from 1.
    """
    require_int("rotary_dim", rotary_dim, minimum=2)
    if rotary_dim % 2:
        raise ValueError(f"rotary_dim must be even (dims rotate in pairs), got {rotary_dim}")
    base = require_float("base", base, above=1.0)
    exponents = np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim
    return base**-exponents


def frequencies(rope: RopeConfig, seq_len: int | None = None) -> Frequencies:
    """Frequencies and attention factor of ``rope`` (with its scaling method), in float64.

    Args:
        rope: the model's rotary config.
        seq_len: current sequence length, used by length-dependent methods (dynamic, longrope) in their
            transformers-compatible mode; ignored by the others.
    """
    if seq_len is not None:
        require_int("seq_len", seq_len, minimum=1)
    if rope.scaling is None:
        return Frequencies(inv_freq(rope.dim, rope.base), 1.0)
    method = SCALINGS[rope.scaling.rope_type]
    return method.compute(rope.scaling, rope, seq_len=seq_len)


def check_factor(name: str, value: float) -> float:
    """Scaling factors are finite and >= 1 (a factor below 1 would shrink the context)."""
    return require_float(name, value, at_least=1.0)
