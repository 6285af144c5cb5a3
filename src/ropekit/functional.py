"""Pure-torch RoPE: cos/sin tables from integer positions, and the rotation itself.

Shapes: ``x`` is ``(batch, seq, heads, head_dim)`` (``seq_dim=1``, the default) or
``(batch, heads, seq, head_dim)`` (``seq_dim=2``). ``cos``/``sin`` are ``(seq, rotary_dim // 2)`` or
``(batch, seq, rotary_dim // 2)``: one entry per rotating pair, shared by every head, so queries and keys
with different head counts (GQA) use the same tables.

Precision: angles ``position · inv_freq`` are formed in float64 (exact to ~1e-16 relative, so cos/sin are
within 1e-7 of a float64 reference at positions in the millions once rounded to fp32); the rotation runs in
fp32 (fp64 for fp64 input) and rounds once to the input dtype.
"""

from __future__ import annotations

import numpy as np
import torch

from ropekit._validate import require_float, require_int
from ropekit.kernels import apply_rope_into
from ropekit.scaling.registry import Frequencies


def _check_positions(positions: torch.Tensor) -> None:
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be an integer torch.Tensor, got {type(positions).__name__}")
    if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
        raise TypeError(f"positions must have an integer dtype, got {positions.dtype}")
    if positions.dim() not in (1, 2):
        raise ValueError(f"positions must be 1-D (seq,) or 2-D (batch, seq), got shape {tuple(positions.shape)}")
    if positions.numel() and int(positions.min()) < 0:
        raise ValueError(f"positions must be >= 0, got minimum {int(positions.min())}")


def cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor | np.ndarray | Frequencies,
    *,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``positions ⊗ inv_freq``, times ``attention_factor``.

    Args:
        positions: integer tensor ``(seq,)`` or ``(batch, seq)``, values >= 0 (KV-cache offsets, packed
            documents and left padding are just different position values).
        inv_freq: ``(rotary_dim // 2,)`` frequencies (float64 recommended), or a :class:`Frequencies`, whose
            attention factor then multiplies the one given here.
        attention_factor: multiplies cos and sin (YaRN's temperature; logits scale by its square).
        dtype: dtype of the returned tables.

    Returns:
        ``(cos, sin)``, each of shape ``positions.shape + (rotary_dim // 2,)`` on ``positions.device``.

    Precision: the angle is the float64 product of the exact integer position and the float64 frequency,
    then cos/sin are taken in float64 and cast once, so the tables stay within one rounding of ``dtype``
    at any position below 2**53.
    """
    _check_positions(positions)
    # A NaN, infinite or non-positive factor would silently poison every table.
    attention_factor = require_float("attention_factor", attention_factor, above=0.0)
    if isinstance(inv_freq, Frequencies):
        attention_factor = attention_factor * inv_freq.attention_factor
        inv_freq = inv_freq.inv_freq
    if isinstance(inv_freq, np.ndarray):
        inv_freq = torch.from_numpy(np.asarray(inv_freq, dtype=np.float64))
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.dim() != 1:
        raise ValueError(f"inv_freq must be a 1-D tensor or array, got {inv_freq!r}")
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    freqs = inv_freq.to(device=positions.device, dtype=torch.float64)
    angles = positions.to(torch.float64).unsqueeze(-1) * freqs  # (..., seq, rotary_dim/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)


def _check_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int | None, seq_dim: int) -> int:
    """Validate arguments of :func:`apply_rope`; return the rotary dim.

    This runs on every call, decode steps included, so each tensor attribute is read once (a ``.shape`` read
    costs about a microsecond in Python).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        what = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor (fp16, bf16, fp32 or fp64), got {what}")
    x_shape = x.shape
    if len(x_shape) != 4:
        raise ValueError(
            f"x must be 4-D (batch, seq, heads, head_dim) or (batch, heads, seq, head_dim), got {tuple(x_shape)}"
        )
    if seq_dim not in (1, 2):
        raise ValueError(
            f"seq_dim must be 1 for (batch, seq, heads, head_dim) or 2 for (batch, heads, seq, head_dim), got {seq_dim!r}"
        )
    for name, table in (("cos", cos), ("sin", sin)):
        if not isinstance(table, torch.Tensor) or not table.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {table!r:.60}")
    table_shape = cos.shape
    if table_shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(table_shape)} and {tuple(sin.shape)}")
    if len(table_shape) not in (2, 3):
        raise ValueError(f"cos must be (seq, rotary_dim/2) or (batch, seq, rotary_dim/2), got {tuple(table_shape)}")
    half = table_shape[-1]
    if rotary_dim is None:
        rotary_dim = 2 * half
    else:
        rotary_dim = require_int("rotary_dim", rotary_dim, minimum=2)
        if rotary_dim % 2:
            raise ValueError(f"rotary_dim must be even (dims rotate in pairs), got {rotary_dim}")
        if rotary_dim != 2 * half:
            raise ValueError(f"rotary_dim must equal 2 * cos.shape[-1] = {2 * half}, got {rotary_dim}")
    head_dim = x_shape[3]
    if rotary_dim < 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be even and in [2, head_dim={head_dim}], got {rotary_dim}")
    seq = x_shape[seq_dim]
    if table_shape[-2] != seq:
        raise ValueError(
            f"cos/sin cover {table_shape[-2]} positions but x has {seq} along seq_dim={seq_dim} (shape {tuple(x_shape)})"
        )
    if len(table_shape) == 3 and table_shape[0] != 1 and table_shape[0] != x_shape[0]:
        raise ValueError(f"cos/sin batch {table_shape[0]} does not match x batch {x_shape[0]}")
    if cos.device != x.device:
        raise ValueError(f"cos/sin are on {cos.device} but x is on {x.device}")
    return rotary_dim


def _broadcast_table(table: torch.Tensor, seq_dim: int, compute: torch.dtype) -> torch.Tensor:
    """(seq, r/2) or (batch, seq, r/2) -> 4-D view broadcasting over heads."""
    if table.dim() == 2:
        table = table.unsqueeze(0)  # (1, seq, r/2)
    table = table.unsqueeze(2) if seq_dim == 1 else table.unsqueeze(1)  # (b, seq, 1, r/2) | (b, 1, seq, r/2)
    return table.to(compute)


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, interleaved: bool, seq_dim: int
) -> torch.Tensor:
    """Rotated first ``rotary_dim`` dims of ``x`` in the compute dtype, layout as in ``x``."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    c = _broadcast_table(cos, seq_dim, compute)
    s = _broadcast_table(sin, seq_dim, compute)
    rot = x[..., :rotary_dim].to(compute)
    if interleaved:
        pairs = rot.unflatten(-1, (rotary_dim // 2, 2))  # (..., r/2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)  # (..., r)
    x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2 :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)  # (..., r)


def rope_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, interleaved: bool = False, seq_dim: int = 1
) -> torch.Tensor:
    """Unfused eager RoPE (no validation, no autograd.Function): the readable definition and test oracle."""
    rotary_dim = 2 * cos.shape[-1]
    rotated = _rotate(x, cos, sin, rotary_dim, interleaved, seq_dim).to(x.dtype)
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


class _ApplyRope(torch.autograd.Function):
    """y = R(θ) x; the backward is R(−θ) g, so only cos and sin are saved, never x."""

    @staticmethod
    def forward(ctx, x, cos, sin, rotary_dim, interleaved, seq_dim):  # type: ignore[override]
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.interleaved, ctx.seq_dim = rotary_dim, interleaved, seq_dim
        out = torch.empty_like(x)
        return apply_rope_into(x, cos, sin, out, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        cos, sin = ctx.saved_tensors
        r, interleaved, seq_dim = ctx.rotary_dim, ctx.interleaved, ctx.seq_dim
        if torch.is_grad_enabled():
            # create_graph=True: the gradient must itself be differentiable, so rotate through the Function.
            return _ApplyRope.apply(grad, cos, -sin, r, interleaved, seq_dim), None, None, None, None, None
        grad_x = torch.empty_like(grad)
        apply_rope_into(grad, cos, sin, grad_x, rotary_dim=r, interleaved=interleaved, seq_dim=seq_dim, conjugate=True)
        return grad_x, None, None, None, None, None


def apply_rope(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = False,
    rotary_dim: int | None = None,
    seq_dim: int = 1,
    out: torch.Tensor | None = None,
    inplace: bool = False,
) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` dims of each head of ``x`` by the angles in ``cos``/``sin``.

    RoFormer (arXiv 2104.09864), eq. 34: pair (x1, x2) -> (x1·cos − x2·sin, x2·cos + x1·sin).

    Args:
        x: ``(batch, seq, heads, head_dim)`` if ``seq_dim=1``, ``(batch, heads, seq, head_dim)`` if
            ``seq_dim=2``; fp16, bf16, fp32 or fp64.
        cos, sin: ``(seq, rotary_dim // 2)`` or ``(batch, seq, rotary_dim // 2)`` from :func:`cos_sin`.
        interleaved: pairs (0,1),(2,3),… (Meta/GPT-J) instead of (i, i + rotary_dim/2) (NeoX/HF).
        rotary_dim: must equal ``2 * cos.shape[-1]`` if given; dims past it are copied bit-identically.
        seq_dim: which axis of ``x`` is the sequence (explicit, never guessed).
        out: optional preallocated result buffer, same shape and dtype as ``x`` (no autograd).
        inplace: write the result into ``x`` (no autograd).

    Returns:
        The rotated tensor (``x`` itself if ``inplace``, ``out`` if given).

    Precision: math in fp32 (fp64 for fp64 input), one rounding to ``x.dtype`` at the end.
    Autograd: differentiable in ``x``; the backward rotates the gradient by −θ and saves no activations.
    """
    rotary_dim = _check_apply(x, cos, sin, rotary_dim, seq_dim)
    if inplace and out is not None:
        raise ValueError("pass either inplace=True or out=, not both")
    if inplace or out is not None:
        if torch.is_grad_enabled() and x.requires_grad:
            raise ValueError("inplace=True and out= do not support autograd; x requires grad")
        target = x if inplace else out
        if not isinstance(target, torch.Tensor) or target.shape != x.shape or target.dtype != x.dtype:
            raise ValueError(
                f"out must be a tensor with x's shape {tuple(x.shape)} and dtype {x.dtype}, got "
                f"{(tuple(target.shape), target.dtype) if isinstance(target, torch.Tensor) else target!r}"
            )
        return apply_rope_into(x, cos, sin, target, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad):
        return _ApplyRope.apply(x, cos, sin, rotary_dim, interleaved, seq_dim)
    # No graph to record: skip the autograd.Function's overhead (microseconds, most of a decode step).
    out = torch.empty_like(x)
    return apply_rope_into(x, cos, sin, out, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)


def _permute_rows(weight: torch.Tensor, head_dim: int, rotary_dim: int | None, *, inverse: bool) -> torch.Tensor:
    """Reorder the rotary rows of each head of a q/k projection (see :func:`interleaved_to_half_split`)."""
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        what = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise TypeError(f"weight must be a 2-D (out_features, in_features) or 1-D bias tensor, got {what}")
    head_dim = require_int("head_dim", head_dim, minimum=2)
    rotary_dim = head_dim if rotary_dim is None else require_int("rotary_dim", rotary_dim, minimum=2)
    if rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be even and in [2, head_dim={head_dim}], got {rotary_dim}")
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
