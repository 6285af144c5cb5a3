"""The evaluation defaults that the library's settings and the CLI's options share, written once.

A module without numpy, so ``ropekit --help`` stays fast: the settings dataclasses
(:class:`ropekit.eval.sweep.SweepSettings`, :class:`ropekit.eval.tasks.run.TaskSettings`) take their defaults
from here, and the commands' options show the same values (:func:`as_text`).
"""

from __future__ import annotations

from collections.abc import Iterable

#: perplexity lengths, as multiples of the training length (up to 16×: where the methods part ways)
PERPLEXITY_MULTIPLES = (1, 2, 4, 8, 16)

#: perplexity mode (non-overlapping windows, as the PI paper scores), the stride of ``sliding`` mode, and the tokens
#: scored per (method, length)
PERPLEXITY_MODE = "nonoverlap"
PERPLEXITY_STRIDE = 256
PERPLEXITY_MAX_TOKENS = 16384

#: passkey lengths, as multiples of the training length
PASSKEY_MULTIPLES = (1, 2, 4, 8)

#: passkey trials per (length, depth) cell
PASSKEY_TRIALS = 10

#: passkey needle depths (0 = start of the filler, 1 = its end)
PASSKEY_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)

#: RULER-style task lengths, as multiples of the training length (the tasks cost more per token than perplexity)
TASK_MULTIPLES = (1, 2, 4)

#: the effective-length threshold in percent: RULER's (Hsieh et al., arXiv 2404.06654), Llama-2-7B's mean score at
#: 4K
RULER_THRESHOLD = 85.6
#: NoLiMa's relative threshold in percent (Modarressi et al., arXiv 2502.05167): a length is effective while the score
#: stays at or above this share of the model's own score at the shortest length
NOLIMA_SHARE = 85.0


def as_text(values: Iterable[float]) -> str:
    """A default list as an option takes it: ``(0.0, 0.25, 1.0)`` -> ``"0,0.25,1"``.

    Example:
        >>> as_text(PERPLEXITY_MULTIPLES), as_text(PASSKEY_DEPTHS)
        ('1,2,4,8,16', '0,0.25,0.5,0.75,1')
    """
    return ",".join(f"{value:g}" for value in values)
