"""The one cost policy: what the library and the CLI agree to compute, and when the robust bound runs by default.

A module without numpy, so ``ropekit --help`` stays fast. The times are those measured in docs/theory.md ("Speed",
d = 128 on an idle 2-core machine); every help text and message quotes them from here.
"""

from __future__ import annotations

#: the largest context length the theory commands accept: (A) alone takes about 4 s at 1M (d = 128).
MAX_CONTEXT = 1 << 20

#: the largest length in tokens any command or evaluation accepts (2^30 = 1024M); beyond it nothing here finishes.
MAX_LENGTH = 1 << 30

#: the most token ids whose logits an engine comparison compares: each engine's logits are a float64 (ids, vocab)
#: table held beside the reference's, 1.2 GB each at 1,024 ids and a 152k vocabulary
MAX_LOGITS = 1024

#: the largest rotary dim the theory commands accept (the cost of the exact bound grows with d).
MAX_ROTARY_DIM = 1024

#: the largest L × d for which the exact bound is computed at all: (A) at 1M tokens and d = 128 takes about 4 s.
MAX_BOUND_WORK = MAX_CONTEXT * 128

#: the robust bound (B) and its islands are computed by default up to this context length ...
ROBUST_AUTO_LIMIT = 65536

#: ... and up to this rotary dim: the islands multiply fast with d (minutes at d = 256 where d = 128 takes seconds).
ROBUST_AUTO_DIM = 128

#: the default rule in words, for help texts and messages.
ROBUST_DEFAULT = f"L <= {ROBUST_AUTO_LIMIT // 1024}k and rotary dim <= {ROBUST_AUTO_DIM}"

#: the cost of (B) alone (the certified downward sweep, without the islands) at the longest context.
ROBUST_ALONE_COST = "about 15 s at 1M"

#: the cost of the islands between (A) and (B) (the full exact bound) above the default cut-off.
ISLANDS_COST = "about 12 s at 128k and 2.5 minutes at 1M"

#: largest scaling factor accepted (library and CLI): a context a million times the training length is beyond any
#: model, and far larger factors push wavelengths past float64 (1e308 gave inf wavelengths and Infinity in JSON).
MAX_FACTOR = 1e6


def robust_by_default(length: int, dim: int) -> bool:
    """Whether the robust bound (B) and its islands are computed without being asked: L and d both small enough.

    The one rule, used by ``ropekit bound``, ``ropekit plan``, ``ropekit plot``, :func:`ropekit.theory.plan` and
    the evaluation report.

    Args:
        length: the context length L.
        dim: the rotary dimension d.

    Returns:
        ``length <= ROBUST_AUTO_LIMIT and dim <= ROBUST_AUTO_DIM``.

    Example:
        >>> robust_by_default(4096, 128), robust_by_default(4096, 256), robust_by_default(1 << 17, 64)
        (True, False, False)
    """
    return length <= ROBUST_AUTO_LIMIT and dim <= ROBUST_AUTO_DIM
