"""Scoring as RULER does it (Hsieh et al., arXiv 2404.06654; ``eval/synthetic/constants.py`` of its code).

Per sample, with ``refs`` the reference strings and ``pred`` the model's decoded output (case-insensitive):

- ``string_match_all``: the fraction of references found in the output (retrieval, tracing, aggregation);
- ``string_match_part``: 1 if any reference is found (RULER's QA tasks).

A task's score is the mean over its samples; a (method, length)'s score the mean over tasks; the effective length
the longest length whose score, and that of every shorter length, stays at or above a threshold (RULER's 85.6:
Llama-2-7B's own score at 4K: :data:`ropekit.eval.tasks.limits.RULER_THRESHOLD`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ropekit.eval.passkey import wilson_interval

METRICS = ("all", "part")


def string_match_all(pred: str, refs: Sequence[str]) -> float:
    """The fraction of ``refs`` that occur in ``pred`` (case-insensitive)."""
    if not refs:
        raise ValueError("refs must hold at least one reference string, got none")
    text = pred.lower()
    return sum(ref.lower() in text for ref in refs) / len(refs)


def string_match_part(pred: str, refs: Sequence[str]) -> float:
    """1.0 if any of ``refs`` occurs in ``pred`` (case-insensitive), else 0.0."""
    if not refs:
        raise ValueError("refs must hold at least one reference string, got none")
    text = pred.lower()
    return float(any(ref.lower() in text for ref in refs))


def score(pred: str, refs: Sequence[str], metric: str = "all") -> float:
    """The sample's score under ``metric`` (one of :data:`METRICS`)."""
    if metric == "all":
        return string_match_all(pred, refs)
    if metric == "part":
        return string_match_part(pred, refs)
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")


def cell(scores: Sequence[float]) -> dict[str, Any]:
    """Mean score of one (method, length, task) with its 95% Wilson interval (Wilson 1927).

    A sample's score may be fractional (``string_match_all`` with several references); the interval then treats the
    summed score as the count of successes, an approximation that is exact for 0/1 scores.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("scores must hold at least one sample, got none")
    mean = sum(scores) / n
    low, high = wilson_interval(mean * n, n)
    return {"samples": n, "score": mean, "ci95": [low, high]}


def pooled(cells: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean over tasks of one (method, length), with a Wilson interval on all their samples pooled (equal sample
    counts per task make the pooled mean the mean over tasks)."""
    if not cells:
        raise ValueError("cells must hold at least one task, got none")
    mean = sum(c["score"] for c in cells) / len(cells)
    n = sum(c["samples"] for c in cells)
    low, high = wilson_interval(mean * n, n)
    return {"tasks": len(cells), "samples": n, "score": mean, "ci95": [low, high]}


def effective_length(scores: dict[int, float], threshold: float) -> int | None:
    """The longest length whose score, and every shorter length's, is at least ``threshold``; ``None`` if the
    shortest one already falls below it (RULER's effective length, counted from the start)."""
    best = None
    for length in sorted(scores):
        value = scores[length]
        if value is None or math.isnan(value) or value < threshold:
            break
        best = length
    return best


def effective_lengths(
    means: dict[int, dict[str, Any]], threshold: float, reference: float | None = None
) -> dict[str, Any]:
    """Effective length from the mean score per length (fractions in [0, 1]; ``threshold`` in percent).

    Returns the effective length at the point estimate and at each end of the 95% interval (``interval``: from the
    lower bounds, the pessimistic length, to the upper ones), and, with ``reference`` (the model's own score at its
    training length), the same for the relative threshold ``threshold% × reference``.
    """
    cut = threshold / 100.0
    result = {
        "threshold": threshold,
        "effective_length": effective_length({n: m["score"] for n, m in means.items()}, cut),
        "interval": [
            effective_length({n: m["ci95"][0] for n, m in means.items()}, cut),
            effective_length({n: m["ci95"][1] for n, m in means.items()}, cut),
        ],
    }
    if reference is not None and reference <= 0:
        # A model that scores nothing at its own training length has no relative effective length: a threshold of
        # 0% would call every length effective.
        result["relative_threshold"] = 0.0
        result["relative_effective_length"] = None
        result["relative_interval"] = [None, None]
    elif reference is not None:
        relative = cut * reference
        result["relative_threshold"] = relative * 100
        result["relative_effective_length"] = effective_length({n: m["score"] for n, m in means.items()}, relative)
        result["relative_interval"] = [
            effective_length({n: m["ci95"][0] for n, m in means.items()}, relative),
            effective_length({n: m["ci95"][1] for n, m in means.items()}, relative),
        ]
    return result


def samples_to_separate(p: float, q: float, per_sample: int = 1, limit: int = 10_000) -> int | None:
    """The fewest samples ``n`` at which 95% Wilson intervals of ``per_sample · n`` trials at success rates ``p`` and
    ``q`` stop overlapping (a mean over ``per_sample`` tasks takes that many trials per sample); ``None`` past
    ``limit`` (and for equal rates, which never separate)."""
    low, high = min(p, q), max(p, q)
    for n in range(1, limit + 1):
        total = per_sample * n
        if wilson_interval(low * total, total)[1] < wilson_interval(high * total, total)[0]:
            return n
    return None
