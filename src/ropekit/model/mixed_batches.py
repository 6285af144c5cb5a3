"""Mixed-window batches for the tiny model (LongRoPE2's training half, :mod:`ropekit.mixed_window`).

Every row has the training length. A seeded share of the rows (:data:`SHORT_SHARE`) is packed from short pieces of
the corpus, each of at most L0 bytes (the ``longrope`` config's original length) with its positions starting at 0, so
no position reaches L0 and the row is rotated with the short list (the original RoPE). The other rows are the ones
:func:`ropekit.model.train.make_batch` gives (corpus windows and task sequences at the full length), rotated with the
long list. Each row carries document numbers: packed pieces attend and predict only within themselves.

Batch ``i`` is still a pure function of ``(seed, i)``, so a resumed run sees the data an uninterrupted run would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ropekit.mixed_window import MixedWindowRotary

if TYPE_CHECKING:
    from ropekit.model.tiny import TinyConfig, TinyLM

#: the share of rows packed from short pieces (LongRoPE2's mix is about 45% short rows: 32k of 72k sequences)
SHORT_SHARE = 0.5
#: the shortest packed piece, as a fraction of L0
SHORTEST = 0.25


def short_row(rng: np.random.Generator, corpus: np.ndarray, length: int, original: int) -> tuple[np.ndarray, ...]:
    """``(ids, positions, documents)`` of ``length`` tokens packed from corpus pieces of ``SHORTEST·L0 … L0`` bytes."""
    ids, positions, documents, filled, number = [], [], [], 0, 0
    while filled < length:
        size = min(int(rng.integers(max(2, int(SHORTEST * original)), original + 1)), length - filled)
        start = int(rng.integers(0, len(corpus) - size))
        ids.append(corpus[start : start + size].astype(np.int64))
        positions.append(np.arange(size, dtype=np.int64))
        documents.append(np.full(size, number, dtype=np.int64))
        filled, number = filled + size, number + 1
    return np.concatenate(ids), np.concatenate(positions), np.concatenate(documents)


def mixed_batch(
    ids: torch.Tensor, answers: torch.Tensor, corpus: np.ndarray, config: TinyConfig, seed: int, step: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, answers, positions, documents)`` for ``step`` of a run seeded ``seed``, from the full-length batch
    ``ids``, ``answers`` of :func:`ropekit.model.train.make_batch` (changed in place): ids and documents ``(batch,
    train_length + 1)``, positions ``(batch, train_length)`` (of the inputs ``ids[:, :-1]``), answers ``(batch,)``."""
    length = ids.shape[1]
    positions = torch.arange(length, dtype=torch.int64).repeat(ids.shape[0], 1)  # (batch, length)
    documents = torch.zeros_like(ids)  # (batch, length)
    rng = np.random.default_rng([seed, step, 1])  # apart from make_batch's draws
    original = config.scaling.original_max_position_embeddings
    for row in range(ids.shape[0]):
        if rng.random() < SHORT_SHARE:
            packed = short_row(rng, corpus, length, original)
            ids[row], positions[row], documents[row] = (torch.from_numpy(a) for a in packed)
            answers[row] = 0
    return ids, answers, positions[:, :-1], documents


def use_mixed_window(model: TinyLM) -> TinyLM:
    """Rotate each row of a batch with the short or the long list of the model's ``longrope`` scaling by its own
    positions (:class:`ropekit.mixed_window.MixedWindowRotary`), in place; ``model.set_scaling`` undoes it."""
    rotary = MixedWindowRotary(model.config.rope, max_positions=model.config.max_positions)
    model.rotary = rotary
    for block in model.blocks:
        block.attn.rotary = rotary
    return model
