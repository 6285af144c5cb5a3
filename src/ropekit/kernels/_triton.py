"""Triton RoPE kernel for CUDA tensors (imported only when a CUDA tensor reaches apply_rope).

One program rotates ``BLOCK_ROWS`` head vectors: it loads each row's cos/sin from the table row of its
(batch, position), so per-token positions, KV-cache offsets and packed sequences are just table contents.
Both pairings, either sequence axis, partial rotary (the pass-through dims are copied unless in place), in
place, and the conjugate rotation (the backward) are compile-time switches. Math in fp32 (fp64 for fp64
input), one rounding on store. Runs under Triton's CPU interpreter (``TRITON_INTERPRET=1``) as well, which
is how the tests check it on machines without a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_COMPUTE = {torch.float64: torch.float64}


@triton.jit
def _rope_kernel(
    x_ptr,
    y_ptr,
    cos_ptr,
    sin_ptr,
    n_rows,
    D1,
    D2,
    sx0,
    sx1,
    sx2,
    sy0,
    sy1,
    sy2,
    tab_b,
    tab_s,
    half,
    tail,
    SEQ_IS_DIM1: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    CONJUGATE: tl.constexpr,
    COPY_TAIL: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_TAIL: tl.constexpr,
):
    # int64 row ids: offsets of tensors past 2**31 elements must not wrap.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (R,)
    row_ok = rows < n_rows
    k = rows % D2
    j = (rows // D2) % D1
    b = rows // (D1 * D2)
    pos = j if SEQ_IS_DIM1 else k
    cols = tl.arange(0, BLOCK_HALF)  # (H,)
    mask = row_ok[:, None] & (cols < half)[None, :]  # (R, H)
    t_off = (b * tab_b + pos * tab_s)[:, None] + cols[None, :]  # (R, H)
    c = tl.load(cos_ptr + t_off, mask=mask, other=0.0)
    s = tl.load(sin_ptr + t_off, mask=mask, other=0.0)
    x_row = x_ptr + (b * sx0 + j * sx1 + k * sx2)[:, None]  # (R, 1) pointers
    y_row = y_ptr + (b * sy0 + j * sy1 + k * sy2)[:, None]
    if INTERLEAVED:
        first = 2 * cols[None, :]
        second = first + 1
    else:
        first = cols[None, :]
        second = first + half
    x1 = tl.load(x_row + first, mask=mask, other=0.0).to(c.dtype)
    x2 = tl.load(x_row + second, mask=mask, other=0.0).to(c.dtype)
    a = x1 * c
    bb = x2 * s
    d = x2 * c
    e = x1 * s
    if CONJUGATE:
        o1 = a + bb
        o2 = d - e
    else:
        o1 = a - bb
        o2 = d + e
    tl.store(y_row + first, o1.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_row + second, o2.to(y_ptr.dtype.element_ty), mask=mask)
    if COPY_TAIL:
        tcols = 2 * half + tl.arange(0, BLOCK_TAIL)[None, :]  # (1, T)
        tmask = row_ok[:, None] & (tcols < 2 * half + tail)
        tl.store(y_row + tcols, tl.load(x_row + tcols, mask=tmask), mask=tmask)


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def rope_into(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    out: torch.Tensor,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
    conjugate: bool,
) -> bool:
    """Rotate ``x`` into ``out`` (may be ``x``); False if the eager path must handle these inputs.

    Shapes: ``x``, ``out`` 4-D with ``seq_dim`` in (1, 2), last dim contiguous; ``cos``, ``sin``
    ``(seq, rotary_dim // 2)`` or ``(batch | 1, seq, rotary_dim // 2)`` on ``x``'s device.
    """
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.float64) or out.dtype != x.dtype:
        return False
    if x.numel() == 0:
        return True
    if x.stride(-1) != 1 or out.stride(-1) != 1:
        return False
    in_place = _shares_memory(x, out)
    if in_place and (x.data_ptr() != out.data_ptr() or x.stride() != out.stride()):
        return False  # partial overlap: the eager path computes the whole result before writing
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape, strict=True)):
        return False
    compute = _COMPUTE.get(x.dtype, torch.float32)
    cos = cos.to(compute).contiguous()
    sin = sin.to(compute).contiguous()
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)  # (1, seq, r/2)
    batch, d1, d2, head_dim = x.shape
    half = rotary_dim // 2
    tail = head_dim - rotary_dim
    n_rows = batch * d1 * d2
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    _rope_kernel[(triton.cdiv(n_rows, block_rows),)](
        x,
        out,
        cos,
        sin,
        n_rows,
        d1,
        d2,
        *x.stride()[:3],
        *out.stride()[:3],
        0 if cos.shape[0] == 1 else cos.stride(0),
        cos.stride(1),
        half,
        tail,
        SEQ_IS_DIM1=seq_dim == 1,
        INTERLEAVED=bool(interleaved),
        CONJUGATE=bool(conjugate),
        COPY_TAIL=(not in_place) and tail > 0,
        BLOCK_ROWS=block_rows,
        BLOCK_HALF=block_half,
        BLOCK_TAIL=triton.next_power_of_2(max(tail, 1)),
        num_warps=4,
    )
    return True
