"""Percentile bootstrap intervals of a mean (Efron 1979), for per-sample scores such as needle losses; a paired
comparison is the interval of the mean of per-sample differences (two methods scored on the same samples).

For proportions (an accuracy out of n trials) use the Wilson interval, :func:`ropekit.eval.passkey.wilson_interval`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ropekit._validate import require_float, require_int

#: resamples of every interval (seeded, so an interval is a function of its values)
RESAMPLES = 10_000


def bootstrap_interval(
    values: Sequence[float] | np.ndarray, *, confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values``: the mean of ``len(values)`` values drawn with
    replacement, ``resamples`` times, and its (1 - confidence)/2 and (1 + confidence)/2 quantiles.

    Raises:
        ValueError: no values, a non-finite value, or a confidence outside (0, 1).
    """
    data = np.asarray(values, dtype=np.float64).ravel()
    if not len(data) or not np.isfinite(data).all():
        raise ValueError(f"values must be one or more finite numbers, got {len(data)} values")
    level = require_float("confidence", confidence, above=0.0)
    if level >= 1:
        raise ValueError(f"confidence must be below 1, got {level}")
    require_int("resamples", resamples, minimum=1)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), (resamples, len(data)))].mean(axis=1)  # (resamples,)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def paired_interval(
    first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray, **options
) -> tuple[float, tuple[float, float]]:
    """The mean of ``first - second`` (the same samples, in the same order) and its bootstrap interval.

    Raises:
        ValueError: the two have different lengths (and :func:`bootstrap_interval`'s).
    """
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"a paired comparison needs the same samples on both sides, got {a.shape} and {b.shape}")
    difference = a - b
    return float(difference.mean()), bootstrap_interval(difference, **options)
