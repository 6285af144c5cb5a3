"""Training text → training windows (of the target length, or PoSE's shorter window) and a held-out tail.

The text is read by :func:`ropekit.eval.text.read_text` (a UTF-8 file, a ``.jsonl`` file with a ``text`` field per
line, or a folder of them; bad files are refused with a clear error) and tokenized one document at a time with the
tokenizer's own special tokens (``add_special_tokens=True``: a beginning-of-sequence token where the tokenizer adds
one), documents joined by its end-of-sequence token (:func:`ropekit.eval.text.tokenize`). The tail of the stream
is held out for the held-out loss and the before/after evaluation (at the target length); the rest is cut into
non-overlapping windows of exactly the training window's tokens (the target length, or PoSE's ``window``), so a
window may span a document boundary but never without the separator. Only the stream's last incomplete window is
left out of training: fewer tokens than one window, counted in :attr:`PackedText.left_out`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ropekit.errors import InvalidArgument

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
        windows: ``(n, window)`` int64 training windows (``window``: the target length, or PoSE's window).
        heldout: 1-D int64 held-out tokens (at least ``length + 1``, so one full window can be scored).
        tokens: tokens in the whole stream.
        left_out: training tokens in no window: the incomplete last one, fewer than ``window``.
    """

    windows: torch.Tensor
    heldout: torch.Tensor
    tokens: int
    left_out: int = 0


def pack(stream: torch.Tensor, length: int, *, window: int | None = None, heldout_fraction: float = 0.05) -> PackedText:
    """Hold out the tail of ``stream``, then cut the rest into training windows of ``window`` tokens.

    The tail held out is ``max(length + 1, heldout_fraction × tokens)`` tokens (``length``: the target length the
    held-out loss is scored at); ``window`` defaults to ``length`` (PoSE passes its shorter window). Of the
    ``train = tokens − heldout`` tokens left, ``(train // window) · window`` are trained on, in order.

    Raises:
        ValueError: the stream is shorter than one training window plus the held-out tail.
    """
    from ropekit.eval.text import packed_windows

    size = length if window is None else window
    total = len(stream)
    heldout = max(length + 1, int(heldout_fraction * total))
    train = total - heldout
    if train < size:
        message = (
            f"text: gives {total:,} tokens; fine-tuning at {length:,} tokens needs at least {size + heldout:,} "
            f"(one training window of {size:,} plus {heldout:,} held out for evaluation)"
        )
        raise InvalidArgument("text", total, message=message, leads=True)
    windows = packed_windows(stream[:train], size).clone()  # (windows, size), contiguous for the DataLoader
    return PackedText(windows, stream[train:].clone(), total, left_out=train - windows.numel())
