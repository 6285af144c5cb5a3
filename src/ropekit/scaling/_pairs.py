"""Small helpers of the scaling registry: the pair groups a method's plan reports, their ranges as text, and the
check that a transformers ``rope_parameters`` dict holds the keys transformers requires."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PairGroups", "pair_ranges", "require_hf_keys"]


@dataclass(frozen=True)
class PairGroups:
    """Which pairs a method keeps, interpolates (divides by exactly s) and blends; boolean masks of shape ``(d/2,)``."""

    kept: np.ndarray
    interpolated: np.ndarray
    blended: np.ndarray


def pair_ranges(mask: np.ndarray) -> str:
    """'0–17, 40' for the true positions of ``mask``; 'none' when there are none."""
    index = np.flatnonzero(mask)
    if not index.size:
        return "none"
    parts, start = [], int(index[0])
    for previous, current in itertools.pairwise(index.tolist()):
        if current != previous + 1:
            parts.append(f"{start}" if start == previous else f"{start}–{previous}")
            start = int(current)
    last = int(index[-1])
    parts.append(f"{start}" if start == last else f"{start}–{last}")
    return ", ".join(parts)


def require_hf_keys(params: dict[str, Any], keys: tuple[str, ...], name: str) -> None:
    """Raise naming the keys of ``keys`` that ``params`` lacks or has as null (transformers requires them)."""
    missing = [key for key in keys if params.get(key) is None]
    if missing:
        raise ValueError(f"rope_parameters for rope_type {name!r} is missing required key(s) {missing}")
