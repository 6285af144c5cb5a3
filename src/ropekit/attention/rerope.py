"""ReRoPE and leaky ReRoPE (Su 2023, "Rectified Rotary Position Embeddings", https://kexue.fm/archives/9708).

ReRoPE keeps the relative position ``i − j`` inside a window ``w`` and clips it to ``w`` beyond:
``r = min(i − j, w)``. Leaky ReRoPE slows it by ``1/k`` beyond the window instead: ``r = w + (i − j − w) / k``
for ``i − j >= w`` (``k → ∞`` is ReRoPE). Both need two sets of scores — one with the usual rotation and one with
the clipped (or slowed) one — which the original computes as two full ``(seq × seq)`` matrices; here the
neighbour scores cover only the band of ``w`` keys behind each query and both are computed a block of queries at
a time (memory linear in the sequence).

Leaky positions are fractional: the query of the far region is rotated at ``w + (i − w) / k`` and the key at
``j / k`` (float64 angles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ropekit.attention.registry import AttentionConfig, Region, band, far, positive_float, positive_int, register

__all__ = ["LeakyReRoPE", "ReRoPE"]


@register
@dataclass(frozen=True, kw_only=True)
class ReRoPE(AttentionConfig):
    """ReRoPE: relative position ``min(i − j, window)``.

    Attributes:
        window: ``w``; relative positions at or beyond it are all ``w``.
    """

    name = "rerope"
    paper = "Su 2023, https://kexue.fm/archives/9708"
    window: int

    def __post_init__(self) -> None:
        positive_int("window", self.window)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        return {"window": max(1, train_length // 2)}

    def regions(self) -> tuple[Region, ...]:
        w = self.window
        return (band(w), Region("clipped", **far(w), q_position=lambda i: i * 0 + w, k_position=lambda j: j * 0))

    def max_relative(self, length: int) -> float:
        return float(min(length - 1, self.window))


@register
@dataclass(frozen=True, kw_only=True)
class LeakyReRoPE(AttentionConfig):
    """Leaky ReRoPE: relative position ``i − j`` inside ``window``, ``window + (i − j − window) / k`` beyond.

    Attributes:
        window: ``w``.
        k: the slow-down beyond the window (>= 1; 1 is plain attention). Default: the smallest ``k`` that keeps
            every relative position of the evaluated length below the training length.
    """

    name = "leaky_rerope"
    paper = "Su 2023, https://kexue.fm/archives/9708"
    window: int
    k: float

    def __post_init__(self) -> None:
        positive_int("window", self.window)
        positive_float("k", self.k)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        window = max(1, train_length // 2)
        room = train_length - 1 - window
        return {"window": window, "k": max(1.0, (length - 1 - window) / room) if room > 0 else 1.0}

    def regions(self) -> tuple[Region, ...]:
        w, k = self.window, self.k
        return (band(w), Region("slowed", **far(w), q_position=lambda i: (i - w) / k + w, k_position=lambda j: j / k))

    def max_relative(self, length: int) -> float:
        last = length - 1
        return float(last if last < self.window else self.window + (last - self.window) / self.k)
