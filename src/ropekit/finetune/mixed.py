"""Mixed-window training data: rows of exactly one training window, packed from short or from long documents.

LongRoPE2 (arXiv 2502.20082, §3.3; microsoft/nnscaler ``examples/longrope2/data/process.py``): each document is
tokenized on its own and ends with the end-of-sequence token. A document of at most L0 tokens is *short*, a longer
one *long*; the two pools are packed apart, so a row of short documents never reaches position L0 and is rotated
with the original RoPE (:mod:`ropekit.mixed_window`).

* Without PoSE every row has ``target_length`` tokens. Documents of a pool are laid end to end; each starts at
  position 0 and carries its own document number. A document that does not fit in the row's space is cut: its
  first part ends the row and the rest starts the next row, again at position 0 (as nnscaler's positions restart
  per stored document). The pool's last incomplete row is left out (counted).
* With PoSE (``window`` W < target) short rows are packed the same way to W tokens; a long document gives its
  consecutive W-token windows (one document per row, the remainder left out), whose positions PoSE draws at training
  time (:mod:`ropekit.finetune.pose`), spanning the target length.

Labels never cross documents: a row's last token of a document predicts nothing (its target is ignored), and the
attention mask keeps each document to itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ropekit.errors import InvalidArgument

if TYPE_CHECKING:
    from ropekit.finetune.pose import PoseSettings
    from ropekit.scaling.longrope import LongRopeScaling


@dataclass(frozen=True)
class MixedRows:
    """Packed rows of one window each.

    Attributes:
        ids: ``(n, window)`` int64 token ids.
        positions: ``(n, window)`` int64 position ids, 0 at the start of each document (piece).
        documents: ``(n, window)`` int64 document numbers, unique within the whole set.
        long: ``(n,)`` bool, rows built from long documents (PoSE draws their positions).
        left_out: tokens in no row.
    """

    ids: torch.Tensor
    positions: torch.Tensor
    documents: torch.Tensor
    long: torch.Tensor
    left_out: int

    def __len__(self) -> int:
        return len(self.ids)

    def samples(self, order: torch.Tensor, pose: PoseSettings | None) -> tuple[torch.Tensor, ...]:
        """``(ids, positions, documents)`` of the rows ``order``; with PoSE, the rows of long documents take PoSE's
        position ids (a function of the seed and the sample number)."""
        positions = self.positions[order].clone()  # (samples, window)
        if pose is not None:
            long = self.long[order]  # (samples,)
            samples = torch.arange(len(order))[long]
            if len(samples):
                positions[long] = pose.batch(samples)
        return self.ids[order], positions, self.documents[order]

    def summary(self, scaling: LongRopeScaling, *, pose: bool = False) -> str:
        """One line: the rows each list rotates, by the rule the model applies to a row
        (``scaling.uses_long_factor`` of its largest position + 1, :mod:`ropekit.mixed_window`): a row of pieces of
        longer documents that all end below L0 takes the short list. With ``pose`` the rows of longer documents take
        positions drawn per sample (:meth:`samples`), which decide their list then."""
        drawn = self.long if pose else torch.zeros_like(self.long)  # (n,)
        largest = self.positions.amax(dim=-1).tolist()  # (n,) each row's largest position
        on_long = torch.tensor([scaling.uses_long_factor(int(m) + 1) for m in largest], dtype=torch.bool) & ~drawn
        on_short = ~on_long & ~drawn
        pieces = int((on_short & self.long).sum())
        text = f"mixed windows: {int(on_short.sum()):,} rows on the short list (positions below L0 "
        text += f"{scaling.original_max_position_embeddings:,}"
        text += f"; {pieces:,} of them pieces of longer documents)" if pieces else ")"
        text += f", {int(on_long.sum()):,} rows on the long list"
        if pose:
            text += f", {int(drawn.sum()):,} rows of longer documents on the list their PoSE positions pick"
        return text + (f", {self.left_out:,} tokens left out" if self.left_out else "")


def _packed(documents: Sequence[torch.Tensor], size: int, first_number: int) -> tuple[list[torch.Tensor], ...]:
    """Rows of ``size`` tokens from ``documents`` end to end (see the module docstring): ids, positions, numbers."""
    rows: tuple[list[torch.Tensor], ...] = ([], [], [])
    ids, positions, numbers, filled = [], [], [], 0
    number = first_number
    for document in documents:
        rest = document
        while len(rest):
            take = min(len(rest), size - filled)
            ids.append(rest[:take])
            positions.append(torch.arange(take, dtype=torch.int64))
            numbers.append(torch.full((take,), number, dtype=torch.int64))
            number, filled, rest = number + 1, filled + take, rest[take:]
            if filled == size:
                for out, parts in zip(rows, (ids, positions, numbers), strict=True):
                    out.append(torch.cat(parts))
                ids, positions, numbers, filled = [], [], [], 0
    return rows


def _windows(documents: Sequence[torch.Tensor], size: int, first_number: int) -> tuple[list[torch.Tensor], ...]:
    """Each document's consecutive ``size``-token windows, one document per row (PoSE's long rows)."""
    rows: tuple[list[torch.Tensor], ...] = ([], [], [])
    number = first_number
    for document in documents:
        for start in range(0, len(document) - size + 1, size):
            rows[0].append(document[start : start + size])
            rows[1].append(torch.arange(size, dtype=torch.int64))
            rows[2].append(torch.full((size,), number, dtype=torch.int64))
            number += 1
    return rows


def pack_mixed(
    documents: Sequence[torch.Tensor], *, original: int, target_length: int, window: int | None = None
) -> MixedRows:
    """Mixed-window rows from tokenized ``documents`` (each 1-D int64, its separator included).

    Args:
        documents: the training documents, in order.
        original: L0: documents of at most this many tokens are short.
        target_length: tokens per row without PoSE.
        window: PoSE's training window (rows of this many tokens), or ``None``.

    Raises:
        ValueError: (about ``text``) the documents fill no short row or no long row: mixed windows need both.
    """
    size = target_length if window is None else window
    short = [d for d in documents if 0 < len(d) <= original]
    long = [d for d in documents if len(d) > original]
    short_rows = _packed(short, size, 0)
    first = sum(len(d) for d in documents) + 1  # numbers above any short piece's
    long_rows = _packed(long, size, first) if window is None else _windows(long, size, first)
    if not short_rows[0] or not long_rows[0]:
        message = (
            f"text: mixed windows need documents of at most {original:,} tokens and longer ones, each kind filling at "
            f"least one row of {size:,} tokens; got {len(short):,} short ({sum(map(len, short)):,} tokens) and "
            f"{len(long):,} long ({sum(map(len, long)):,} tokens): give a .jsonl or folder with both kinds"
        )
        raise InvalidArgument("text", len(documents), message=message, leads=True)
    ids, positions, numbers = (torch.stack(s + g) for s, g in zip(short_rows, long_rows, strict=True))
    is_long = torch.zeros(len(ids), dtype=torch.bool)
    is_long[len(short_rows[0]) :] = True
    used = ids.numel()
    return MixedRows(ids, positions, numbers, is_long, sum(len(d) for d in documents) - used)


def next_token_mask(documents: torch.Tensor) -> torch.Tensor:
    """Which next-token predictions stay inside a document: ``(batch, seq)`` → ``(batch, seq − 1)`` bool."""
    return documents[:, 1:] == documents[:, :-1]
