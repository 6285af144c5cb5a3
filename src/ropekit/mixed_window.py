"""Mixed-window training's two rules: which RoPE a sequence gets, and which tokens a token sees.

LongRoPE2 (Shang et al. 2025, arXiv 2502.20082, §3.3) trains every sequence at the target length. Short documents
are packed with their position ids reset per document, so no position reaches the original length L0; long documents
keep positions past it. The RoPE then picks per sequence:

    long_factor  if  max(position_ids) + 1 > L0,  else  short_factor

(microsoft/nnscaler ``examples/longrope2/rope_modifier.py``; LongRoPE2's short list is all 1.0, the original RoPE).
The attention factor is the one the ``longrope`` config states, for both lists, as transformers and nnscaler apply
it. :class:`MixedWindowRotary` makes that choice for each sequence of a batch on its own (nnscaler takes the maximum
over the whole batch; with one sequence per batch, as there, the two are the same), by
:meth:`ropekit.scaling.longrope.LongRopeScaling.uses_long_factor`, the rule every ``longrope`` table in ropekit uses.

Packed documents must not see each other: :func:`document_mask` is the causal mask restricted to each document,
from per-token document numbers (not from position resets, which PoSE's skipping positions would fake).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument
from ropekit.functional import apply_rope_qk
from ropekit.module import RotaryEmbedding
from ropekit.scaling.longrope import LongRopeScaling

__all__ = ["MixedWindowRotary", "document_mask", "mixed_window_scaling"]


def mixed_window_scaling(scaling: object) -> LongRopeScaling:
    """``scaling`` as mixed-window training needs it: a ``longrope`` config whose short list is what short sequences
    get. Equal lists (the form ropekit writes static per-pair factors in) become ``short_factor = 1.0`` for every
    pair, the original RoPE, as in LongRoPE2.

    Raises:
        ValueError: ``scaling`` is not a ``longrope`` config (naming what it is), or freezes the choice
            (``fixed_seq_len``), which leaves nothing to switch.
    """
    if not isinstance(scaling, LongRopeScaling):
        name = "plain RoPE" if scaling is None else getattr(scaling, "rope_type", type(scaling).__name__)
        message = (
            f"mixed_window needs a longrope scaling (short_factor for sequences within the original length, "
            f"long_factor beyond it), got {name}"
        )
        raise InvalidArgument("mixed_window", True, allowed="a longrope scaling", message=message)
    if scaling.fixed_seq_len is not None:
        fixed = scaling.fixed_seq_len
        raise InvalidArgument(
            "mixed_window",
            True,
            message=lambda n: (
                f"{n('mixed_window')} switches lists by each sequence's positions; {n('fixed_seq_len', fixed)} "
                f"freezes the choice: leave {n('fixed_seq_len')} out"
            ),
        )
    if scaling.short_factor == scaling.long_factor:
        return dataclasses.replace(scaling, short_factor=(1.0,) * len(scaling.long_factor))
    return scaling


class MixedWindowRotary(nn.Module):
    """A rotary embedding that gives each sequence of a batch the short or the long list of a ``longrope`` config.

    Drop-in for :class:`ropekit.RotaryEmbedding` where positions are ``(batch, seq)``: ``cos_sin(positions)`` and
    ``forward(q, k, positions)``. The two tables come from two frozen copies of the config (``fixed_seq_len`` at L0
    and L0 + 1), so neither recomputes as lengths change.

    Args:
        rope: a RoPE whose scaling is a :class:`~ropekit.scaling.longrope.LongRopeScaling` without ``fixed_seq_len``.
        max_positions: as :class:`ropekit.RotaryEmbedding`'s.

    Shapes:
        positions ``(batch, seq)`` (or ``(seq,)``: one sequence) → cos, sin ``positions.shape + (rotary_dim // 2,)``.
    """

    def __init__(self, rope: RopeConfig, *, max_positions: int | None = None) -> None:
        super().__init__()
        spec = rope.scaling
        if not isinstance(spec, LongRopeScaling) or spec.fixed_seq_len is not None:
            mixed_window_scaling(spec)  # raises the error that says why
        self.config = rope
        self.spec = spec
        original = spec.original_max_position_embeddings
        self.short = RotaryEmbedding(
            dataclasses.replace(rope, scaling=dataclasses.replace(spec, fixed_seq_len=original)),
            max_positions=max_positions,
        )
        self.long = RotaryEmbedding(
            dataclasses.replace(rope, scaling=dataclasses.replace(spec, fixed_seq_len=original + 1)),
            max_positions=max_positions,
        )

    @property
    def frequencies(self):
        """The long list's frequencies (what the written checkpoint runs beyond L0)."""
        return self.long.frequencies

    @property
    def rotary_dim(self) -> int:
        return self.long.rotary_dim

    def long_rows(self, positions: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``(batch,)`` bool: which sequences take the long list (``max(position_ids) + 1 > L0``, or ``lengths > L0``
        where the rows' whole lengths are given: a shard of a sharded row decides by its row, not by itself)."""
        rows = positions.reshape(-1, positions.shape[-1]) if positions.dim() else positions.reshape(1, 1)
        if lengths is not None:
            decided = [int(n) for n in lengths.reshape(-1).tolist()]
            if len(decided) != rows.shape[0]:
                raise ValueError(f"lengths must give one length per sequence ({rows.shape[0]}), got {len(decided)}")
        else:
            largest = rows.amax(dim=-1).tolist() if rows.shape[-1] else [-1] * rows.shape[0]
            decided = [int(m) + 1 for m in largest]
        return torch.tensor([self.spec.uses_long_factor(n) for n in decided], dtype=torch.bool)

    def cos_sin(
        self,
        positions: torch.Tensor,
        *,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
        lengths: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tables for ``positions``, each sequence from its own list (see the class docstring); ``lengths``
        ``(batch,)``: each row's whole length, where ``positions`` are a shard of it."""
        device = device or positions.device
        long = self.long_rows(positions, lengths).to(device)  # (batch,)
        cos_s, sin_s = self.short.cos_sin(positions, device=device, dtype=dtype)
        cos_l, sin_l = self.long.cos_sin(positions, device=device, dtype=dtype)
        pick = long.view(-1, *([1] * (cos_s.dim() - 1))) if positions.dim() == 2 else long.view(*([1] * cos_s.dim()))
        return torch.where(pick, cos_l, cos_s), torch.where(pick, sin_l, sin_s)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, seq_dim: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` (``(batch, seq, heads, head_dim)`` with ``seq_dim=1``) at ``positions``."""
        table_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(positions, device=q.device, dtype=table_dtype)
        return apply_rope_qk(q, k, cos, sin, interleaved=self.config.interleaved, seq_dim=seq_dim)


def document_mask(documents: torch.Tensor) -> torch.Tensor:
    """The causal mask within documents: token ``i`` sees token ``j`` iff ``j <= i`` and both are in one document.

    Args:
        documents: ``(batch, seq)`` integer document numbers (any values; equal = same document).

    Returns:
        ``(batch, 1, seq, seq)`` bool, True where attention is allowed (``scaled_dot_product_attention``'s
        convention, and transformers' for a 4-D mask with sdpa).
    """
    seq = documents.shape[-1]
    causal = torch.ones(seq, seq, dtype=torch.bool, device=documents.device).tril()  # (seq, seq)
    same = documents[:, :, None] == documents[:, None, :]  # (batch, seq, seq)
    return (same & causal)[:, None]  # (batch, 1, seq, seq)
