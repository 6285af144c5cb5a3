"""The task evaluation's defaults and limits, in one numpy-free module that the settings and the CLI both read.

:func:`check_lengths` is the check made before any sample is built: every length within the model's positions, and
every sample within memory. Samples are kept (as int64 token ids) from generation to the end of the evaluation, so
their memory is known in advance: :data:`SAMPLE_BYTES` per token each, plus :data:`BUILD_BYTES` per token of the
longest length while one is being built (word lists, haystack units and needle bounds are Python objects until
the sample is one array).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ropekit._defaults import NOLIMA_SHARE as NOLIMA_SHARE
from ropekit._defaults import RULER_THRESHOLD as RULER_THRESHOLD  # shared with the report
from ropekit._defaults import TASK_MULTIPLES

#: lengths as multiples of the training length (shared with the report: :mod:`ropekit._defaults`)
MULTIPLES = TASK_MULTIPLES
#: samples per (length, task), and the most ``--samples`` accepts
SAMPLES = 20
MAX_SAMPLES = 100_000
#: a task counts as learned when the model's own score at its training length is at least this (fraction)
LEARNED = 0.5

#: bytes a built sample keeps per token: its int64 context (8) and the share of the encoding cache it adds (measured:
#: 8.0 for every task with SmolLM2's tokenizer and with bytes, 10.8 for common words, whose short words are shared)
SAMPLE_BYTES = 16
#: bytes per token one sample needs while it is built, above what it keeps (measured at 256k tokens with SmolLM2's
#: tokenizer: 25 to 29 for the needle tasks, 82 for common words)
BUILD_BYTES = 128
#: the share of the free memory the samples may take; the model's forward passes need the rest
MEMORY_SHARE = 0.5


def sample_bytes(lengths: Sequence[int], tasks: int, samples: int) -> int:
    """Bytes the samples of an evaluation need: all of them kept, and the longest one being built."""
    return SAMPLE_BYTES * tasks * samples * sum(lengths) + BUILD_BYTES * max(lengths)


def check_lengths(
    lengths: Sequence[int],
    *,
    tasks: int,
    samples: int,
    slack: int,
    max_positions: int | None = None,
    free_memory: int | None = None,
) -> None:
    """Refuse, before any sample is built, lengths the model cannot run or samples that do not fit in memory.

    Args:
        lengths: the evaluation's lengths in tokens.
        slack: tokens a wrong answer may be fed past the length.
        max_positions: the model's hard limit on positions (``None``: none).
        free_memory: free bytes where the samples are built (``None``: unknown, not checked).

    Raises:
        ValueError: a length whose positions (with ``slack``) reach ``max_positions``, or samples needing more than
            :data:`MEMORY_SHARE` of ``free_memory``; the message names the length or the counts.
    """
    for length in sorted(lengths):
        if max_positions is not None and length + slack > max_positions:
            raise ValueError(
                f"length {length:,} needs positions up to {length + slack - 1:,} (a wrong answer is fed up to "
                f"{slack} tokens past the length), but the model takes positions below {max_positions:,} (max_positions)"
            )
    needed = sample_bytes(lengths, tasks, samples)
    if free_memory is not None and needed > MEMORY_SHARE * free_memory:
        shown = f"length {lengths[0]:,}" if len(lengths) == 1 else f"{len(lengths)} lengths up to {max(lengths):,}"
        raise ValueError(
            f"{samples:,} samples x {tasks} tasks at {shown} tokens need about {_gib(needed)} GiB, more than "
            f"{MEMORY_SHARE:.0%} of the {_gib(free_memory)} GiB free; ask for fewer samples or tasks, or shorter lengths"
        )


def _gib(count: float) -> str:
    value = count / 2**30
    return f"{value:,.1f}" if math.isfinite(value) and value < 1e6 else f"{value:.2g}"
