"""Dynamic NTK scaling (emozilla, 2023): the NTK base grows with the current sequence length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ropekit._validate import parse_tokens, require_int
from ropekit.scaling._hf_numbers import max_length
from ropekit.scaling.ntk import check_ntk_dim
from ropekit.scaling.registry import (
    Frequencies,
    ScalingConfig,
    check_factor,
    inv_freq,
    register_scaling,
    require_hf_keys,
)

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class DynamicScaling(ScalingConfig):
    """Dynamic NTK.

    Two modes:

    * ``fixed_seq_len=None`` (transformers-compatible): the base follows the ``seq_len`` of each call,
      n = max(seq_len, L). Keys already in a KV cache keep the rotation of the length they were written at,
      so results depend on history (tests/scaling/test_length_modes.py reproduces it).
    * ``fixed_seq_len=N``: the base is computed once for n = max(N, L) and never changes, so a KV cache stays
      consistent. This is a ropekit option; transformers cannot express it.

    transformers quirks and how ropekit treats them:

    * The original length L is the model's ``max_position_embeddings``; an ``original_max_position_embeddings``
      in the rope dict is ignored. ``from_hf_config`` does the same, and ``to_hf_dict`` writes no length: whoever
      writes the config.json sets ``max_position_embeddings`` to L.
    * The module recomputes only when ``max(position) + 1`` exceeds the largest length seen, and resets to the
      original frequencies only when it drops strictly below L (a call of length exactly L after a longer one
      keeps the long-length base). :class:`ropekit.RotaryEmbedding` follows the same rule.
    * With ``factor = 1`` the base still grows above L (b·(n/L)^(d/(d−2))): "factor 1" is not "no scaling"
      for dynamic NTK. ropekit: the same formula.
    * Inside its module transformers forms the new base from a tensor length, in float32; ropekit computes in
      float64 (they agree to ~1e-6 relative).

    Attributes:
        factor: s >= 1.
        original_max_position_embeddings: L, the length below which nothing changes.
        fixed_seq_len: the declared maximum length for the fixed mode.
    """

    rope_type = "dynamic"
    ropekit_only = ("fixed_seq_len",)
    hf_native = True
    eval_order = 3.0
    depends_on_seq_len = True
    hf_required = ("factor",)
    factor: float
    original_max_position_embeddings: int
    fixed_seq_len: int | None = None

    @classmethod
    def parse_param(cls, name: str, text: str) -> Any:
        """``fixed_seq_len`` is a length (``32k`` = 32768 tokens); the other fields read as every method's do."""
        return parse_tokens(name, text) if name == "fixed_seq_len" else super().parse_param(name, text)

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))
        original = require_int("original_max_position_embeddings", self.original_max_position_embeddings, minimum=1)
        object.__setattr__(self, "original_max_position_embeddings", original)
        if self.fixed_seq_len is not None:
            object.__setattr__(self, "fixed_seq_len", require_int("fixed_seq_len", self.fixed_seq_len, minimum=1))

    def check_rope(self, rope: RopeConfig) -> None:
        check_ntk_dim(rope, self.rope_type)

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> DynamicScaling:
        """L is the model's ``max_position_embeddings`` (see the class docstring)."""
        require_hf_keys(params, cls.hf_required, name)
        length = max_length(model)
        if length is None:
            raise ValueError("rope_type 'dynamic' needs max_position_embeddings (its original length)")
        values = {key: value for key, value in params.items() if value is not None}
        return cls.from_params({**values, "original_max_position_embeddings": length})

    def to_hf(self, rope: RopeConfig) -> tuple[str, float, dict[str, Any]]:
        params = self.hf_params()
        params.pop("original_max_position_embeddings")
        return self.rope_type, rope.base, params

    def hf_model_keys(self, max_position_embeddings: int | None) -> dict[str, Any]:
        """``max_position_embeddings`` is L (transformers reads the original length from it), whatever is asked."""
        return {"max_position_embeddings": self.original_max_position_embeddings}

    def declared_base(self, rope: RopeConfig) -> float | None:
        """Frozen (``fixed_seq_len``), it is plain RoPE at the base of n = max(N, L); else ``None``."""
        if self.fixed_seq_len is None:
            return None
        return dynamic_base(self, rope, self.fixed_seq_len)

    def length_switch(self) -> tuple[tuple[int, ...], str] | None:
        if self.fixed_seq_len is not None:
            return None
        length = self.original_max_position_embeddings
        return (length,), f"its frequencies follow the current sequence length past L = {length:,}"

    def recompute_length(self, computed_for: int | None, seq_len: int) -> int | None:
        """Grow when ``seq_len`` exceeds the largest length seen; reset to L only strictly below L."""
        original = self.original_max_position_embeddings
        current = computed_for or original
        if seq_len > current:
            return seq_len
        if seq_len < original < current:
            return original
        return None


@register_scaling(DynamicScaling)
def dynamic_frequencies(spec: DynamicScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """b' = b·(s·n/L − (s−1))^(d/(d−2)) with n = max(seq_len, L); identity for n <= L."""
    current = spec.fixed_seq_len if spec.fixed_seq_len is not None else seq_len
    return Frequencies(inv_freq(rope.dim, dynamic_base(spec, rope, current)), 1.0)


def dynamic_base(spec: DynamicScaling, rope: RopeConfig, seq_len: int | None) -> float:
    """b' = b·(s·n/L − (s−1))^(d/(d−2)) with n = max(seq_len, L), in float64; exactly b for n <= L."""
    length = spec.original_max_position_embeddings
    n = max(seq_len or length, length)
    if n == length:  # exactly the plain base (the formula would give 1 ± one rounding inside the power)
        return float(rope.base)
    dim = rope.dim
    return float(rope.base * (spec.factor * n / length - (spec.factor - 1)) ** (dim / (dim - 2)))
