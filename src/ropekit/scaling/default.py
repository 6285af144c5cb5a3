"""Plain RoPE: no scaling (RoFormer, arXiv 2104.09864)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ropekit.scaling.registry import Frequencies, ScalingConfig, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class DefaultScaling(ScalingConfig):
    """No scaling: θ_i = b^(−2i/d) over the rotary dim d, attention factor 1.

    transformers quirk: ``LlamaRotaryEmbedding.compute_default_rope_parameters`` ignores
    ``partial_rotary_factor`` and spreads the exponents over the whole head, while the models that rotate part
    of the head (Phi, Phi-3, GPT-NeoX) use ``int(head_dim * partial_rotary_factor)``. ropekit always uses the
    rotary dim, which equals what transformers computes for every model that applies partial rotary.
    """

    rope_type = "default"

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> None:
        """Plain RoPE is ``None`` in a :class:`~ropekit.RopeConfig`; other keys in a default rope dict are ignored."""
        return None


@register_scaling(DefaultScaling)
def default_frequencies(spec: DefaultScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """θ_i = b^(−2i/d) over the rotary dim; ``seq_len`` is ignored."""
    return Frequencies(inv_freq(rope.dim, rope.base), 1.0)
