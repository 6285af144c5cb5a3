"""Training text → token windows of the target length.

The text is read by :func:`ropekit.eval.text.read_text` (a UTF-8 file, a ``.jsonl`` file with a ``text`` field per
line, or a folder of them; bad files are refused with a clear error) and tokenized one document at a time with the
tokenizer's own special tokens (``add_special_tokens=True``: a beginning-of-sequence token where the tokenizer adds
one), documents joined by its end-of-sequence token (:func:`ropekit.eval.text.tokenize`). The joined stream is cut
into non-overlapping windows of exactly ``length`` tokens (the remainder dropped), so a window may span a document
boundary but never without the separator. The tail of the stream is held out for the held-out loss and the
before/after evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ropekit.eval.text import EvalText


def tokenize_text(tokenizer, text: str | Path | EvalText) -> torch.Tensor:
    """The 1-D int64 token stream of ``text`` (a path, or its documents already read; see the module docstring).

    Raises:
        FileNotFoundError, ValueError: as :func:`ropekit.eval.text.read_text` (missing, empty, binary, bad JSON).
    """
    from ropekit.eval.text import EvalText, read_text, tokenize

    def encode(document: bytes) -> torch.Tensor:
        ids = tokenizer(document.decode("utf-8"), add_special_tokens=True)["input_ids"]
        return torch.tensor(ids, dtype=torch.int64)

    separator = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    documents = text if isinstance(text, EvalText) else read_text(text)
    return tokenize(documents, encode, separator).ids


@dataclass(frozen=True)
class PackedText:
    """Training windows and held-out tokens.

    Attributes:
        windows: ``(n, length)`` int64 training windows.
        heldout: 1-D int64 held-out tokens (at least ``length + 1``, so one full window can be scored).
        tokens: tokens in the whole stream.
    """

    windows: torch.Tensor
    heldout: torch.Tensor
    tokens: int


def pack(stream: torch.Tensor, length: int, *, heldout_fraction: float = 0.05) -> PackedText:
    """Cut ``stream`` into training windows of ``length`` after holding out its tail.

    The tail held out is ``max(length + 1, heldout_fraction × tokens)`` tokens.

    Raises:
        ValueError: the stream is shorter than one training window plus the held-out tail.
    """
    from ropekit.eval.text import packed_windows

    total = len(stream)
    heldout = max(length + 1, int(heldout_fraction * total))
    train = total - heldout
    if train < length:
        raise ValueError(
            f"text: gives {total:,} tokens; fine-tuning at {length:,} tokens needs at least {length + heldout:,} "
            f"(one training window of {length:,} plus {heldout:,} held out for evaluation)"
        )
    windows = packed_windows(stream[:train], length).clone()  # (windows, length), contiguous for the DataLoader
    return PackedText(windows, stream[train:].clone(), total)
