"""Scoring as RULER does it (Hsieh et al., arXiv 2404.06654; ``eval/synthetic/constants.py`` of its code).

Per sample, with ``refs`` the reference strings and ``pred`` the model's decoded output (case-insensitive):

- ``string_match_all``: the fraction of references found in the output (retrieval, tracing, aggregation);
- ``string_match_part``: 1 if any reference is found (RULER's QA tasks);
- ``prefix_fraction``: the fraction of an answer's lines right before the first wrong one (a long answer, one line
  per step: LongProc's path traversal); 1 is an exact answer.

A task's score is the mean over its samples; a (method, length)'s score the mean over tasks; the effective length
the longest length whose score, and that of every shorter length, stays at or above a threshold (RULER's 85.6:
Llama-2-7B's own score at 4K: :data:`ropekit.eval.tasks.limits.RULER_THRESHOLD`), or at or above 85% of the score at
the shortest length (NoLiMa's relative rule). A question and its twin on the same context (the latent and the
literal question) differ by a paired gap with Newcombe's interval (:func:`paired_difference`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ropekit.eval.passkey import wilson_interval
from ropekit.eval.tasks.limits import NOLIMA_SHARE

METRICS = ("all", "part", "prefix")


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


def prefix_fraction(pred: str, refs: Sequence[str]) -> float:
    """The fraction of ``refs`` (an answer's lines, in order) that the output's lines give before the first wrong
    one (each line stripped, blank lines skipped, case-insensitive): LongProc's partial credit for a long answer,
    read as the correct prefix. 1.0 is an exact answer (lines after the last reference are not read)."""
    if not refs:
        raise ValueError("refs must hold at least one reference line, got none")
    lines = [line.strip().lower() for line in pred.splitlines() if line.strip()]
    right = 0
    for line, ref in zip(lines, refs, strict=False):
        if line != ref.strip().lower():
            break
        right += 1
    return right / len(refs)


def score(pred: str, refs: Sequence[str], metric: str = "all") -> float:
    """The sample's score under ``metric`` (one of :data:`METRICS`)."""
    if metric == "all":
        return string_match_all(pred, refs)
    if metric == "part":
        return string_match_part(pred, refs)
    if metric == "prefix":
        return prefix_fraction(pred, refs)
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


def paired_difference(first: Sequence[float], second: Sequence[float]) -> dict[str, Any]:
    """``mean(second) - mean(first)`` over paired 0/1 scores (one pair per sample: a question and its twin on the same
    context), with the 95% interval of Newcombe's method 10 for paired proportions (Newcombe 1998, Statistics in
    Medicine 17:2635, built from the two Wilson intervals and the pairs' correlation), and the pair counts.

    Returns:
        ``{"pairs": n, "difference": d, "ci95": [low, high], "counts": [both, first only, second only, neither]}``.

    Raises:
        ValueError: no pairs, unequal lengths, or a score other than 0 or 1.
    """
    if len(first) != len(second) or not first:
        raise ValueError(f"need the same number (>= 1) of scores on each side, got {len(first)} and {len(second)}")
    if any(v not in (0, 1) for v in (*first, *second)):
        raise ValueError("paired_difference takes 0/1 scores (one reference per question)")
    both = sum(1 for x, y in zip(first, second, strict=True) if x and y)
    only_first = sum(1 for x, y in zip(first, second, strict=True) if x and not y)
    only_second = sum(1 for x, y in zip(first, second, strict=True) if y and not x)
    return paired_counts([both, only_first, only_second, len(first) - both - only_first - only_second])


def paired_counts(counts: Sequence[int]) -> dict[str, Any]:
    """:func:`paired_difference` from the pair counts ``[both, first only, second only, neither]`` (counts of several
    cells add up: the pooled gap over tasks)."""
    both, only_first, only_second, neither = (int(c) for c in counts)
    n = both + only_first + only_second + neither
    if n < 1 or min(both, only_first, only_second, neither) < 0:
        raise ValueError(f"pair counts must be >= 0 with at least one pair, got {list(counts)}")
    p1, p2 = (both + only_first) / n, (both + only_second) / n
    l1, u1 = wilson_interval(both + only_first, n)
    l2, u2 = wilson_interval(both + only_second, n)
    margins = (both + only_first) * (only_second + neither) * (both + only_second) * (only_first + neither)
    product = both * neither - only_first * only_second
    # Newcombe's phi with his continuity correction (a positive numerator lowered by n/2, not below 0); 0 where a
    # margin is empty
    corrected = max(product - n / 2, 0.0) if product > 0 else product
    phi = 0.0 if margins == 0 else corrected / math.sqrt(margins)
    difference = p2 - p1
    below = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    above = math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return {
        "pairs": n,
        "difference": difference,
        "ci95": [max(-1.0, difference - below), min(1.0, difference + above)],
        "counts": [both, only_first, only_second, neither],
    }


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
    lower bounds, the pessimistic length, to the upper ones); NoLiMa's relative one (``short_relative_*``: the same
    against :data:`~ropekit.eval.tasks.limits.NOLIMA_SHARE` (85%) of this score at the shortest length, Modarressi et
    al., arXiv 2502.05167); and, with ``reference`` (the model's own score at its training length), the same for the
    relative threshold ``threshold% × reference``.
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
    shortest = means[min(means)]["score"] if means else None
    result["short_reference"] = shortest
    result["short_relative_threshold"] = NOLIMA_SHARE * (shortest or 0.0)
    if not shortest:  # nothing right even at the shortest length: no length is effective
        result["short_relative_effective_length"] = None
        result["short_relative_interval"] = [None, None]
    else:
        share = NOLIMA_SHARE / 100.0 * shortest
        result["short_relative_effective_length"] = effective_length({n: m["score"] for n, m in means.items()}, share)
        result["short_relative_interval"] = [
            effective_length({n: m["ci95"][0] for n, m in means.items()}, share),
            effective_length({n: m["ci95"][1] for n, m in means.items()}, share),
        ]
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
