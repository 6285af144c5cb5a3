"""Proportional RoPE (transformers 5.x, Gemma-style): frequencies over the whole head, only some pairs rotate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit.scaling.registry import Frequencies, ScalingConfig, check_factor, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class ProportionalScaling(ScalingConfig):
    """Proportional RoPE.

    Unlike partial rotary, the exponent's denominator is ``head_dim`` (not ``rotary_dim``) and the result has
    ``head_dim/2`` entries: the first ``rotary_dim/2`` pairs rotate with θ_i = b^(−2i/head_dim)/s, the rest have
    frequency 0 (they pass through). Pairs are (i, i + head_dim/2), so apply it with ``rotary_dim = head_dim``.

    transformers quirks and how ropekit treats them:

    * The number of rotating pairs is ``int(partial_rotary_factor * head_dim // 2)``; ``from_hf_config`` uses
      the same expression and ``to_hf_dict`` writes a factor that maps back to the same count.
    * transformers reads ``factor`` but its validation does not list it, so a config with ``factor`` logs
      "Unrecognized keys". ropekit accepts it, and ``to_hf_dict`` writes it only when it is not 1.
    * Without ``partial_rotary_factor`` transformers warns that proportional equals linear; ``to_hf_dict``
      always writes it.
    """

    rope_type = "proportional"
    hf_always_writes_partial = True
    hf_native = True
    factor: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))

    @classmethod
    def hf_rotary_dim(cls, head_dim: int, partial_rotary_factor: float) -> int:
        """``2 * int(partial_rotary_factor * head_dim // 2)`` rotating dims, as transformers counts them."""
        return 2 * int(partial_rotary_factor * head_dim // 2)

    def to_hf(self, rope: RopeConfig) -> tuple[str, float, dict[str, Any]]:
        """``factor`` is written only when it is not 1 (see the class docstring)."""
        params = self.hf_params()
        if params.get("factor") == 1.0:
            params.pop("factor")
        return self.rope_type, rope.base, params


@register_scaling(ProportionalScaling)
def proportional_frequencies(spec: ProportionalScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """θ_i = b^(−2i/head_dim)/s for i < rotary_dim/2, 0 for the remaining pairs up to head_dim/2."""
    rotated = np.arange(0, rope.dim, 2, dtype=np.float64) / rope.head_dim
    result = np.zeros(rope.head_dim // 2, dtype=np.float64)
    result[: rope.dim // 2] = rope.base**-rotated / spec.factor
    return Frequencies(result, 1.0)
