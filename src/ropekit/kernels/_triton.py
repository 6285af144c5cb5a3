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
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


@triton.jit
def _rotate_rows(
    x_ptr,
    y_ptr,
    cos_ptr,
    sin_ptr,
    rows,
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
    BLOCK_HALF: tl.constexpr,
    BLOCK_TAIL: tl.constexpr,
):
    """Rotate head vectors ``rows`` (int64 ids of (batch, dim1, dim2)) of x into y."""
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
    _rotate_rows(
        x_ptr, y_ptr, cos_ptr, sin_ptr, rows, n_rows, D1, D2, sx0, sx1, sx2, sy0, sy1, sy2, tab_b, tab_s, half, tail,
        SEQ_IS_DIM1, INTERLEAVED, CONJUGATE, COPY_TAIL, BLOCK_HALF, BLOCK_TAIL,
    )  # fmt: skip


@triton.jit
def _rope_qk_kernel(
    q_ptr,
    qy_ptr,
    k_ptr,
    ky_ptr,
    cos_ptr,
    sin_ptr,
    nq_rows,
    nk_rows,
    D1Q,
    D2Q,
    D1K,
    D2K,
    sq0,
    sq1,
    sq2,
    sqy0,
    sqy1,
    sqy2,
    sk0,
    sk1,
    sk2,
    sky0,
    sky1,
    sky2,
    tab_b,
    tab_s,
    half,
    tail_q,
    tail_k,
    SEQ_IS_DIM1: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    COPY_TAIL: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_TAIL: tl.constexpr,
):
    """q and k in one launch: axis 1 of the grid picks the tensor, axis 0 the block of head vectors.

    ``D1*``/``D2*`` are dims 1 and 2 of each tensor (their head counts may differ: GQA).
    """
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (R,)
    if tl.program_id(1) == 0:
        _rotate_rows(
            q_ptr, qy_ptr, cos_ptr, sin_ptr, rows, nq_rows, D1Q, D2Q, sq0, sq1, sq2, sqy0, sqy1, sqy2, tab_b, tab_s,
            half, tail_q, SEQ_IS_DIM1, INTERLEAVED, False, COPY_TAIL, BLOCK_HALF, BLOCK_TAIL,
        )  # fmt: skip
    else:
        _rotate_rows(
            k_ptr, ky_ptr, cos_ptr, sin_ptr, rows, nk_rows, D1K, D2K, sk0, sk1, sk2, sky0, sky1, sky2, tab_b, tab_s,
            half, tail_k, SEQ_IS_DIM1, INTERLEAVED, False, COPY_TAIL, BLOCK_HALF, BLOCK_TAIL,
        )  # fmt: skip


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
    if x.dtype not in _FLOATS:
        return False
    in_place = _writable(x, out)
    if in_place is None:
        return False
    if x.numel() == 0:
        return True
    cos, sin = _tables(cos, sin, x.dtype)
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


def _tables(cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Tables in the compute dtype as ``(batch | 1, seq, r/2)`` contiguous tensors."""
    compute = _COMPUTE.get(dtype, torch.float32)
    cos, sin = cos.to(compute).contiguous(), sin.to(compute).contiguous()
    return (cos.unsqueeze(0), sin.unsqueeze(0)) if cos.dim() == 2 else (cos, sin)


def _writable(x: torch.Tensor, out: torch.Tensor) -> bool | None:
    """None if the kernel cannot write the rotation of ``x`` into ``out``; else whether it is in place."""
    if out.dtype != x.dtype or x.stride(-1) != 1 or out.stride(-1) != 1:
        return None
    in_place = _shares_memory(x, out)
    if in_place and (x.data_ptr() != out.data_ptr() or x.stride() != out.stride()):
        return None  # partial overlap: the eager path computes the whole result before writing
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape, strict=True)):
        return None
    return in_place


def rope_qk_into(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
) -> bool:
    """Rotate ``q`` into ``q_out`` and ``k`` into ``k_out`` (each may be its input) in one launch.

    The contract of :func:`ropekit.apply_rope_qk` (validated by it): one set of tables, GQA head counts, head
    dims that may differ (each at least ``rotary_dim``), in place or not. False, touching nothing, when the
    eager path must handle the inputs (dtypes other than fp16/bf16/fp32/fp64, q and k of different dtypes,
    a strided last dim, partial overlaps, expanded outputs).

    Shapes: ``q``/``k`` 4-D with ``seq_dim`` in (1, 2); ``cos``, ``sin`` ``(seq, rotary_dim // 2)`` or
    ``(batch | 1, seq, rotary_dim // 2)`` on their device.
    """
    if q.dtype not in _FLOATS or k.dtype != q.dtype:
        return False
    q_in_place, k_in_place = _writable(q, q_out), _writable(k, k_out)
    if q_in_place is None or k_in_place is None:
        return False
    if q.numel() == 0 and k.numel() == 0:
        return True
    cos, sin = _tables(cos, sin, q.dtype)
    half = rotary_dim // 2
    tail_q, tail_k = q.shape[3] - rotary_dim, k.shape[3] - rotary_dim
    nq, nk = q.shape[0] * q.shape[1] * q.shape[2], k.shape[0] * k.shape[1] * k.shape[2]
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    _rope_qk_kernel[(triton.cdiv(max(nq, nk), block_rows), 2)](
        q,
        q_out,
        k,
        k_out,
        cos,
        sin,
        nq,
        nk,
        q.shape[1],
        q.shape[2],
        k.shape[1],
        k.shape[2],
        *q.stride()[:3],
        *q_out.stride()[:3],
        *k.stride()[:3],
        *k_out.stride()[:3],
        0 if cos.shape[0] == 1 else cos.stride(0),
        cos.stride(1),
        half,
        tail_q,
        tail_k,
        SEQ_IS_DIM1=seq_dim == 1,
        INTERLEAVED=bool(interleaved),
        COPY_TAIL=(not (q_in_place and k_in_place)) and max(tail_q, tail_k) > 0,
        BLOCK_ROWS=block_rows,
        BLOCK_HALF=block_half,
        BLOCK_TAIL=triton.next_power_of_2(max(tail_q, tail_k, 1)),
        num_warps=4,
    )
    return True
