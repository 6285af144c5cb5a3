"""RopeConfig: the one description of a model's rotary embedding (plain Python values: no numpy or torch types)."""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ropekit._validate import require_choice, require_float, require_int, require_rotary_dim
from ropekit.scaling.base import ScalingConfig

#: how M-RoPE spreads its sections over the pairs: ``blocked`` (Qwen2-VL, Qwen2.5-VL: pairs ``0 … t−1`` read the
#: time position, the next ``h`` pairs the height, the last ``w`` the width) or ``interleaved`` (Qwen3-VL: pair ``p``
#: reads height when ``p % 3 == 1`` and ``p < 3h``, width when ``p % 3 == 2`` and ``p < 3w``, time otherwise)
MROPE_LAYOUTS = ("blocked", "interleaved")


@dataclass(frozen=True)
class MRope:
    """Multimodal RoPE (Qwen2-VL, arXiv 2409.12191): 3-D positions (time, height, width), one axis per pair.

    Args:
        sections: pairs per axis, ``(t, h, w)`` (transformers' ``mrope_section``); they sum to ``rotary_dim // 2``.
        layout: ``"blocked"`` or ``"interleaved"`` (:data:`MROPE_LAYOUTS`). Not the pair layout of
            :attr:`RopeConfig.interleaved`: that says which dims form a pair, this says which position a pair reads.

    A text token has ``t = h = w = p``, so every pair reads ``p`` and M-RoPE is plain RoPE; image and video tokens
    differ, and only there does the layout matter.

    Example:
        >>> MRope((16, 24, 24)).axis_of_pairs()[14:18]
        [0, 0, 1, 1]
    """

    sections: tuple[int, ...]
    _: KW_ONLY
    layout: str = "blocked"

    def __post_init__(self) -> None:
        if isinstance(self.sections, str | bytes) or not hasattr(self.sections, "__iter__"):
            raise TypeError(f"sections must be a sequence of integers such as (16, 24, 24), got {self.sections!r}")
        sections = tuple(require_int("sections", s, minimum=0) for s in self.sections)
        if len(sections) != 3 or sum(sections) < 1:
            raise ValueError(f"sections must be three pair counts (t, h, w) with a positive sum, got {self.sections!r}")
        object.__setattr__(self, "sections", sections)
        require_choice("layout", self.layout, MROPE_LAYOUTS)

    @property
    def pairs(self) -> int:
        """The number of rotating pairs the sections cover (``rotary_dim // 2``)."""
        return sum(self.sections)

    def axis_of_pairs(self) -> list[int]:
        """Per pair, the position axis it reads: 0 time, 1 height, 2 width (transformers' recomposition)."""
        if self.layout == "blocked":  # torch.cat([m[i % 3] for i, m in enumerate(freq.split(sections))])
            return [axis for axis, count in enumerate(self.sections) for _ in range(count)]
        axes = [0] * self.pairs  # Qwen3-VL: freqs_t[..., offset : 3 * section : 3] = freqs_axis[...]
        for axis in (1, 2):
            for pair in range(axis, min(3 * self.sections[axis], self.pairs), 3):
                axes[pair] = axis
        return axes


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
        mrope: 3-D positions for multimodal models (:class:`MRope`), or ``None`` for 1-D positions. Its sections
            must cover ``rotary_dim // 2`` pairs; length-following scalings (``dynamic``, ``longrope``) are refused
            with it (see :mod:`ropekit.mrope`).

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
    mrope: MRope | None = None

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
            if not isinstance(self.scaling, ScalingConfig):
                raise TypeError(
                    "scaling must be a config from ropekit.scaling (e.g. YarnScaling(...)) or None, "
                    f"got {self.scaling!r}"
                )
            self.scaling.check_rope(self)
        if self.mrope is not None:
            self._check_mrope()

    def _check_mrope(self) -> None:
        if not isinstance(self.mrope, MRope):
            raise TypeError(f"mrope must be an MRope (e.g. MRope((16, 24, 24))) or None, got {self.mrope!r}")
        if self.mrope.pairs != self.dim // 2:
            raise ValueError(
                f"mrope sections {self.mrope.sections} cover {self.mrope.pairs} pairs, but rotary_dim {self.dim} has "
                f"{self.dim // 2}; they must be equal"
            )
        if self.scaling is not None and self.scaling.depends_on_seq_len:
            raise ValueError(
                f"scaling {self.scaling.rope_type!r} follows the sequence length, which is not defined for 3-D "
                "M-RoPE positions (transformers takes max over all three axes); use a static method (linear, yarn, "
                "llama3, ntk, ...) with mrope"
            )

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
