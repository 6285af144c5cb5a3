"""Perplexity against length, split into positions inside and beyond the training length.

Two modes, as in the literature:

* ``nonoverlap`` (PI, arXiv 2306.15595): consecutive windows of ``length`` tokens, every token scored with
  the context available inside its window.
* ``sliding`` (YaRN, arXiv 2309.00071, stride 256): windows of ``length`` advanced by ``stride``; only the
  last ``stride`` tokens of each window are scored (all tokens of the first), so each scored token sees
  at least ``length - stride`` tokens of context. A stride of ``length`` or more is the non-overlapping mode
  (the stride is capped at ``length``, so no token between windows goes unscored).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from ropekit._validate import require_choice, require_int
from ropekit.eval.protocol import EvalModel, LogitsFunction

MODES = ("nonoverlap", "sliding")


@dataclass(frozen=True)
class PerplexityPoint:
    """Perplexity at one length. ``inside``/``beyond``: tokens at window positions < or >= train_length.

    ``tokens = inside_tokens + beyond_tokens`` counts the scored tokens; ``beyond`` is ``None`` when no scored
    token lies beyond the training length.
    """

    length: int
    perplexity: float
    inside: float
    beyond: float | None
    tokens: int
    inside_tokens: int
    beyond_tokens: int

    def to_dict(self) -> dict:
        return asdict(self)


def _ppl(total: float, count: int) -> float | None:
    return math.exp(total / count) if count else None


def _require_finite(losses: torch.Tensor, length: int, start: int) -> None:
    """A NaN or infinite loss would make the perplexity NaN or inf: refuse it instead of reporting it."""
    bad = ~torch.isfinite(losses)
    if bool(bad.any()):
        first = int(bad.nonzero()[0, 0])
        raise RuntimeError(
            f"the model gave non-finite losses (NaN or inf) for {int(bad.sum())} of {len(losses)} tokens at length "
            f"{length} (window starting at token {start}, first at position {first + 1}); the model overflowed "
            "(e.g. fp16 or bf16 activations): no perplexity is reported; try float32"
        )


def full_logits_losses(logits_fn, ids: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood of ``ids[1:]`` given the prefix from full logits: ``(len(ids) - 1,)`` float64.

    For a short input or a synthetic model; an :class:`ropekit.eval.protocol.EvalModel` scores in chunks of positions
    instead (its ``token_losses``), never holding ``(seq × vocab)`` logits.
    """
    logits = logits_fn(ids[None, :-1])[0].float()  # (seq, vocab)
    return F.cross_entropy(logits, ids[1:], reduction="none").double()


def losses_function(model: EvalModel | LogitsFunction) -> Callable[[torch.Tensor], torch.Tensor]:
    """``ids (seq,) → (seq - 1,)`` float64 losses: an evaluation model's chunked ``token_losses``, or full logits
    from a plain ``(batch, seq) → (batch, seq, vocab)`` callable."""
    if isinstance(model, EvalModel):
        return model.token_losses
    return lambda ids: full_logits_losses(model, ids)


def perplexity_windows(length: int, text_tokens: int, settings) -> int:
    """How many windows :func:`perplexity_at` runs at ``length`` on ``text_tokens`` tokens with ``settings``'
    ``mode``, ``stride`` and ``max_tokens``."""
    if text_tokens < length + 1:
        return 0
    step = length if settings.mode == "nonoverlap" else min(settings.stride, length)
    available = (text_tokens - length - 1) // step + 1
    scored_first = length
    scored_next = step if settings.mode == "sliding" else length
    if settings.max_tokens <= scored_first:
        return 1
    return min(available, 1 + -(-(settings.max_tokens - scored_first) // scored_next))


def perplexity_at(
    model: EvalModel | LogitsFunction,
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
        model: an :class:`ropekit.eval.protocol.EvalModel` (scored in chunks of positions), or a callable
            ``(1, seq)`` ids → ``(1, seq, vocab)`` logits.
        data: evaluation token ids.
        length: window length (tokens of context).
        train_length: boundary for the inside/beyond split.
        mode: ``nonoverlap`` or ``sliding``.
        stride: sliding-window stride (capped at ``length``).
        max_tokens: start no new window once this many tokens are scored (keeps the run time bounded).

    Raises:
        ValueError: an argument is out of range, or ``data`` is shorter than one window.
        RuntimeError: the model gave a NaN or infinite loss (a non-finite perplexity is never reported).
    """
    require_int("length", length, minimum=2)
    require_int("train_length", train_length, minimum=1)
    require_int("max_tokens", max_tokens, minimum=1)
    require_choice("mode", mode, MODES)
    if len(data) < length + 1:
        raise ValueError(f"evaluation text has {len(data)} tokens; length {length} needs at least {length + 1}")
    sums = {"inside": 0.0, "beyond": 0.0}
    counts = {"inside": 0, "beyond": 0}
    losses_of = losses_function(model)
    step = length if mode == "nonoverlap" else min(require_int("stride", stride, minimum=1), length)
    start = 0
    while start + length + 1 <= len(data) and counts["inside"] + counts["beyond"] < max_tokens:
        window = data[start : start + length + 1]
        losses = losses_of(window)  # (length,)
        _require_finite(losses, length, start)
        positions = torch.arange(length)  # position of the predicting token within the window
        scored = torch.ones(length, dtype=torch.bool)
        if mode == "sliding" and start > 0:
            scored = positions >= length - step
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
        inside_tokens=counts["inside"],
        beyond_tokens=counts["beyond"],
    )
