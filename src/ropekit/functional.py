"""Pure-torch RoPE: cos/sin tables from integer positions, and the rotation itself.

Shapes: ``x`` is ``(batch, seq, heads, head_dim)`` (``seq_dim=1``, the default) or
``(batch, heads, seq, head_dim)`` (``seq_dim=2``). ``cos``/``sin`` are ``(seq, rotary_dim // 2)`` or
``(batch, seq, rotary_dim // 2)``: one entry per rotating pair, shared by every head, so queries and keys
with different head counts (GQA) use the same tables.

Precision: angles ``position · inv_freq`` are reduced exactly enough that cos/sin are within 2e-9 (absolute)
of the exact value for every int64 position (see :func:`cos_sin`), so fp32 tables are one rounding from exact
even at positions near 2**63; the rotation runs in fp32 (fp64 for fp64 input) and rounds once to the input
dtype.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction
from numbers import Integral

import numpy as np
import torch

from ropekit._validate import require_float, require_int
from ropekit.kernels import apply_rope_into, fast_qk
from ropekit.kernels.reference import rope_reference
from ropekit.scaling.registry import Frequencies

__all__ = [
    "apply_rope",
    "apply_rope_qk",
    "cos_sin",
    "half_split_to_interleaved",
    "interleaved_to_half_split",
    "rope_reference",
]

#: 2π to 100 digits: exact enough to reduce 2**48 · inv_freq modulo 2π with error far below float64 spacing.
_TWO_PI = Fraction(
    Decimal("6.283185307179586476925286766559005768394338798750211641949889184615632812572417997256069650684234136")
)
#: positions below 2**24 use the plain float64 product (error below 2e-9 rad); above, the bits from 24 on are
#: split into 16-bit chunks whose phases are reduced modulo 2π exactly (see :func:`_angles`).
_LOW_BITS = 24
_CHUNK_BITS = 16
_SIGNED_OR_BYTE = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_WIDE_UNSIGNED = tuple(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name))


def _check_positions(positions: torch.Tensor, name: str = "positions") -> tuple[torch.Tensor, int | None]:
    """Validate integer positions; return them (wide unsigned types as int64) and their maximum.

    The maximum is ``None`` for an empty tensor or a meta tensor (no values to read).
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(positions).__name__}")
    dtype = positions.dtype
    if dtype in _WIDE_UNSIGNED:
        positions = positions.to(torch.int64)  # values >= 2**63 wrap negative and are refused below
    elif dtype not in _SIGNED_OR_BYTE:
        raise TypeError(f"{name} must have an integer dtype, got {dtype} (allowed: int8/16/32/64, uint8/16/32/64)")
    if positions.dim() not in (1, 2):
        raise ValueError(f"{name} must be 1-D (seq,) or 2-D (batch, seq), got shape {tuple(positions.shape)}")
    if positions.is_meta or positions.numel() == 0:
        return positions, None
    low, high = torch.aminmax(positions)
    if int(low) < 0:
        raise ValueError(f"{name} must be >= 0, got minimum {int(low)}")
    return positions, int(high)


def _check_inv_freq(inv_freq: object) -> torch.Tensor:
    """``inv_freq`` as a float64 tensor, refusing what would silently poison the tables."""
    if isinstance(inv_freq, np.ndarray):
        if inv_freq.dtype == np.bool_ or not np.issubdtype(inv_freq.dtype, np.number):
            raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
        if np.iscomplexobj(inv_freq):
            raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
        inv_freq = torch.from_numpy(np.asarray(inv_freq, dtype=np.float64))
    if not isinstance(inv_freq, torch.Tensor):
        raise TypeError(f"inv_freq must be a 1-D tensor, a numpy array or a Frequencies, got {type(inv_freq).__name__}")
    if inv_freq.dtype == torch.bool or inv_freq.is_complex():
        raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
    if inv_freq.dim() != 1 or inv_freq.numel() == 0:
        raise ValueError(f"inv_freq must be 1-D with one entry per rotating pair, got shape {tuple(inv_freq.shape)}")
    freqs = inv_freq.to(torch.float64)
    if not freqs.is_meta:
        bad = ~torch.isfinite(freqs) | (freqs < 0)
        if bool(bad.any()):
            value = float(freqs[bad][0])
            raise ValueError(f"inv_freq must be finite and >= 0 (0 = a pair that does not rotate), got {value}")
    return freqs


@functools.lru_cache(maxsize=32)
def _chunk_phases(freq_bytes: bytes, levels: int) -> np.ndarray:
    """``(2**s_j · f) mod 2π`` for the chunk shifts ``s_j = 24 + 16 j`` (j < levels) and every frequency ``f``.

    Each is the float64 nearest the exact value, computed with exact rationals (``f`` is a float64, so
    ``2**s · f`` is exact) once per set of frequencies.
    """
    freqs = np.frombuffer(freq_bytes, dtype=np.float64)
    phases = np.empty((levels, len(freqs)), dtype=np.float64)
    for j in range(levels):
        scale = 1 << (_LOW_BITS + _CHUNK_BITS * j)
        for i, f in enumerate(freqs.tolist()):
            x = Fraction(f) * scale
            phases[j, i] = float(x - math.floor(x / _TWO_PI) * _TWO_PI)
    return phases


def _angles(positions: torch.Tensor, freqs: torch.Tensor, largest: int) -> torch.Tensor:
    """``positions ⊗ freqs`` up to multiples of 2π, within 2e-9 rad of exact for every int64 position (f <= 1).

    A float64 product ``p · f`` is off by up to ``p · f · 2**-53`` (3e-5 rad at p = 2**40, all meaning lost
    past 2**53). So only the low 24 bits of a position use the plain product (bit for bit what the product of
    the whole position gives below 2**24); the bits above go in 16-bit chunks ``a_j`` whose phases
    ``(2**s_j f) mod 2π`` were reduced exactly beforehand: each ``a_j · phase_j`` is below 2**19 and rounds by
    under 1e-10.
    """
    positions = positions.to(torch.int64)
    if largest < (1 << _LOW_BITS):
        return positions.to(torch.float64).unsqueeze(-1) * freqs  # (..., seq, rotary_dim/2)
    levels = -(-(largest.bit_length() - _LOW_BITS) // _CHUNK_BITS)
    phases = torch.from_numpy(_chunk_phases(freqs.cpu().numpy().tobytes(), levels)).to(freqs.device)
    angles = (positions & ((1 << _LOW_BITS) - 1)).to(torch.float64).unsqueeze(-1) * freqs
    mask = (1 << _CHUNK_BITS) - 1
    for j in range(levels):
        chunk = (positions >> (_LOW_BITS + _CHUNK_BITS * j)) & mask  # (..., seq)
        angles = angles + chunk.to(torch.float64).unsqueeze(-1) * phases[j]
    return angles


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
            documents and left padding are just different position values). Any int64 value is exact.
        inv_freq: ``(rotary_dim // 2,)`` frequencies, finite and >= 0 (float64 recommended), or a
            :class:`Frequencies`, whose attention factor then multiplies the one given here.
        attention_factor: multiplies cos and sin (YaRN's temperature; logits scale by its square); > 0.
        dtype: floating dtype of the returned tables.

    Returns:
        ``(cos, sin)``, each of shape ``positions.shape + (rotary_dim // 2,)`` on ``positions.device``.

    Precision: the angle ``p · f`` (``f`` the float64 frequency, at most 1 for plain RoPE) is formed modulo 2π
    with an absolute error below 2e-9 for every int64 position ``p`` (the bits of ``p`` from 2**24 up are
    split into 16-bit chunks whose phases are reduced exactly, see :func:`_angles`); cos/sin are taken in
    float64 and cast once. fp32 tables are therefore within one fp32 rounding (plus 2e-9) of exact at any
    position, 2**40 and 2**62 included; float64 tables are float64-exact up to ``p · 2**-53`` below 2**24 and
    within 2e-9 above.
    """
    positions, largest = _check_positions(positions)
    # A NaN, infinite or non-positive factor would silently poison every table.
    attention_factor = require_float("attention_factor", attention_factor, above=0.0)
    if isinstance(inv_freq, Frequencies):
        attention_factor = attention_factor * require_float(
            "Frequencies.attention_factor", inv_freq.attention_factor, above=0.0
        )
        inv_freq = inv_freq.inv_freq
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype, got {dtype!r} (a torch.dtype such as torch.float32)")
    freqs = _check_inv_freq(inv_freq)
    if largest is None:  # empty or meta positions: shapes only
        shape = (*positions.shape, freqs.shape[0])
        return (
            torch.empty(shape, dtype=dtype, device=positions.device),
            torch.empty(shape, dtype=dtype, device=positions.device),
        )
    angles = _angles(positions, freqs.to(positions.device), largest)  # (..., seq, rotary_dim/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)


def _require_flag(name: str, value: object) -> bool:
    if value is not True and value is not False:
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def _check_tables(cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int | None) -> tuple[tuple[int, ...], int]:
    """Validate cos/sin against each other; return their shape and the rotary dim."""
    for name, table in (("cos", cos), ("sin", sin)):
        if not isinstance(table, torch.Tensor) or not table.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {table!r:.60}")
    table_shape = cos.shape
    if table_shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(table_shape)} and {tuple(sin.shape)}")
    if len(table_shape) not in (2, 3):
        raise ValueError(f"cos must be (seq, rotary_dim/2) or (batch, seq, rotary_dim/2), got {tuple(table_shape)}")
    if cos.device != sin.device:
        raise ValueError(f"cos and sin must be on one device, got {cos.device} and {sin.device}")
    half = table_shape[-1]
    if rotary_dim is None:
        rotary_dim = 2 * half
    else:
        rotary_dim = require_int("rotary_dim", rotary_dim, minimum=2)
        if rotary_dim % 2:
            raise ValueError(f"rotary_dim must be even (dims rotate in pairs), got {rotary_dim}")
        if rotary_dim != 2 * half:
            raise ValueError(f"rotary_dim must equal 2 * cos.shape[-1] = {2 * half}, got {rotary_dim}")
    return table_shape, rotary_dim


def _check_x(name: str, x: torch.Tensor, table_shape: tuple[int, ...], table_device, rotary_dim: int, seq_dim: int):
    """Validate one input tensor against the (already checked) tables; messages call it x and name ``name``."""
    where = "" if name == "x" else f" (x is {name} here)"
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        what = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor (fp16, bf16, fp32 or fp64), got {what}{where}")
    x_shape = x.shape
    if len(x_shape) != 4:
        raise ValueError(
            f"x must be 4-D (batch, seq, heads, head_dim) or (batch, heads, seq, head_dim), got {tuple(x_shape)}{where}"
        )
    head_dim = x_shape[3]
    if rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be even and in [2, head_dim={head_dim}], got {rotary_dim}{where}")
    seq = x_shape[seq_dim]
    if table_shape[-2] != seq:
        raise ValueError(
            f"cos/sin cover {table_shape[-2]} positions but x has {seq} along seq_dim={seq_dim} "
            f"(shape {tuple(x_shape)}){where}"
        )
    if len(table_shape) == 3 and table_shape[0] != 1 and table_shape[0] != x_shape[0]:
        raise ValueError(f"cos/sin batch {table_shape[0]} does not match x batch {x_shape[0]}{where}")
    if table_device != x.device:
        raise ValueError(f"cos/sin are on {table_device} but x is on {x.device}{where}")


def _check_seq_dim(seq_dim: object) -> int:
    # True, 1.0 and '1' compare equal to an axis or hash like one, but are not axes.
    is_int = type(seq_dim) is int or (isinstance(seq_dim, Integral) and not isinstance(seq_dim, bool))
    if not is_int or seq_dim not in (1, 2):
        raise ValueError(
            f"seq_dim must be 1 for (batch, seq, heads, head_dim) or 2 for (batch, heads, seq, head_dim), got {seq_dim!r}"
        )
    return int(seq_dim)  # type: ignore[arg-type]


def _check_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int | None, seq_dim: int) -> int:
    """Validate arguments of :func:`apply_rope`; return the rotary dim.

    This runs on every call, decode steps included, so each tensor attribute is read once (a ``.shape`` read
    costs about a microsecond in Python).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        what = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor (fp16, bf16, fp32 or fp64), got {what}")
    seq_dim = _check_seq_dim(seq_dim)
    table_shape, rotary_dim = _check_tables(cos, sin, rotary_dim)
    _check_x("x", x, table_shape, cos.device, rotary_dim, seq_dim)
    return rotary_dim


def _has_overlap(t: torch.Tensor) -> bool:
    """True when two indices of ``t`` may address one element (an expanded or otherwise self-overlapping view)."""
    dims = sorted((stride, size) for stride, size in zip(t.stride(), t.shape, strict=True) if size > 1)
    extent = 1
    for stride, size in dims:
        if stride < extent:
            return True
        extent = stride * size
    return False


def _check_target(name: str, target: object, x: torch.Tensor, tables_need_grad: bool) -> torch.Tensor:
    """Validate an in-place or ``out=`` destination for ``x``."""
    if torch.is_grad_enabled() and (x.requires_grad or tables_need_grad):
        what = "x requires grad" if x.requires_grad else "cos/sin require grad"
        raise ValueError(f"inplace=True and out= do not support autograd; {what} (use the out-of-place call)")
    if not isinstance(target, torch.Tensor) or target.shape != x.shape or target.dtype != x.dtype:
        got = (tuple(target.shape), target.dtype) if isinstance(target, torch.Tensor) else target
        raise ValueError(
            f"{name} must be a tensor with x's shape {tuple(x.shape)} and dtype {x.dtype}, got {got!r:.80}"
        )
    if target.device != x.device:
        raise ValueError(f"{name} must be on x's device {x.device}, got {target.device}")
    if target.is_inference() and not torch.is_inference_mode_enabled():
        # torch's own in-place ops raise this too, but only after writing; refuse before touching the tensor.
        raise RuntimeError(
            f"Inplace update to inference tensor outside InferenceMode is not allowed ({name}); "
            "clone it first or call inside torch.inference_mode()"
        )
    if _has_overlap(target):
        raise ValueError(
            f"{name} has elements that share memory (an expanded or overlapping view, strides {target.stride()}); "
            "writing a rotation into it would be ambiguous; pass a contiguous tensor or use the out-of-place call"
        )
    return target


def _table_grads(
    grad: torch.Tensor, x: torch.Tensor, table: torch.Tensor, rotary_dim: int, interleaved: bool, seq_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """∂L/∂cos and ∂L/∂sin for y = R(θ) x: per pair, dc = g1·x1 + g2·x2 and ds = g2·x1 − g1·x2.

    Summed over heads (and over the batch when the tables are shared), returned in the tables' dtype.
    """
    compute = torch.float64 if x.dtype == torch.float64 or table.dtype == torch.float64 else torch.float32
    g, xr = grad[..., :rotary_dim].to(compute), x[..., :rotary_dim].to(compute)
    if interleaved:
        g1, g2, x1, x2 = g[..., 0::2], g[..., 1::2], xr[..., 0::2], xr[..., 1::2]
    else:
        h = rotary_dim // 2
        g1, g2, x1, x2 = g[..., :h], g[..., h:], xr[..., :h], xr[..., h:]
    head_axis = 2 if seq_dim == 1 else 1
    dc = (g1 * x1 + g2 * x2).sum(head_axis)  # (batch, seq, r/2)
    ds = (g2 * x1 - g1 * x2).sum(head_axis)
    if table.dim() == 2:
        dc, ds = dc.sum(0), ds.sum(0)  # (seq, r/2): one table shared by the batch
    elif table.shape[0] == 1:
        dc, ds = dc.sum(0, keepdim=True), ds.sum(0, keepdim=True)
    return dc.to(table.dtype), ds.to(table.dtype)


class _ApplyRope(torch.autograd.Function):
    """y = R(θ) x; the backward is R(−θ) g, so only cos and sin are saved (and x only when they need grads)."""

    @staticmethod
    def forward(ctx, x, cos, sin, rotary_dim, interleaved, seq_dim):  # type: ignore[override]
        tables_need_grad = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.save_for_backward(cos, sin, x if tables_need_grad else None)
        ctx.rotary_dim, ctx.interleaved, ctx.seq_dim = rotary_dim, interleaved, seq_dim
        out = torch.empty_like(x)
        return apply_rope_into(x, cos, sin, out, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        cos, sin, x = ctx.saved_tensors
        r, interleaved, seq_dim = ctx.rotary_dim, ctx.interleaved, ctx.seq_dim
        grad_cos = grad_sin = grad_x = None
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            grad_cos, grad_sin = _table_grads(grad, x, cos, r, interleaved, seq_dim)
        if ctx.needs_input_grad[0]:
            if torch.is_grad_enabled():
                # create_graph=True: the gradient must itself be differentiable, so rotate through the Function.
                grad_x = _ApplyRope.apply(grad, cos, -sin, r, interleaved, seq_dim)
            else:
                grad_x = torch.empty_like(grad)
                apply_rope_into(
                    grad, cos, sin, grad_x, rotary_dim=r, interleaved=interleaved, seq_dim=seq_dim, conjugate=True
                )
        return grad_x, grad_cos, grad_sin, None, None, None


def _plain_call(x: object, cos: object, sin: object, interleaved: object, seq_dim: object, inplace: object) -> bool:
    """True when the C++ entry may take the whole call (plain tensors and flags of the right types).

    The entry re-checks every shape, device and autograd rule and declines anything unusual, so all error
    messages come from the Python checks below it; this keeps a decode step to one cheap call.
    """
    return (
        type(x) is torch.Tensor
        and type(cos) is torch.Tensor
        and type(sin) is torch.Tensor
        and type(seq_dim) is int
        and (interleaved is True or interleaved is False)
        and (inplace is True or inplace is False)
    )


def _rope_one(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
    target: torch.Tensor | None,
    tables_need_grad: bool,
) -> torch.Tensor:
    """Rotate one validated tensor: into ``target``, through autograd, or into a fresh tensor."""
    if target is not None:
        return apply_rope_into(x, cos, sin, target, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)
    if torch.is_grad_enabled() and (x.requires_grad or tables_need_grad):
        return _ApplyRope.apply(x, cos, sin, rotary_dim, interleaved, seq_dim)
    # No graph to record: skip the autograd.Function's overhead (microseconds, most of a decode step).
    out = torch.empty_like(x)
    return apply_rope_into(x, cos, sin, out, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim)


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
        interleaved: pairs (0,1),(2,3),… (Meta/GPT-J) instead of (i, i + rotary_dim/2) (NeoX/HF); a bool.
        rotary_dim: must equal ``2 * cos.shape[-1]`` if given; dims past it are copied bit-identically.
        seq_dim: which axis of ``x`` is the sequence, 1 or 2 (explicit, never guessed).
        out: optional preallocated result buffer, same shape, dtype and device as ``x`` (no autograd).
        inplace: write the result into ``x`` (no autograd); a bool.

    Returns:
        The rotated tensor (``x`` itself if ``inplace``, ``out`` if given).

    Precision: math in fp32 (fp64 for fp64 input), one rounding to ``x.dtype`` at the end.
    Autograd: differentiable in ``x`` (the backward rotates the gradient by −θ and saves no activations) and in
    ``cos``/``sin`` when they require grad (then ``x`` is saved). In-place writes bump ``x``'s version counter,
    so autograd detects them as it does torch's own in-place ops.
    """
    if (
        rotary_dim is None
        and (out is None or type(out) is torch.Tensor)
        and _plain_call(x, cos, sin, interleaved, seq_dim, inplace)
    ):
        fast = fast_qk()
        if fast is not None:
            done, result, _ = fast(x, None, cos, sin, interleaved, seq_dim, inplace, out)
            if done:
                return result
    interleaved = _require_flag("interleaved", interleaved)
    inplace = _require_flag("inplace", inplace)
    rotary_dim = _check_apply(x, cos, sin, rotary_dim, seq_dim)
    tables_need_grad = cos.requires_grad or sin.requires_grad
    target = None
    if inplace or out is not None:
        if inplace and out is not None:
            raise ValueError("pass either inplace=True or out=, not both")
        target = _check_target("inplace=True" if inplace else "out", x if inplace else out, x, tables_need_grad)
    return _rope_one(x, cos, sin, rotary_dim, interleaved, seq_dim, target, tables_need_grad)


def apply_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = False,
    rotary_dim: int | None = None,
    seq_dim: int = 1,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys with one set of tables in one call (one argument check, one dispatch).

    The same as ``(apply_rope(q, cos, sin, ...), apply_rope(k, cos, sin, ...))``, bit for bit, with the table
    checks done once: the per-call Python cost of a decode step is paid once instead of twice.

    Args:
        q: ``(batch, seq, q_heads, head_dim)`` (``seq_dim=1``) or ``(batch, q_heads, seq, head_dim)``.
        k: the same layout with ``kv_heads`` heads (GQA: may differ from ``q_heads``) and possibly another
            ``head_dim`` (both at least ``rotary_dim``).
        cos, sin: ``(seq, rotary_dim // 2)`` or ``(batch, seq, rotary_dim // 2)`` from :func:`cos_sin`.
        interleaved, rotary_dim, seq_dim: as in :func:`apply_rope`.
        inplace: write each result into its input (no autograd).

    Returns:
        ``(q_rotated, k_rotated)`` (``q`` and ``k`` themselves if ``inplace``).

    Precision and autograd: as :func:`apply_rope`.
    """
    if rotary_dim is None and type(k) is torch.Tensor and _plain_call(q, cos, sin, interleaved, seq_dim, inplace):
        fast = fast_qk()
        if fast is not None:
            done, q_out, k_out = fast(q, k, cos, sin, interleaved, seq_dim, inplace, None)
            if done:
                return q_out, k_out
    interleaved = _require_flag("interleaved", interleaved)
    inplace = _require_flag("inplace", inplace)
    seq_dim = _check_seq_dim(seq_dim)
    table_shape, rotary_dim = _check_tables(cos, sin, rotary_dim)
    _check_x("q", q, table_shape, cos.device, rotary_dim, seq_dim)
    _check_x("k", k, table_shape, cos.device, rotary_dim, seq_dim)
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"q and k must have the same batch size, got {q.shape[0]} and {k.shape[0]}")
    tables_need_grad = cos.requires_grad or sin.requires_grad
    q_target = k_target = None
    if inplace:
        q_target = _check_target("inplace=True", q, q, tables_need_grad)
        k_target = _check_target("inplace=True", k, k, tables_need_grad)
    return (
        _rope_one(q, cos, sin, rotary_dim, interleaved, seq_dim, q_target, tables_need_grad),
        _rope_one(k, cos, sin, rotary_dim, interleaved, seq_dim, k_target, tables_need_grad),
    )


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
