"""Needle-driven perplexity (LongRoPE2, arXiv 2502.20082, section 3.2): the mean loss on the answer tokens only of
needle samples at the target length.

The samples are ropekit's passkey episodes (:func:`ropekit.synthetic.passkey.passkey_episode`) of exactly the target
length, on filler from ``--text``. The needle is placed in the first half of the filler, so every answer token
depends on a token at least about T/2 back: at T >= 2·L0, beyond anything the model saw in training. The search set
and the held-out set are drawn from two different seed streams and share no sample (checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ropekit._validate import require_int
from ropekit.scaling.longrope import LongRopeScaling
from ropekit.scaling.registry import ScalingConfig
from ropekit.synthetic.passkey import passkey_episode

#: the needle's depth is drawn uniformly from [0, MAX_DEPTH] (a fraction of the filler)
MAX_DEPTH = 0.5
#: the seed streams of the two sample sets (``default_rng([seed, stream, index])``)
SEARCH_STREAM, HELDOUT_STREAM = 1, 2


@dataclass(frozen=True)
class NeedleSamples:
    """Equal-length needle samples with their answer lengths.

    Attributes:
        ids: ``(samples, length)`` int64; the last ``answer_lens[i]`` tokens of row i are its answer.
        answer_lens: answer tokens per sample.
    """

    ids: torch.Tensor
    answer_lens: tuple[int, ...]

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


def needle_samples(
    filler: np.ndarray, length: int, count: int, *, seed: int, stream: int, encode: Callable[[bytes], np.ndarray]
) -> NeedleSamples:
    """``count`` passkey samples of exactly ``length`` tokens; sample i is a function of (seed, stream, i)."""
    require_int("samples", count, minimum=1)
    episodes = []
    for index in range(count):
        rng = np.random.default_rng([seed, stream, index])
        depth = float(rng.uniform(0.0, MAX_DEPTH))
        episodes.append(passkey_episode(rng, filler, length, depth, encode=encode))
    ids = torch.from_numpy(np.stack([e.ids for e in episodes]))  # (samples, length)
    return NeedleSamples(ids, tuple(e.answer_len for e in episodes))


def disjoint(first: NeedleSamples, second: NeedleSamples) -> bool:
    """No sample of one set is a sample of the other."""
    rows = {bytes(row.numpy().tobytes()) for row in first.ids}
    return not any(bytes(row.numpy().tobytes()) in rows for row in second.ids)


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
    longest = max(samples.answer_lens)
    size = batch_size or len(samples.answer_lens)
    losses = []
    for start in range(0, len(samples.answer_lens), size):
        ids = samples.ids[start : start + size]  # (batch, T)
        with torch.no_grad():
            hidden = model.hidden_states(ids[:, :-1])[:, -longest:]  # (batch, longest, d_model): answer predictions
            logits = model.output_logits(hidden).float()  # (batch, longest, vocab)
        targets = ids[:, -longest:].to(logits.device)  # (batch, longest)
        nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").double().cpu()  # (batch, longest)
        for row, answer_len in enumerate(samples.answer_lens[start : start + size]):
            losses.append(nll[row, longest - answer_len :])
    return torch.cat(losses)


def needle_loss(
    model, samples: NeedleSamples, scaling: ScalingConfig | None, *, batch_size: int | None = None
) -> float:
    """The needle-driven objective: mean answer-token loss (nats) with ``scaling`` on ``model``.

    Raises:
        ValueError: a non-finite loss (the scaling breaks the model).
    """
    model.set_scaling(scaling)
    value = float(answer_losses(model, samples, batch_size=batch_size).mean())
    if not np.isfinite(value):
        raise ValueError(f"the needle loss is {value} with {scaling}")
    return value


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
