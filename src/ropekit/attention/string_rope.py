"""STRING, shifted rotary position embedding (An et al. 2024, "Why Does the Effective Context Length of LLMs Fall
Short?", arXiv 2410.18745, section 4; code: github.com/HKUNLP/STRING).

Pre-training sees small relative positions far more often than large ones, so the largest ones stay ill-trained.
STRING drops them: pairs closer than the shift ``S`` keep their relative position ``d = i − j``; farther pairs
(``d >= S``) see ``d − S + W``, the well-trained small positions moved onto the tail, plus a small local value ``W``
so that the far tokens are never mistaken for the nearest ones. In a model: the query is rotated at ``i − S + W``
for the far keys and the two parts are merged by their log-sum-exp (the paper's Algorithm 1; two flash-attention
calls). The largest relative position of a length-``n`` input is ``max(S − 1, n − 1 − S + W)``.

Parameters (the authors' README and RULER scripts): ``S = 0.33 · n`` for an input of ``n`` tokens (0.25–0.4 work),
``W = 128`` (or 256, 512) for Llama 3.1 at 128K. ropekit takes ``W = min(128, S₀ / 2)`` with ``S₀ = 0.33 · min(n, L)``
(128 for any model trained at 1K or more): W must stay well below S, and on the bundled tiny model (``L = 256``)
``W = 0`` scores 8% on the task suite and ``W`` from 32 to 64 about 90% (``evidence/string/``). STRING is meant for
inputs inside the training length; beyond it the default ``S`` is the
smallest that keeps the far part inside ``L`` (``n − L + W``) when the near part still fits (``S <= L``), else the
value that makes both parts' largest positions equal (``(n + W) / 2``, rounded up): past ``2L − W`` some relative
positions necessarily exceed the training length.

Where the authors' code differs: its diagonal part is flash attention with ``window_size=(S, 0)``, which keeps
``d <= S`` (``S + 1`` keys), and its shifted part keeps ``d >= S``, so the pair at ``d = S`` is counted in both
softmax parts (at ``S`` and at ``W``). ropekit follows the paper's position matrix (each pair once). The authors'
code also scales cos/sin by ``0.1 ln 2 + 1`` (a YaRN-style temperature their comments say restores the sharpness);
that is not part of the method in the paper and is not applied here (compose with a scaling for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ropekit._validate import require_int
from ropekit.attention.registry import AttentionConfig, Region, band, far, positive_int, register

__all__ = ["String"]

#: the authors' shift as a fraction of the input length (their scripts' ``shifted_ratio``)
SHIFT_RATIO = 0.33
#: the authors' local value for Llama 3.1 (128K); short inputs get half the shift below it
LOCAL = 128


@register
@dataclass(frozen=True, kw_only=True)
class String(AttentionConfig):
    """STRING: relative position ``d`` below ``shift``, ``d − shift + local`` at or beyond it.

    Attributes:
        shift: ``S`` (the authors' ``shifted_offset``): how many of the largest positions are dropped. >= 1.
        local: ``W`` (the authors' ``local_value``): added to the shifted positions. >= 0.
    """

    name = "string"
    paper = "An et al. 2024, arXiv 2410.18745"
    shift: int
    local: int

    def __post_init__(self) -> None:
        positive_int("shift", self.shift)
        require_int("local", self.local, minimum=0)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        local = max(1, min(LOCAL, int(SHIFT_RATIO * min(length, train_length)) // 2))
        shift = max(1, int(SHIFT_RATIO * length))
        if length > train_length:
            needed = length - train_length + local  # the far part's largest position, n − 1 − S + W, below L
            shift = max(shift, needed) if needed <= train_length else max(shift, math.ceil((length + local) / 2))
        return {"shift": shift, "local": local}

    def regions(self) -> tuple[Region, ...]:
        offset = self.local - self.shift
        return (band(self.shift), Region("shifted", **far(self.shift), q_position=lambda i: i + offset))

    def max_relative(self, length: int) -> float:
        last = length - 1
        if last < self.shift:
            return float(last)
        return float(max(self.shift - 1, last - self.shift + self.local))
