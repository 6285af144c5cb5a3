"""The tiny model's tokenizer: one token per byte (ids 0–255). Nothing to download.

Every place that turns text into the tiny model's ids (training, held-out perplexity, passkey episodes, the
evaluation adapters' byte fallback) calls :func:`byte_ids`.
"""

from __future__ import annotations

import numpy as np

#: 256 byte ids plus four unused slots (room for specials; a multiple of 4 keeps the embedding aligned)
VOCAB_SIZE = 260


def byte_ids(text: bytes) -> np.ndarray:
    """Byte-level token ids of ``text``: ``(len(text),)`` int64, a writable copy (``torch.from_numpy`` shares it)."""
    return np.frombuffer(text, np.uint8).astype(np.int64)


def byte_text(tokens: list[int]) -> str:
    """The text of byte-level ``tokens`` (ids 0–255; other ids are specials and dropped), invalid UTF-8 replaced."""
    return bytes(t for t in tokens if 0 <= t < 256).decode("utf-8", errors="replace")
