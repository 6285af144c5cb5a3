"""What the base-bound experiment measures per model, with the library's own evaluation code.

Held-out perplexity at the context (per-window losses from :func:`ropekit.eval.perplexity.losses_function`),
passkey retrieval binned by needle distance (:func:`ropekit.eval.passkey.episode_batch_correct`, Wilson intervals
from :class:`~ropekit.eval.passkey.PasskeyCell`) and B_m(base) over the same distances. ``model`` is an
:class:`~ropekit.eval.protocol.EvalModel` (chunked scoring, as :func:`~ropekit.experiments.base_bound.run_experiment`
uses) or any ``(batch, seq)`` ids → ``(batch, seq, vocab)`` logits callable such as a
:class:`~ropekit.model.tiny.TinyLM`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ropekit.eval.passkey import PasskeyCell, episode_batch_correct
from ropekit.eval.perplexity import losses_function
from ropekit.model.corpus import heldout_bytes
from ropekit.model.tokenizer import byte_ids
from ropekit.scaling.registry import inv_freq
from ropekit.synthetic.passkey import passkey_episode
from ropekit.theory.decay import first_negative_m, similarity_margin

#: episodes per forward pass when measuring retrieval
RETRIEVAL_BATCH = 16


@torch.no_grad()
def heldout_perplexity(model: Any, context: int, windows: int) -> dict[str, float]:
    """Perplexity at ``context`` over non-overlapping held-out windows, with a 95% interval across windows."""
    data = torch.from_numpy(byte_ids(heldout_bytes()))
    count = min(windows, (len(data) - 1) // context)
    window_losses = losses_function(model)  # ids (context + 1,) -> (context,) float64
    losses = [float(window_losses(data[w * context : w * context + context + 1]).mean()) for w in range(count)]
    mean, se = float(np.mean(losses)), float(np.std(losses, ddof=1) / math.sqrt(len(losses)))
    return {"perplexity": math.exp(mean), "low": math.exp(mean - 1.96 * se), "high": math.exp(mean + 1.96 * se)}


@torch.no_grad()
def retrieval_by_distance(model: Any, settings: Any, seed: int = 12345) -> list[dict[str, Any]]:
    """Passkey accuracy binned by needle distance; episodes drawn with uniformly random depth (fixed seed).

    ``settings`` is an :class:`~ropekit.experiments.base_bound.settings.ExperimentSettings` (``context``,
    ``trials``, ``distance_bins``).
    """
    filler = byte_ids(heldout_bytes())
    rng = np.random.default_rng(seed)
    edges = np.linspace(0, settings.context, settings.distance_bins + 1)
    hits = np.zeros(settings.distance_bins, dtype=int)
    totals = np.zeros(settings.distance_bins, dtype=int)
    for start in range(0, settings.trials, RETRIEVAL_BATCH):
        size = min(RETRIEVAL_BATCH, settings.trials - start)
        episodes = [passkey_episode(rng, filler, settings.context, encode=byte_ids) for _ in range(size)]
        for episode, ok in zip(episodes, episode_batch_correct(model, episodes), strict=True):
            b = min(int(np.searchsorted(edges, episode.distance, side="right")) - 1, settings.distance_bins - 1)
            hits[b] += ok
            totals[b] += 1
    rows = []
    for b in range(settings.distance_bins):
        if totals[b] == 0:
            continue
        cell = PasskeyCell(settings.context, 0.0, int(totals[b]), int(hits[b]))
        low, high = cell.interval()
        rows.append(
            {
                "low_distance": float(edges[b]),
                "high_distance": float(edges[b + 1]),
                "trials": int(totals[b]),
                "correct": int(hits[b]),
                "accuracy": cell.accuracy,
                "ci95": [low, high],
            }
        )
    return rows


def overall_accuracy(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Accuracy over all bins with its Wilson interval."""
    cell = PasskeyCell(0, 0.0, sum(r["trials"] for r in rows), sum(r["correct"] for r in rows))
    low, high = cell.interval()
    return {"accuracy": cell.accuracy, "low": low, "high": high}


def decay_profile(base: float, context: int, head_dim: int) -> dict[str, Any]:
    """B_m(base) for m = 0..context (Men et al., eq. 8) and the first m with B_m < 0 (``None`` if there is none).

    Within rounding of zero counts as zero, as in the bound (the bound's bases sit exactly on zeros of some B_m).
    """
    distances = np.arange(context + 1)
    values = similarity_margin(distances, head_dim, base)
    return {"first_negative_m": first_negative_m(inv_freq(head_dim, base), context + 1), "b_m": values.tolist()}
