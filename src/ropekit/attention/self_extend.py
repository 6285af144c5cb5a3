"""Self-Extend (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning", arXiv 2401.01325).

Pairs closer than the neighbour window ``window`` (``i − j < window``) keep their exact relative position. Farther
pairs use grouped positions: the key at ``j // group``, the query at ``i // group + window − window // group``
(the paper's shift, so the grouped relative positions start where the neighbour ones stop), eq. 3–4 of the paper.

The authors' rule of thumb (README of datamllab/LongLM, section "How to choose the group_size and
neighbor_window"): the extended window is ``(L − window) · group + window`` for a model trained at ``L``; pick
``group`` and ``window`` so the input fits in it. For Llama-2 (``L = 4096``) they found group 2–64 and window
512–1536 reasonable, and note that a larger group with a smaller window also often works. :func:`suggest` keeps
the window at ``L / 4`` (inside that range, scaled to ``L``) and takes the smallest group that fits. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ropekit._validate import require_int
from ropekit.attention.registry import AttentionConfig, Region, band, far, positive_int, register

__all__ = ["SelfExtend", "extended_length", "suggest"]


def extended_length(train_length: int, group: int, window: int) -> int:
    """The longest input Self-Extend keeps inside trained positions: ``(L − window) · group + window``.

    Raises:
        ValueError: ``window >= train_length`` or a value below 1.
    """
    train_length = require_int("train_length", train_length, minimum=2)
    group = require_int("group", group, minimum=1)
    window = require_int("window", window, minimum=1)
    if window >= train_length:
        raise ValueError(f"window must be < train_length={train_length}, got {window}")
    return (train_length - window) * group + window


def suggest(train_length: int, target_length: int, *, window: int | None = None) -> dict[str, int]:
    """Group size and neighbour window for ``target_length`` by the authors' rule of thumb.

    Args:
        train_length: the model's pre-training length ``L``.
        target_length: the input length wanted.
        window: the neighbour window (default ``L // 4``: 1024 for Llama-2's 4096, inside the 512–1536 the
            authors found reasonable).

    Returns:
        ``{"group": G, "window": w, "extended_length": (L − w) · G + w}`` with the smallest ``G`` that covers the
        target.
    """
    train_length = require_int("train_length", train_length, minimum=2)
    target_length = require_int("target_length", target_length, minimum=1)
    window = max(1, train_length // 4) if window is None else require_int("window", window, minimum=1)
    extended_length(train_length, 1, window)  # validates window < L
    span = train_length - window
    group = max(1, -(-(target_length - window) // span))
    return {"group": group, "window": window, "extended_length": extended_length(train_length, group, window)}


@register
@dataclass(frozen=True, kw_only=True)
class SelfExtend(AttentionConfig):
    """Self-Extend: exact positions inside ``window``, floor-divided by ``group`` beyond.

    Attributes:
        group: the group size ``G`` (1 = plain attention).
        window: the neighbour window ``w``: pairs with ``i − j < w`` keep their exact relative position.
    """

    name = "self_extend"
    paper = "Jin et al. 2024, arXiv 2401.01325"
    group: int
    window: int

    def __post_init__(self) -> None:
        positive_int("group", self.group)
        positive_int("window", self.window)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        found = suggest(train_length, length)
        return {"group": found["group"], "window": found["window"]}

    def regions(self) -> tuple[Region, ...]:
        g, w = self.group, self.window
        shift = w - w // g
        return (
            band(w),
            Region("grouped", **far(w), q_position=lambda i: i // g + shift, k_position=lambda j: j // g),
        )

    def max_relative(self, length: int) -> float:
        last = length - 1
        if last < self.window:
            return float(last)
        return float(max(self.window - 1, last // self.group + self.window - self.window // self.group))
