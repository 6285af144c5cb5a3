"""Passkey retrieval accuracy over a grid of lengths × needle depths (Mohtashami & Jaggi, arXiv 2305.16300).

Each cell runs ``trials`` episodes with a fixed seed; a trial succeeds when the model's greedy prediction
of every answer digit is right (checked in one teacher-forced forward pass, which is equivalent to greedy
decoding of the key). Filler is the shipped held-out text.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ropekit._validate import require_float, require_int
from ropekit.eval.protocol import EvalModel, LogitsFunction
from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.passkey import Episode, passkey_episode


def wilson_interval(successes: float, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for ``successes`` out of ``trials``; it always contains the proportion."""
    n, p = trials, successes / trials
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At p = 0 or 1 one bound is p exactly; rounding would otherwise put it an ulp inside (0.9999999999999999).
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


@dataclass(frozen=True)
class PasskeyCell:
    """Accuracy at one (length, depth), with a 95% Wilson interval."""

    length: int
    depth: float
    trials: int
    correct: int

    def __post_init__(self) -> None:
        # store what the checks return: plain numbers, so numpy inputs still give a JSON-ready to_dict()
        object.__setattr__(self, "length", require_int("length", self.length, minimum=0))
        object.__setattr__(self, "depth", require_float("depth", self.depth))
        object.__setattr__(self, "trials", require_int("trials", self.trials, minimum=1))
        object.__setattr__(self, "correct", require_int("correct", self.correct, minimum=0))
        if self.correct > self.trials:
            raise ValueError(f"correct must be <= trials ({self.trials}), got {self.correct}")

    @property
    def accuracy(self) -> float:
        return self.correct / self.trials

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """Wilson score interval for the accuracy (Wilson 1927); it always contains the accuracy itself."""
        return wilson_interval(self.correct, self.trials, z)

    def to_dict(self) -> dict:
        low, high = self.interval()
        return {**asdict(self), "accuracy": self.accuracy, "ci95": [low, high]}


def episode_batch_correct(model: EvalModel | LogitsFunction, episodes: list[Episode]) -> list[bool]:
    """For equal-length episodes, whether each one's answer tokens are all predicted (argmax) correctly.

    Args:
        model: an :class:`ropekit.eval.protocol.EvalModel` (logits only for the answer positions), or a callable
            ``(batch, seq)`` ids → ``(batch, seq, vocab)`` logits.
    """
    ids = torch.from_numpy(np.stack([e.ids for e in episodes]))  # (batch, length)
    count = max(e.answer_len for e in episodes)
    inputs = ids[:, :-1]  # (batch, length - 1): position t predicts token t + 1
    if isinstance(model, EvalModel):
        predicted = model.predict_last(inputs, count)  # (batch, count)
    else:
        predicted = model(inputs)[:, -count:].argmax(-1)  # (batch, count)
    results = []
    for row, episode in enumerate(episodes):
        answer = ids[row, ids.shape[1] - episode.answer_len :]
        results.append(bool((predicted[row, count - episode.answer_len :] == answer).all()))
    return results


def passkey_grid(
    model: EvalModel | LogitsFunction,
    filler: np.ndarray,
    lengths: list[int],
    depths: list[float],
    *,
    trials: int = 10,
    seed: int = 0,
    batch_size: int = 8,
    encode=byte_ids,
    progress=None,
) -> list[PasskeyCell]:
    """Accuracy for every (length, depth); episode ``t`` of a cell is a function of (seed, length, depth, t).

    Args:
        model: an :class:`ropekit.eval.protocol.EvalModel`, or a callable ``(batch, seq)`` ids →
            ``(batch, seq, vocab)`` logits.
        filler: token ids of filler text.
        encode: text → ids for the needle and question (bytes by default).
        progress: optional callable invoked once per finished cell.

    Raises:
        ValueError: ``trials`` or ``batch_size`` < 1, a depth outside [0, 1], or a length too short for an episode.
    """
    trials = require_int("trials", trials, minimum=1)
    batch_size = require_int("batch_size", batch_size, minimum=1)
    depths = [require_float("depth", depth) for depth in depths]
    for depth in depths:
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth must be in [0, 1] (0 = start of the filler), got {depth!r}")
    cells = []
    for length in lengths:
        for depth in depths:
            rng = np.random.default_rng([seed, length, round(depth * 1000)])
            episodes = [passkey_episode(rng, filler, length, depth, encode=encode) for _ in range(trials)]
            correct = 0
            for i in range(0, trials, batch_size):
                correct += sum(episode_batch_correct(model, episodes[i : i + batch_size]))
            cells.append(PasskeyCell(length, depth, trials, correct))
            if progress is not None:
                progress()
    return cells
