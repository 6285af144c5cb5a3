"""Byte-level tokenizer: ids 0–255 are bytes, a few specials follow. Nothing to download."""

from __future__ import annotations

import torch

BOS = 256  #: start of a document
EOS = 257  #: end of a document
PAD = 258  #: padding (never predicted)
VOCAB_SIZE = 260  #: 256 bytes + specials, rounded up to a multiple of 4


def encode(text: str | bytes) -> list[int]:
    """UTF-8 bytes of ``text`` as token ids."""
    return list(text.encode("utf-8") if isinstance(text, str) else text)


def encode_tensor(text: str | bytes) -> torch.Tensor:
    """``encode`` as a 1-D int64 tensor."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)


def decode(ids: list[int] | torch.Tensor) -> str:
    """Bytes back to text; specials are dropped and invalid UTF-8 is replaced."""
    values = ids.tolist() if isinstance(ids, torch.Tensor) else ids
    return bytes(v for v in values if v < 256).decode("utf-8", errors="replace")
