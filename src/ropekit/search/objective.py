"""Needle-driven perplexity (LongRoPE2, arXiv 2502.20082, section 3.2): the mean loss on the answer tokens only
of needle samples at the target length, and the short-length term that keeps the model as it was at L0.

The samples are of several kinds (:mod:`ropekit.search.needles`: the passkey, RULER-style tasks, reworded
needles) of exactly the target length, on filler from ``--text``. Every answer depends on a token at least about
T/2 back: at T >= 2·L0, beyond anything the model saw in training. The search set and the held-out set are drawn
from two seed streams, of two disjoint lists of kinds, and share no sample (checked).

The short-length term: the change of the mean token loss on plain text windows of L0 tokens against the model
without scaling (what perplexity at 1x measures), beyond a tolerance on that total change, costs :data:`SHORT_OVER`
nats plus :data:`SHORT_WEIGHT` nats of needle loss per nat over: a candidate over the tolerance loses to any within
it, so the tolerance is a constraint. The floor, what longrope's attention factor alone costs there (every engine
derives it from s; no factor list of that s costs less), is inside the total: where it alone exceeds the tolerance
no candidate is within it, and the term ranks candidates by how far over they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ropekit._validate import require_int
from ropekit.scaling.longrope import LongRopeScaling
from ropekit.scaling.registry import ScalingConfig
from ropekit.search.needles import kind_sample

#: the seed streams of the sample sets (``default_rng([seed, stream, index])``): needles, then L0 windows
SEARCH_STREAM, HELDOUT_STREAM, SHORT_SEARCH_STREAM, SHORT_HELDOUT_STREAM = 1, 2, 3, 4
#: nats of needle loss per nat of 1x loss change (against the model without scaling) above the tolerance
SHORT_WEIGHT = 100.0
#: nats added to a candidate over the tolerance at all: more than any needle loss of a model that retrieves or not
#: (a few nats per answer token), so a candidate within the tolerance ranks before every one over it
SHORT_OVER = 100.0
#: how the short-length term counts, in every journal's header: a journal whose scores were counted another way
#: (the tolerance on top of the floor, other weights) is another search's and is not resumed
SHORT_RULE = {"tolerance": "total 1x change, the floor included", "over": SHORT_OVER, "weight": SHORT_WEIGHT}


@dataclass(frozen=True)
class NeedleSamples:
    """Equal-length needle samples with their answer lengths and kinds.

    Attributes:
        ids: ``(samples, length)`` int64; the last ``answer_lens[i]`` tokens of row i are its answer.
        answer_lens: answer tokens per sample.
        kinds: each sample's kind (:mod:`ropekit.search.needles`); empty where not known.
    """

    ids: torch.Tensor
    answer_lens: tuple[int, ...]
    kinds: tuple[str, ...] = ()

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


def needle_samples(
    filler: np.ndarray,
    length: int,
    count: int,
    *,
    seed: int,
    stream: int,
    encode: Callable[[bytes], np.ndarray],
    kinds: Sequence[str] = ("passkey",),
) -> NeedleSamples:
    """``count`` samples of exactly ``length`` tokens; sample i is of kind ``kinds[i % len(kinds)]`` (each kind as
    often as the count allows) and a function of (seed, stream, i)."""
    from ropekit.synthetic.base import Pieces

    require_int("samples", count, minimum=1)
    pieces = Pieces(encode)
    rows, answers, names = [], [], []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        ids, answer_len = kind_sample(
            kind, np.random.default_rng([seed, stream, index]), filler, length, encode=encode, pieces=pieces
        )
        rows.append(ids)
        answers.append(answer_len)
        names.append(kind)
    ids = torch.from_numpy(np.stack(rows))  # (samples, length)
    return NeedleSamples(ids, tuple(answers), tuple(names))


def disjoint(first: NeedleSamples, second: NeedleSamples) -> bool:
    """No sample of one set is a sample of the other."""
    rows = {bytes(row.numpy().tobytes()) for row in first.ids}
    return not any(bytes(row.numpy().tobytes()) in rows for row in second.ids)


def _answer_rows(model, samples: NeedleSamples, batch_size: int | None):
    """Per sample, in order: its answer tokens' losses ``(answer_len,)`` float64 and whether each is the argmax."""
    longest = max(samples.answer_lens)
    size = batch_size or len(samples.answer_lens)
    for start in range(0, len(samples.answer_lens), size):
        ids = samples.ids[start : start + size]  # (batch, T)
        with torch.no_grad():
            hidden = model.hidden_states(ids[:, :-1])[:, -longest:]  # (batch, longest, d_model): answer predictions
            logits = model.output_logits(hidden).float()  # (batch, longest, vocab)
        targets = ids[:, -longest:].to(logits.device)  # (batch, longest)
        nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").double().cpu()  # (batch, longest)
        hits = (logits.argmax(-1) == targets).cpu()  # (batch, longest)
        for row, answer_len in enumerate(samples.answer_lens[start : start + size]):
            yield nll[row, longest - answer_len :], hits[row, longest - answer_len :]


def answer_losses(model, samples: NeedleSamples, *, batch_size: int | None = None) -> torch.Tensor:
    """Per answer token, its loss: ``-log p(answer token | everything before it)``.

    The body runs once per batch (``batch_size`` rows; ``None``: all at once); logits exist only for the answer
    positions.

    Args:
        model: an :class:`~ropekit.eval.protocol.EvalModel` with ``hidden_states``/``output_logits`` (both
            implementations have them).

    Shapes:
        samples.ids ``(n, T)`` → ``(sum(answer_lens),)`` float64, row by row.
    """
    return torch.cat([nll for nll, _ in _answer_rows(model, samples, batch_size)])


def sample_scores(model, samples: NeedleSamples, *, batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: its mean answer-token loss (nats) and whether greedy decoding gives its whole answer (every
    answer token the argmax after the right prefix: teacher-forced, which is equivalent).

    Shapes:
        samples.ids ``(n, T)`` → ``(n,)`` float64 and ``(n,)`` bool.
    """
    rows = list(_answer_rows(model, samples, batch_size))
    losses = np.array([float(nll.mean()) for nll, _ in rows], dtype=np.float64)
    return losses, np.array([bool(hits.all()) for _, hits in rows])


def needle_loss(
    model, samples: NeedleSamples, scaling: ScalingConfig | None, *, batch_size: int | None = None
) -> float:
    """The needle-driven objective: the mean over samples of each one's mean answer-token loss (nats) with
    ``scaling`` on ``model`` (every sample, and so every kind, weighs the same whatever its answer's length).

    Raises:
        ValueError: a non-finite loss (the scaling breaks the model).
    """
    model.set_scaling(scaling)
    value = float(sample_scores(model, samples, batch_size=batch_size)[0].mean())
    if not np.isfinite(value):
        raise ValueError(f"the needle loss is {value} with {scaling}")
    return value


@dataclass(frozen=True)
class ShortWindows:
    """Plain-text windows of L0 tokens and the source model's loss on each (the 1x baseline).

    Attributes:
        ids: ``(windows, L0)`` int64 slices of the filler text.
        plain: ``(windows,)`` each window's mean token loss (nats) without scaling.
        floor: the mean change (nats) of longrope's attention factor alone (every factor 1), which every engine
            derives from s: no factor list of that s costs less here.
        batch_size: windows per forward (``None``: all).
    """

    ids: torch.Tensor
    plain: np.ndarray
    floor: float = 0.0
    batch_size: int | None = None


def window_losses(model, ids: torch.Tensor, *, batch_size: int | None = None) -> np.ndarray:
    """Each window's mean token loss (nats): the body once per batch of ``batch_size`` windows (``None``: all), the
    logits a chunk of positions at a time per window, as :meth:`~ropekit.eval.models.HeadScoring.token_losses` forms
    them.

    Shapes:
        ids ``(windows, L)`` → ``(windows,)`` float64.
    """
    from ropekit.integrations.hf.output_head import EVAL_CHUNK_BYTES, chunk_positions, chunked_cross_entropy

    chunk = getattr(model, "chunk", None) or chunk_positions(model.vocab_size, EVAL_CHUNK_BYTES)
    size, losses = batch_size or len(ids), []
    for start in range(0, len(ids), size):
        rows = ids[start : start + size]  # (batch, L)
        with torch.no_grad():
            hidden = model.hidden_states(rows[:, :-1])  # (batch, L - 1, d_model)
            for row, states in zip(rows, hidden, strict=True):
                targets = row[1:].to(states.device)
                losses.append(float(chunked_cross_entropy(model.output_logits, states, targets, chunk=chunk).mean()))
    return np.array(losses, dtype=np.float64)


def short_windows(
    model,
    filler: np.ndarray,
    length: int,
    count: int,
    *,
    seed: int,
    stream: int,
    factor: float,
    batch_size: int | None = None,
) -> ShortWindows:
    """``count`` windows of ``length`` (= L0) tokens at offsets drawn from (seed, stream, i), with the source model's
    loss on each and the floor of s = ``factor`` (:class:`ShortWindows`)."""
    require_int("samples", count, minimum=1)
    rows = []
    for index in range(count):
        start = int(np.random.default_rng([seed, stream, index]).integers(0, len(filler) - length))
        rows.append(np.asarray(filler[start : start + length], dtype=np.int64))
    ids = torch.from_numpy(np.stack(rows))  # (windows, length)
    model.set_scaling(None)
    windows = ShortWindows(ids, window_losses(model, ids, batch_size=batch_size), batch_size=batch_size)
    ones = longrope_of([1.0] * (model.rope.dim // 2), original_length=length, factor=factor)
    floor = float(short_change(model, windows, ones).mean())
    return ShortWindows(ids, windows.plain, floor, batch_size)


def short_change(model, windows: ShortWindows, scaling: ScalingConfig | None) -> np.ndarray:
    """Per window, the mean token loss with ``scaling`` minus the source's (nats; ``exp`` of the mean minus 1 is
    the 1x perplexity change)."""
    model.set_scaling(scaling)
    return window_losses(model, windows.ids, batch_size=windows.batch_size) - windows.plain


def short_term(change: float, tolerance: float) -> float:
    """0 within the tolerance (the 1x perplexity change against the model without scaling, the attention factor's
    floor included, at most ``tolerance`` in all); over it, :data:`SHORT_OVER` plus :data:`SHORT_WEIGHT` × the 1x
    loss change (nats) above ``ln(1 + tolerance)``: every candidate within ranks first, and those over rank by their
    needle loss plus the weighted excess."""
    excess = change - math.log1p(tolerance)
    return SHORT_OVER + SHORT_WEIGHT * excess if excess > 0 else 0.0


def floor_exceeds(floor: float, tolerance: float) -> bool:
    """Whether the attention factor alone (``floor``, nats) costs more than ``tolerance`` at 1x: then no longrope
    factor list of that s is within it, and the search minimises the excess."""
    return floor > math.log1p(tolerance)


def longrope_of(factors: list[float], *, original_length: int, factor: float, switch: bool = False) -> LongRopeScaling:
    """The searched factors as ropekit's ``longrope`` scaling: ``long_factor`` = ``factors``; ``short_factor`` the
    same (every engine computes the same at every length) or, with ``switch``, all ones (plain RoPE up to L0, the
    factors past it, by each engine's own rule). The attention factor is longrope's own, √(1 + ln s / ln L0)."""
    short = [1.0] * len(factors) if switch else list(factors)
    return LongRopeScaling(
        short_factor=tuple(short),
        long_factor=tuple(factors),
        original_max_position_embeddings=original_length,
        factor=factor,
    )
