"""Cost cut-offs and bounds shared by the library and the CLI, in a module without numpy so ``ropekit --help`` stays fast."""

from __future__ import annotations

#: ``ropekit bound``, ``ropekit plan`` and the evaluation report compute the robust bound (B) and the islands of the
#: exact base bound by default up to this context length (seconds on 2 cores; docs/theory.md has the times).
ROBUST_AUTO_LIMIT = 65536

#: largest scaling factor accepted (library and CLI): a context a million times the training length is beyond any
#: model, and far larger factors push wavelengths past float64 (1e308 gave inf wavelengths and Infinity in JSON).
MAX_FACTOR = 1e6
