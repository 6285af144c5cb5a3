"""Dual Chunk Attention (An et al. 2024, "Training-Free Long-Context Scaling of Large Language Models", ChunkLlama,
arXiv 2402.17463), section 3.

The sequence is cut into chunks of ``chunk_size`` tokens ``s``; every key sits at its position inside its chunk,
``j mod s``. The query's position depends on where the key is:

- intra-chunk (same chunk): ``i mod s``, so the relative position is the true ``i − j``;
- successive chunk (the key's chunk is just before the query's): ``min(s + i mod s, s + w − 1)``: the true
  distance for the first ``w`` tokens of a chunk (locality kept across the boundary), then held;
- inter-chunk (two or more chunks back): ``s + w − 1``, the largest position used.

``w`` is the local window; the largest relative position is ``s + w − 1``, which must stay below the training
length (the paper's ``c − 1`` with ``c = s + w``; ChunkLlama's code clamps at ``c`` instead, one more). Defaults
follow ChunkLlama's code for a model trained at ``L``: ``s + w = 3L/4`` and ``w = L/16``.

Qwen's ``dual_chunk_attention_config`` (vLLM, SGLang) clamps at its ``chunk_size``, so its ``(chunk_size,
local_size)`` is this method's ``(s + w − 1, w − 1)``; it may add a length temperature this method does not apply.
The mapping and its limits: :mod:`ropekit.integrations.hf.dual_chunk_config`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ropekit.attention.registry import AttentionConfig, Region, positive_int, register

__all__ = ["DualChunk"]


@register
@dataclass(frozen=True, kw_only=True)
class DualChunk(AttentionConfig):
    """Dual Chunk Attention.

    Attributes:
        chunk_size: ``s``, tokens per chunk.
        local_window: ``w``, how far the successive-chunk positions follow the true distance.
    """

    name = "dual_chunk"
    paper = "An et al. 2024, arXiv 2402.17463"
    chunk_size: int
    local_window: int

    def __post_init__(self) -> None:
        positive_int("chunk_size", self.chunk_size)
        positive_int("local_window", self.local_window)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        window = max(1, train_length // 16)
        return {"chunk_size": max(1, train_length * 3 // 4 - window), "local_window": window}

    def regions(self) -> tuple[Region, ...]:
        s, w = self.chunk_size, self.local_window
        top = s + w - 1

        def first_of_chunk(index: int, back: int) -> int:
            return max(0, (index // s - back) * s)

        def one_chunk(first: int, last: int, span: tuple[int, int]) -> tuple[int, int]:
            return span if first // s == last // s else (0, 0)

        return (
            Region(
                "intra",
                lambda i, j: i // s == j // s,
                lambda first, last: (first_of_chunk(first, 0), last + 1),
                q_position=lambda i: i % s,
                k_position=lambda j: j % s,
                full=lambda first, last: one_chunk(first, last, (first_of_chunk(last, 0), first + 1)),
            ),
            Region(
                "successive",
                lambda i, j: i // s - j // s == 1,
                lambda first, last: (first_of_chunk(first, 1), first_of_chunk(last, 0)),
                q_position=lambda i: (i % s + s).clamp(max=top),
                k_position=lambda j: j % s,
                full=lambda first, last: (
                    one_chunk(first, last, (first_of_chunk(first, 1), first_of_chunk(first, 0)))
                    if first >= s
                    else (0, 0)
                ),
            ),
            Region(
                "inter",
                lambda i, j: i // s - j // s >= 2,
                lambda first, last: (0, first_of_chunk(last, 1)),
                q_position=lambda i: i * 0 + top,
                k_position=lambda j: j % s,
                full=lambda first, last: (0, first_of_chunk(first, 1)) if first >= 2 * s else (0, 0),
            ),
        )

    def max_relative(self, length: int) -> float:
        return float(min(length - 1, self.chunk_size + self.local_window - 1))
