"""RoPE on every shard of a sharded sequence: the length-following choices made by the whole row, not by the shard.

transformers picks LongRoPE's short or long list, and dynamic NTK's base, from ``max(position_ids) + 1`` of the
current forward (``modeling_rope_utils.dynamic_rope_update``); ropekit's own tables follow the same rule
(:meth:`ropekit.RotaryEmbedding.cos_sin`, :class:`ropekit.mixed_window.MixedWindowRotary`). Under sequence
parallelism each rank's rotary module sees only its shard's position ids, so for ``L0 < N ≤ sp·L0`` the early ranks
would rotate with the short list (or the original base) and the late ranks with the long one: one row, two RoPEs.

:func:`sequence_lengths` gives ropekit's patched rotary modules
(:class:`ropekit.integrations.hf.patch_rope.HFRotaryAdapter`) each row's whole length for the forward it wraps, so
every shard makes the choice the unsharded row makes. :func:`row_lengths` is that length, read from the row before it is sharded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def row_lengths(position_ids: torch.Tensor) -> torch.Tensor:
    """Each row's length as the length-following rules read it: ``max(position_ids) + 1`` of the whole row.

    Shapes:
        position_ids ``(batch, seq)`` → ``(batch,)`` int64.
    """
    return position_ids.amax(dim=-1).to(torch.int64) + 1


@contextmanager
def sequence_lengths(model: nn.Module, lengths: torch.Tensor | None) -> Iterator[None]:
    """Within the block, ``model``'s patched rotary modules decide by ``lengths`` (``(batch,)``, each row's whole
    length) instead of the position ids they are called with; ``None`` leaves them as they are.

    Raises:
        ValueError: ``model`` has no rotary module patched by
            :func:`ropekit.integrations.hf.patch_rope.apply_scaling` (transformers' own modules decide by the shard,
            and nothing can tell them otherwise).
    """
    from ropekit.integrations.hf.patch_rope import HFRotaryAdapter

    adapters = [m for m in model.modules() if isinstance(m, HFRotaryAdapter)]
    if lengths is not None and not adapters:
        raise ValueError(
            f"{type(model).__name__}'s rotary modules are transformers' own, which pick LongRoPE's list and dynamic "
            "NTK's base from each shard's positions: apply ropekit's scaling (apply_scaling) before sharding"
        )
    previous = [a.lengths for a in adapters]
    for adapter in adapters:
        adapter.lengths = lengths
    try:
        yield
    finally:
        for adapter, value in zip(adapters, previous, strict=True):
            adapter.lengths = value
