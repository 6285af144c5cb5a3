"""RopeConfig: the one description of a model's rotary embedding (numpy-free, torch-free)."""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from ropekit._validate import require_float, require_int, require_rotary_dim

if TYPE_CHECKING:
    from ropekit.scaling.registry import ScalingConfig


@dataclass(frozen=True)
class RopeConfig:
    """How a model rotates its queries and keys.

    Args:
        head_dim: size of one attention head.
        base: the RoPE constant b (10000 in RoFormer, arXiv 2104.09864); must be finite and > 1.
        rotary_dim: how many leading dims of each head rotate (even, <= head_dim); ``None`` means all.
        interleaved: ``True`` pairs dims (0,1),(2,3),… (Meta, GPT-J); ``False`` pairs (i, i + rotary_dim/2)
            (GPT-NeoX, Hugging Face ``rotate_half``).
        scaling: a context-extension method from :mod:`ropekit.scaling`, or ``None`` for plain RoPE.

    transformers dicts: :func:`ropekit.hf_format.to_hf_dict` and :func:`ropekit.from_hf_config`.

    Example:
        >>> RopeConfig(128, base=500000.0).dim
        128
    """

    head_dim: int
    _: KW_ONLY
    base: float = 10000.0
    rotary_dim: int | None = None
    interleaved: bool = False
    scaling: ScalingConfig | None = None

    def __post_init__(self) -> None:
        # Store plain Python numbers (numpy scalars would leak into HF dicts and JSON).
        object.__setattr__(self, "head_dim", require_int("head_dim", self.head_dim, minimum=1))
        object.__setattr__(self, "base", require_float("base", self.base, above=1.0))
        if self.rotary_dim is not None:
            rotary_dim = require_rotary_dim("rotary_dim", self.rotary_dim, head_dim=self.head_dim)
            object.__setattr__(self, "rotary_dim", rotary_dim)
        else:
            require_rotary_dim("rotary_dim", self.head_dim, minimum=1, note=" (from head_dim)")
        if not isinstance(self.interleaved, bool):
            raise TypeError(f"interleaved must be a bool, got {self.interleaved!r}")
        if self.scaling is not None:
            from ropekit.scaling.registry import ScalingConfig

            if not isinstance(self.scaling, ScalingConfig):
                raise TypeError(
                    "scaling must be a config from ropekit.scaling (e.g. YarnScaling(...)) or None, "
                    f"got {self.scaling!r}"
                )
            self.scaling.check_rope(self)

    @property
    def dim(self) -> int:
        """The rotary dimension d: ``rotary_dim`` if set, else ``head_dim``."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    @property
    def rope_type(self) -> str:
        """The Hugging Face ``rope_type`` name of the scaling method (``"default"`` without one)."""
        return "default" if self.scaling is None else self.scaling.rope_type

    def replace(self, **changes: Any) -> RopeConfig:
        """Return a copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)
