"""LongRoPE (Ding et al., arXiv 2402.13753), as used by Phi-3: searched per-pair rescale factors."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit._validate import parse_tokens, require_float, require_int
from ropekit.errors import ArgumentType, InvalidArgument
from ropekit.scaling._hf_numbers import hf_fields
from ropekit.scaling.registry import (
    Frequencies,
    MissingParameters,
    ScalingConfig,
    check_factor,
    register_scaling,
    require_hf_keys,
)

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class LongRopeScaling(ScalingConfig):
    """LongRoPE.

    Two modes, as for dynamic NTK:

    * ``fixed_seq_len=None`` (transformers-compatible): ``long_factor`` is used when the current length is
      strictly greater than L0, ``short_factor`` otherwise (so exactly L0 is short, as in transformers).
      Switching invalidates the keys already in a KV cache.
    * ``fixed_seq_len=N``: the choice is made once for N, so the cache stays consistent (ropekit-only).

    The attention factor does not depend on the length: transformers keeps the one computed at construction
    when it switches factor lists, and so does ropekit. The legacy 4.x name ``su`` is an alias.

    Attributes:
        short_factor, long_factor: one positive rescale factor per pair (length rotary_dim/2). transformers
            only warns about a wrong length or a non-number; ropekit raises ``ValueError``.
        original_max_position_embeddings: L0.
        factor: s = L/L0 (>= 1), used only for the attention factor. transformers quirk: it derives the
            factor from ``max_position_embeddings / original_max_position_embeddings`` when it is missing or null
            and accepts ratios below 1 (giving A = 1); ``from_hf_config`` derives it the same way and clamps it
            to 1, which gives the same A. An explicit factor < 1 raises ``ValueError`` here (transformers only
            warns).
        attention_factor: explicit A; else 1 if s <= 1, else √(1 + ln s / ln L0). Deriving it needs L0 >= 2
            (ln 1 = 0; transformers divides by zero); a smaller L0 with s > 1 raises ``ValueError``.
        fixed_seq_len: the declared maximum length for the fixed mode.
    """

    rope_type = "longrope"
    ropekit_only = ("fixed_seq_len",)
    hf_native = True
    eval_order = 6.0
    depends_on_seq_len = True
    hf_required = ("short_factor", "long_factor")
    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position_embeddings: int
    factor: float = 1.0
    attention_factor: float | None = None
    fixed_seq_len: int | None = None

    @classmethod
    def parse_param(cls, name: str, text: str) -> Any:
        """``fixed_seq_len`` is a length (``32k`` = 32768 tokens); the other fields read as every method's do."""
        return parse_tokens(name, text) if name == "fixed_seq_len" else super().parse_param(name, text)

    def __post_init__(self) -> None:
        for name in ("short_factor", "long_factor"):
            object.__setattr__(self, name, _positive_factors(name, getattr(self, name)))
        original = require_int("original_max_position_embeddings", self.original_max_position_embeddings, minimum=1)
        object.__setattr__(self, "original_max_position_embeddings", original)
        object.__setattr__(self, "factor", check_factor("factor", self.factor))
        if self.attention_factor is not None:
            object.__setattr__(
                self, "attention_factor", require_float("attention_factor", self.attention_factor, above=0.0)
            )
        elif self.factor > 1 and original < 2:
            factor = self.factor
            raise InvalidArgument(
                "original_max_position_embeddings",
                original,
                allowed=">= 2",
                message=lambda n: (
                    f"{n('original_max_position_embeddings')} must be >= 2 when the attention factor is derived from "
                    f"it (A = sqrt(1 + ln s / ln L0) with s = {factor:g}), got {original}; or give "
                    f"{n('attention_factor')}"
                ),
            )
        if self.fixed_seq_len is not None:
            object.__setattr__(self, "fixed_seq_len", require_int("fixed_seq_len", self.fixed_seq_len, minimum=1))

    def check_rope(self, rope: RopeConfig) -> None:
        for name in ("short_factor", "long_factor"):
            if len(getattr(self, name)) != rope.dim // 2:
                raise ValueError(
                    f"{name} must have rotary_dim/2 = {rope.dim // 2} entries, got {len(getattr(self, name))}"
                )

    def resolved_attention_factor(self) -> float:
        """A = attention_factor, or 1 if s <= 1, else √(1 + ln s / ln L0)."""
        if self.attention_factor is not None:
            return float(self.attention_factor)
        if self.factor <= 1:
            return 1.0
        return math.sqrt(1 + math.log(self.factor) / math.log(self.original_max_position_embeddings))

    def uses_long_factor(self, seq_len: int | None) -> bool:
        """True when the long factors apply: the (fixed or current) length is strictly above L0."""
        length = self.fixed_seq_len if self.fixed_seq_len is not None else seq_len
        return bool(length) and length > self.original_max_position_embeddings

    @classmethod
    def from_options(
        cls,
        *,
        factor: float | None = None,
        original_length: int | None = None,
        base: float | None = None,
        native: ScalingConfig | None = None,
        **params: Any,
    ) -> ScalingConfig:
        """The per-pair factors are searched for one model: without ``short_factor``/``long_factor`` they come from
        ``native`` (the model's own LongRoPE config, with ``factor`` replaced); without either this raises
        :class:`~ropekit.scaling.registry.MissingParameters`."""
        given = {key for key, value in params.items() if value is not None}
        if not given & {"short_factor", "long_factor"}:
            if not isinstance(native, cls):
                raise MissingParameters(
                    cls.rope_type,
                    ["short_factor", "long_factor"],
                    "searched short/long factors, one per rotating pair; only a model that ships them has them",
                )
            return native if factor is None else dataclasses.replace(native, factor=factor)
        return super().from_options(factor=factor, original_length=original_length, base=base, **params)

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> LongRopeScaling:
        """L0 in transformers' order (:func:`~ropekit.scaling._hf_numbers.hf_original_length`); a missing or null factor
        is ``max_position_embeddings / L0``, clamped to 1 (see ``factor`` above)."""
        require_hf_keys(params, cls.hf_required, name)
        values, derived = hf_fields(params, model, name)
        if derived is not None:
            values["factor"] = max(derived, 1.0)
        return cls.from_params(values)

    def length_switch(self) -> tuple[tuple[int, ...], str] | None:
        if self.fixed_seq_len is not None or self.short_factor == self.long_factor:
            return None
        length = self.original_max_position_embeddings
        return (length,), f"it switches from short to long factors past L0 = {length:,} (by the current length)"

    def recompute_length(self, computed_for: int | None, seq_len: int) -> int | None:
        """Recompute when the length crosses L0 (short ↔ long factors), and on the first call."""
        if computed_for is not None and self.uses_long_factor(seq_len) == self.uses_long_factor(computed_for):
            return None
        return seq_len


@register_scaling(LongRopeScaling, aliases=("su",))
def longrope_frequencies(spec: LongRopeScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """inv_i = 1 / (f_i · b^(2i/d)) with f the long or short factors."""
    factors = np.asarray(spec.long_factor if spec.uses_long_factor(seq_len) else spec.short_factor)
    exponents = np.arange(0, rope.dim, 2, dtype=np.float64) / rope.dim
    return Frequencies(1.0 / (factors * rope.base**exponents), spec.resolved_attention_factor())


def _positive_factors(name: str, values: Any) -> tuple[float, ...]:
    """``values`` as a tuple of positive floats; an error is about ``name`` (the list), naming the item."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ArgumentType(name, values, "must be a sequence of positive numbers")
    try:
        return tuple(require_float(f"{name}[{i}]", v, above=0.0) for i, v in enumerate(values))
    except InvalidArgument as error:  # "short_factor[3] must be > 0.0": the list is the argument
        raise type(error)(name, values, allowed="positive numbers", message=str(error), leads=True) from None
