"""Plain base change (Adjusted Base Frequency, arXiv 2309.10305; Code Llama, arXiv 2308.12950)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ropekit._validate import require_float
from ropekit.scaling.registry import Frequencies, ScalingConfig, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class BaseChange(ScalingConfig):
    """Replace the model's base by ``base`` (for continued training at a longer length)."""

    rope_type = "base"
    base_change = True
    base: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", require_float("base", self.base, above=1.0))

    def to_hf(self, rope: RopeConfig) -> tuple[str, float, dict[str, Any]]:
        """transformers has no such type: written as ``default`` with ``rope_theta`` = the new base."""
        return "default", self.base, {}


@register_scaling(BaseChange, aliases=("abf",))
def base_change_frequencies(spec: BaseChange, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """θ_i = b_new^(−2i/d); attention factor 1."""
    return Frequencies(inv_freq(rope.dim, spec.base), 1.0)
