"""The learning-rate schedule of both trainings (the tiny model's and a fine-tune's): linear warm-up, then cosine."""

from __future__ import annotations

import math


def warmup_cosine(peak: float, step: int, *, warmup: int, progress: float, floor: float) -> float:
    """The learning rate at optimizer step ``step`` (0-based): ``peak · (step + 1) / warmup`` during the ``warmup``
    steps, then cosine decay from ``peak`` to ``floor · peak`` as ``progress`` goes from 0 to 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))
