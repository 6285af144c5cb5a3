"""Perplexity against length, split into positions inside and beyond the training length.

Two modes, as in the literature:

* ``nonoverlap`` (PI, arXiv 2306.15595): consecutive windows of ``length`` tokens, every token scored with
  the context available inside its window.
* ``sliding`` (YaRN, arXiv 2309.00071, stride 256): windows of ``length`` advanced by ``stride``; only the
  last ``stride`` tokens of each window are scored (all tokens of the first), so each scored token sees
  at least ``length - stride`` tokens of context.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from ropekit._validate import require_choice, require_int

MODES = ("nonoverlap", "sliding")


@dataclass(frozen=True)
class PerplexityPoint:
    """Perplexity at one length. ``inside``/``beyond``: tokens at window positions < or >= train_length."""

    length: int
    perplexity: float
    inside: float
    beyond: float | None
    tokens: int

    def to_dict(self) -> dict:
        return asdict(self)


def _ppl(total: float, count: int) -> float | None:
    return math.exp(total / count) if count else None


def token_losses(logits_fn, ids: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood of ``ids[1:]`` given the prefix: ``(len(ids) - 1,)`` float64."""
    logits = logits_fn(ids[None, :-1])[0].float()  # (seq, vocab)
    return F.cross_entropy(logits, ids[1:], reduction="none").double()


def perplexity_at(
    logits_fn,
    data: torch.Tensor,
    length: int,
    train_length: int,
    *,
    mode: str = "nonoverlap",
    stride: int = 256,
    max_tokens: int = 32768,
) -> PerplexityPoint:
    """Perplexity of ``data`` (1-D ids) at context ``length``.

    Args:
        logits_fn: ``(1, seq)`` ids → ``(1, seq, vocab)`` logits.
        data: evaluation token ids.
        length: window length (tokens of context).
        train_length: boundary for the inside/beyond split.
        mode: ``nonoverlap`` or ``sliding``.
        stride: sliding-window stride.
        max_tokens: stop after scoring this many tokens (keeps the run time bounded).
    """
    require_int("length", length, minimum=2)
    require_choice("mode", mode, MODES)
    if len(data) < length + 1:
        raise ValueError(f"evaluation text has {len(data)} tokens; length {length} needs at least {length + 1}")
    sums = {"inside": 0.0, "beyond": 0.0}
    counts = {"inside": 0, "beyond": 0}
    step = length if mode == "nonoverlap" else require_int("stride", stride, minimum=1)
    start = 0
    while start + length + 1 <= len(data) and counts["inside"] + counts["beyond"] < max_tokens:
        window = data[start : start + length + 1]
        losses = token_losses(logits_fn, window)  # (length,)
        positions = torch.arange(length)  # position of the predicting token within the window
        scored = torch.ones(length, dtype=torch.bool)
        if mode == "sliding" and start > 0:
            scored = positions >= length - stride
        inside = scored & (positions < train_length)
        beyond = scored & (positions >= train_length)
        sums["inside"] += float(losses[inside].sum())
        sums["beyond"] += float(losses[beyond].sum())
        counts["inside"] += int(inside.sum())
        counts["beyond"] += int(beyond.sum())
        start += step
    total = counts["inside"] + counts["beyond"]
    return PerplexityPoint(
        length=length,
        perplexity=_ppl(sums["inside"] + sums["beyond"], total),
        inside=_ppl(sums["inside"], counts["inside"]),
        beyond=_ppl(sums["beyond"], counts["beyond"]),
        tokens=total,
    )
