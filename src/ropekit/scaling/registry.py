"""The registry of context-extension methods, keyed by the Hugging Face ``rope_type`` name.

A method is one frozen config dataclass (a :class:`ScalingConfig`) and one pure function ``(spec, rope, *,
seq_len=None) -> Frequencies``, dispatched by ``SCALINGS[name]``. Numpy only: theory and torch code share it.

How to add a method: one new file in this package, nothing else (the package imports every module that uses the
decorator; ``--help`` reads the ``rope_type`` line); the hooks of :class:`~ropekit.scaling.base.ScalingConfig`
(grouped there) say what else it may declare::

    @dataclass(frozen=True, kw_only=True)
    class PowerBase(ScalingConfig):
        rope_type = "power"  # the base raised to the power ``exponent``
        exponent: float = 0.5

    @register_scaling(PowerBase)
    def power_frequencies(spec: PowerBase, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
        return Frequencies(inv_freq(rope.dim, rope.base**spec.exponent), 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit._costs import MAX_FACTOR
from ropekit._registry import Registry
from ropekit._validate import require_float, require_int, require_rotary_dim
from ropekit.scaling._pairs import PairGroups, require_hf_keys  # noqa: F401  (the methods import them from here)
from ropekit.scaling.base import MissingParameters, ScalingConfig  # noqa: F401  (imported from here too)

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


MethodFunction = Callable[..., Frequencies]


@dataclass(frozen=True)
class ScalingMethod:
    """A registered method: its name, config class and frequency function."""

    name: str
    config_class: type[ScalingConfig]
    compute: MethodFunction

    def make(self, **params: Any) -> ScalingConfig:
        """Build this method's config from keyword parameters (validated)."""
        return self.config_class.from_params(params)


#: rope_type → :class:`ScalingMethod`, in registration order (the order the modules of this package are imported)
SCALINGS: Registry[ScalingMethod] = Registry("rope_type", home="ropekit.scaling", marker="@register_scaling")
#: alias → rope_type (``pi`` → ``linear``); :func:`get_scaling` accepts either
ALIASES: dict[str, str] = SCALINGS.aliases


def register_scaling(
    config_class: type[ScalingConfig], *, aliases: tuple[str, ...] = ()
) -> Callable[[MethodFunction], MethodFunction]:
    """Decorator registering ``function`` as the frequency function of ``config_class.rope_type``."""

    def decorate(function: MethodFunction) -> MethodFunction:
        name = config_class.rope_type
        SCALINGS.register(name, ScalingMethod(name, config_class, function), aliases=aliases)
        return function

    return decorate


def list_scalings() -> list[str]:
    """The registered ``rope_type`` names, in registration order (aliases not included)."""
    return list(SCALINGS.names())


def get_scaling(name: str) -> ScalingMethod:
    """Look up a method by ``rope_type`` name or alias: a ``TypeError`` for a non-string, an
    :class:`~ropekit._registry.UnknownName` (a ``ValueError`` listing the names and aliases) for an unknown name."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a rope_type string such as 'yarn', got {name!r} ({type(name).__name__})")
    return SCALINGS.get(name)


def make_scaling(name: str, **params: Any) -> ScalingConfig | None:
    """Build a scaling config by name (``"default"``/``"none"`` give ``None``, i.e. plain RoPE)."""
    if name in ("none", "default") and not params:
        return None
    return get_scaling(name).make(**params)


def ranked_scalings(rank: str) -> list[str]:
    """The registered names whose config class sets the class attribute ``rank`` (e.g. ``"eval_order"``), lowest
    first; methods that leave it ``None`` are left out."""
    ranked = [(getattr(m.config_class, rank), name) for name, m in SCALINGS.items()]
    return [name for value, name in sorted((v, n) for v, n in ranked if v is not None)]


def inv_freq(rotary_dim: int, base: float) -> np.ndarray:
    """Plain RoPE frequencies ``base ** (-2i / rotary_dim)`` for ``i = 0 … rotary_dim/2 − 1``, in float64.

    RoFormer (arXiv 2104.09864), eq. 15: θ_i = b^(−2(i−1)/d).

    Args:
        rotary_dim: the rotary dimension d (even, >= 2).
        base: the RoPE base b (finite, > 1).

    Returns:
        float64 array of shape ``(rotary_dim // 2,)``, decreasing from 1.
    """
    rotary_dim = require_rotary_dim("rotary_dim", rotary_dim)
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
    from ropekit.config import RopeConfig  # config imports the scaling package: not at the top

    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a RopeConfig, got {type(rope).__name__}")
    if seq_len is not None:
        require_int("seq_len", seq_len, minimum=1)
    if rope.scaling is None:
        return Frequencies(inv_freq(rope.dim, rope.base), 1.0)
    method = SCALINGS.get(rope.scaling.rope_type)
    return method.compute(rope.scaling, rope, seq_len=seq_len)


def check_factor(name: str, value: float) -> float:
    """Scaling factors are finite and in [1, 1e6] (a factor below 1 would shrink the context)."""
    factor = require_float(name, value, at_least=1.0)
    if factor > MAX_FACTOR:
        raise ValueError(f"{name} must be <= {MAX_FACTOR:g} (a context extension factor), got {value!r}")
    return factor
