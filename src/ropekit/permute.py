"""Converting q/k projection weights between the interleaved (Meta) and half-split (Hugging Face) pairings."""

from __future__ import annotations

import torch

from ropekit._validate import require_int, require_rotary_dim

__all__ = ["half_split_to_interleaved", "interleaved_to_half_split"]


def _permute_rows(weight: torch.Tensor, head_dim: int, rotary_dim: int | None, *, inverse: bool) -> torch.Tensor:
    """Reorder the rotary rows of each head of a q/k projection (see :func:`interleaved_to_half_split`)."""
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        what = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise TypeError(f"weight must be a 2-D (out_features, in_features) or 1-D bias tensor, got {what}")
    head_dim = require_int("head_dim", head_dim, minimum=2)
    rotary_dim = require_rotary_dim("rotary_dim", head_dim if rotary_dim is None else rotary_dim, head_dim=head_dim)
    if weight.shape[0] % head_dim:
        raise ValueError(f"weight.shape[0]={weight.shape[0]} is not a multiple of head_dim={head_dim}")
    # Half-split row j < r/2 holds interleaved row 2j and row r/2 + j holds row 2j + 1: the same pair, the same
    # frequency, so q·k is unchanged when q and k are both permuted (meta-llama's convert_llama_weights_to_hf).
    order = torch.cat(
        (
            torch.arange(0, rotary_dim, 2),
            torch.arange(1, rotary_dim, 2),
            torch.arange(rotary_dim, head_dim),
        )
    )  # (head_dim,)
    if inverse:
        order = torch.argsort(order)
    heads = weight.unflatten(0, (weight.shape[0] // head_dim, head_dim))  # (heads, head_dim[, in_features])
    return heads[:, order.to(weight.device)].flatten(0, 1)  # (heads * head_dim[, in_features])


def interleaved_to_half_split(weight: torch.Tensor, head_dim: int, *, rotary_dim: int | None = None) -> torch.Tensor:
    """Convert a q or k projection from the interleaved pairing to the half-split pairing.

    Meta's checkpoints rotate pairs (0,1),(2,3),… (RoFormer, arXiv 2104.09864, eq. 34); Hugging Face's
    ``rotate_half`` rotates (i, i + rotary_dim/2). Permuting the output rows of the q and k projections makes a
    model written for one run with the other and give the same attention scores. Apply it to both q and k
    (never v, never o); a wrong or missing permutation is silent, so check scores after converting.

    Args:
        weight: ``(heads * head_dim, in_features)`` (``nn.Linear.weight``) or a ``(heads * head_dim,)`` bias.
        head_dim: size of one head.
        rotary_dim: rotating dims per head (default ``head_dim``); rows past it stay in place.

    Returns:
        A new tensor of the same shape with the rotary rows of every head reordered.
    """
    return _permute_rows(weight, head_dim, rotary_dim, inverse=False)


def half_split_to_interleaved(weight: torch.Tensor, head_dim: int, *, rotary_dim: int | None = None) -> torch.Tensor:
    """The inverse of :func:`interleaved_to_half_split` (Hugging Face layout back to Meta's).

    Args:
        weight: ``(heads * head_dim, in_features)`` or ``(heads * head_dim,)``.
        head_dim: size of one head.
        rotary_dim: rotating dims per head (default ``head_dim``).

    Returns:
        A new tensor of the same shape.
    """
    return _permute_rows(weight, head_dim, rotary_dim, inverse=True)
