"""Static NTK-aware scaling (bloc97, 2023): a larger base b' = b·s^(d/(d−2))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ropekit.scaling._pairs import PairGroups
from ropekit.scaling.registry import Frequencies, ScalingConfig, check_factor, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


def ntk_base(base: float, factor: float, dim: int) -> float:
    """The NTK-aware base b·s^(d/(d−2)): the lowest frequency is divided by exactly s, the highest kept.

    Example: b = 1e4, d = 128, s = 4 gives 40,890 (tests/theory/test_planning.py).

        >>> round(ntk_base(10000.0, 4.0, 128))
        40890
    """
    return base * factor ** (dim / (dim - 2))


def check_ntk_dim(rope: RopeConfig, rope_type: str) -> None:
    """NTK's exponent d/(d−2) needs a rotary dim of at least 4."""
    if rope.dim < 4:
        raise ValueError(f"{rope_type} scaling needs rotary_dim >= 4 (exponent d/(d-2)), got {rope.dim}")


@dataclass(frozen=True, kw_only=True)
class NTKScaling(ScalingConfig):
    """Static NTK-aware base change by ``factor`` (not in transformers; exported as ``default`` with b')."""

    rope_type = "ntk"
    plan_order = 2.0
    base_change = True
    extend_preference = 3.0
    eval_order = 2.0
    plan_why = "NTK-aware scaling raises the base so the slowest pair is divided by exactly s and the fastest is kept."
    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))

    def check_rope(self, rope: RopeConfig) -> None:
        check_ntk_dim(rope, self.rope_type)

    def to_hf(self, rope: RopeConfig) -> tuple[str, float, dict[str, Any]]:
        """transformers has no static NTK: written as ``default`` with ``rope_theta`` = b·s^(d/(d−2))."""
        return "default", ntk_base(rope.base, self.factor, rope.dim), {}

    def plan_summary(self, rope: RopeConfig, freqs: Frequencies, groups: PairGroups) -> tuple[dict[str, Any], str]:
        new_base = ntk_base(rope.base, self.factor, rope.dim)
        return {"base": new_base}, f"base {rope.base:g} -> {new_base:,.0f} (b·s^(d/(d−2)))"


@register_scaling(NTKScaling)
def ntk_frequencies(spec: NTKScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """θ'_i = b'^(−2i/d) with b' = b·s^(d/(d−2)); attention factor 1."""
    return Frequencies(inv_freq(rope.dim, ntk_base(rope.base, spec.factor, rope.dim)), 1.0)
