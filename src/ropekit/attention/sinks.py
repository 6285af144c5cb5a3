"""StreamingLLM attention sinks (Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks",
arXiv 2309.17453).

Each query attends to the first ``n_sink`` tokens and to the ``window`` most recent tokens (itself included),
nothing in between. Positions are those of the rolling cache (the paper, section 3.2: "positions within the cache
rather than in the original text"): the window keeps its true relative positions, and the query sits at cache
position ``min(i, n_sink + window − 1)`` when it attends to a sink ``s`` (relative position
``min(i, n_sink + window − 1) − s``). It does not extend the window; it is the streaming baseline. Here the cache
is not evicted (the mask gives the same attention), so KV-cached decoding gives the full forward's logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ropekit._validate import require_int
from ropekit.attention.registry import AttentionConfig, Region, band, positive_int, register

__all__ = ["Sinks"]


@register
@dataclass(frozen=True, kw_only=True)
class Sinks(AttentionConfig):
    """Attention sinks plus a rolling window.

    Attributes:
        n_sink: how many first tokens every query keeps (>= 0; 4 in the paper).
        window: how many recent tokens (the query included) every query keeps (>= 1).
    """

    name = "sinks"
    paper = "Xiao et al. 2023, arXiv 2309.17453"
    n_sink: int
    window: int

    def __post_init__(self) -> None:
        require_int("n_sink", self.n_sink, minimum=0)
        positive_int("window", self.window)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        n_sink = min(4, train_length // 2)
        return {"n_sink": n_sink, "window": max(1, train_length - n_sink)}

    def regions(self) -> tuple[Region, ...]:
        n, w = self.n_sink, self.window
        top = n + w - 1
        return (
            band(w),
            Region(
                "sink",
                lambda i, j: (j < n) & (i - j >= w),
                lambda first, last: (0, min(n, max(0, last - w + 1))),
                q_position=lambda i: i.clamp(max=top),
                full=lambda first, last: (0, min(n, max(0, first - w + 1))),
            ),
        )

    def max_relative(self, length: int) -> float:
        return float(min(length - 1, self.n_sink + self.window - 1))
