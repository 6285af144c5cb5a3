"""Published values of the base bound for d = 128, to set beside ropekit's exact ones (numpy only).

Both tables give, for context lengths L = 2**10 … 2**20, a base b meant to be the smallest with B_m(b) >= 0 for
every m < L (Men et al., arXiv 2405.14591, eq. 8), rounded to two significant digits:

* :data:`PAPER_BOUND`: Men et al., "Base of RoPE Bounds Context Length", Table 1 (fit y = 0.0424·x^1.628).
* :data:`SU_BOUND`: Su Jianlin's independent brute-force search (kexue.fm/archives/10122).

Because the feasible bases are fragmented into narrow islands, a rounded value can miss its own condition:
:func:`face_value_check` says, for a published base, where B_m first goes negative.
"""

from __future__ import annotations

from dataclasses import dataclass

from ropekit.theory.bound import max_context_length

#: rotary dim of both published tables.
PUBLISHED_ROTARY_DIM = 128

#: Men et al., Table 1: context length -> base.
PAPER_BOUND: dict[int, float] = {
    2**10: 4.3e3,
    2**11: 1.6e4,
    2**12: 2.7e4,
    2**13: 8.4e4,
    2**14: 3.1e5,
    2**15: 6.4e5,
    2**16: 2.1e6,
    2**17: 7.8e6,
    2**18: 3.6e7,
    2**19: 6.4e7,
    2**20: 5.1e8,
}

#: Su Jianlin, kexue.fm/archives/10122: context length -> base.
SU_BOUND: dict[int, float] = {
    2**10: 4.3e3,
    2**11: 1.2e4,
    2**12: 2.7e4,
    2**13: 8.4e4,
    2**14: 2.3e5,
    2**15: 6.3e5,
    2**16: 2.1e6,
    2**17: 4.9e6,
    2**18: 2.4e7,
    2**19: 5.8e7,
    2**20: 6.5e7,
}


@dataclass(frozen=True)
class FaceValue:
    """Whether a published base satisfies its own condition as printed.

    Attributes:
        context_length: L of the table entry.
        base: the published base.
        first_negative: the first m < L with B_m(base) < 0, or ``None`` when there is none.
    """

    context_length: int
    base: float
    first_negative: int | None

    @property
    def satisfied(self) -> bool:
        """True when B_m(base) >= 0 for every m < L."""
        return self.first_negative is None


def face_value_check(context_length: int, base: float, rotary_dim: int = PUBLISHED_ROTARY_DIM) -> FaceValue:
    """Check every m < L for a published base (exact: :func:`~ropekit.theory.bound.max_context_length`).

    Example:
        >>> face_value_check(2**20, PAPER_BOUND[2**20]).first_negative
        874868
    """
    return FaceValue(context_length, base, max_context_length(base, rotary_dim, limit=context_length))
