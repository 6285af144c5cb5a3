"""Linear Position Interpolation (Chen et al., arXiv 2306.15595): every frequency divided by s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ropekit.scaling._pairs import PairGroups
from ropekit.scaling.registry import Frequencies, ScalingConfig, check_factor, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class LinearScaling(ScalingConfig):
    """Position Interpolation: positions are squeezed by ``factor`` (s >= 1)."""

    rope_type = "linear"
    hf_required = ("factor",)
    plan_order = 1.0
    hf_native = True
    extend_preference = 4.0
    eval_order = 1.0
    plan_why = (
        "Linear interpolation divides every frequency by s: positions map back into the trained range, but "
        "neighbouring tokens become s times closer in angle."
    )
    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))

    def plan_summary(self, rope: RopeConfig, freqs: Frequencies, groups: PairGroups) -> tuple[dict[str, Any], str]:
        return {}, f"every frequency divided by {self.factor:g}"


@register_scaling(LinearScaling, aliases=("pi",))
def linear_frequencies(spec: LinearScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """inv_i = θ_i / s, attention factor 1 (PI, arXiv 2306.15595, eq. 4)."""
    return Frequencies(inv_freq(rope.dim, rope.base) / spec.factor, 1.0)
