"""Triton RoPE kernels for CUDA tensors (imported only when a CUDA tensor reaches apply_rope).

One tensor (``_rope_kernel``): one program rotates ``BLOCK_ROWS`` head vectors, loading each row's cos/sin from
the table row of its (batch, position). q and k together (``_rope_qk_kernel``, one launch): one program per token
(batch, position) reads its cos/sin row once and rotates every head of q and of k with it, which is what
liger-kernel's rope does; on an H100 it moves q and k at the ``copy_`` floor's device time (docs/performance.md).
Either way per-token positions, KV-cache offsets and packed sequences are just table contents. Both pairings,
either sequence axis, partial rotary (the pass-through dims are copied unless in place), in place, and the
conjugate rotation (the backward, one-tensor kernel) are compile-time switches. Math in fp32 (fp64 for fp64
input), one rounding on store. Runs under Triton's CPU interpreter (``TRITON_INTERPRET=1``) as well, which is
how the tests check it on machines without a GPU.
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
def _rotate_heads(
    x_base,
    y_base,
    sxh,
    syh,
    n_heads,
    c,
    s,
    cols,
    tail,
    INTERLEAVED: tl.constexpr,
    COPY_TAIL: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
    H_BLOCKS: tl.constexpr,
    BLOCK_TAIL: tl.constexpr,
):
    """Rotate the ``n_heads`` head vectors of one token (``x_base`` + h * ``sxh``), ``BLOCK_H`` at a time in
    ``H_BLOCKS`` (compile-time: head counts are fixed per model) steps."""
    cmask = (cols < HALF)[None, :]  # (1, H): HALF is a compile-time constant, so loads vectorise
    if INTERLEAVED:
        first = 2 * cols[None, :]
        second = first + 1
    else:
        first = cols[None, :]
        second = first + HALF
    for i in tl.static_range(H_BLOCKS):
        h = i * BLOCK_H + tl.arange(0, BLOCK_H).to(tl.int64)  # (B,)
        mask = (h < n_heads)[:, None] & cmask  # (B, H)
        x_row = x_base + (h * sxh)[:, None]  # (B, 1) pointers
        y_row = y_base + (h * syh)[:, None]
        x1 = tl.load(x_row + first, mask=mask, other=0.0).to(c.dtype)
        x2 = tl.load(x_row + second, mask=mask, other=0.0).to(c.dtype)
        a = x1 * c
        bb = x2 * s
        d = x2 * c
        e = x1 * s
        tl.store(y_row + first, (a - bb).to(y_base.dtype.element_ty), mask=mask)
        tl.store(y_row + second, (d + e).to(y_base.dtype.element_ty), mask=mask)
        if COPY_TAIL:
            tcols = 2 * HALF + tl.arange(0, BLOCK_TAIL)[None, :]  # (1, T)
            tmask = (h < n_heads)[:, None] & (tcols < 2 * HALF + tail)
            tl.store(y_row + tcols, tl.load(x_row + tcols, mask=tmask), mask=tmask)


@triton.jit
def _rope_qk_kernel(
    q_ptr,
    qy_ptr,
    k_ptr,
    ky_ptr,
    cos_ptr,
    sin_ptr,
    seq,
    nq,
    nk,
    sq_b,
    sq_s,
    sq_h,
    sqy_b,
    sqy_s,
    sqy_h,
    sk_b,
    sk_s,
    sk_h,
    sky_b,
    sky_s,
    sky_h,
    tab_b,
    tab_s,
    tail_q,
    tail_k,
    INTERLEAVED: tl.constexpr,
    COPY_TAIL: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    Q_BLOCKS: tl.constexpr,
    K_BLOCKS: tl.constexpr,
    BLOCK_TAIL: tl.constexpr,
):
    """q and k in one launch, one program per token (batch, position): its cos/sin row is read once and serves
    every head of q and of k. Strides are given as (batch, position, head) whatever the layout."""
    t = tl.program_id(0).to(tl.int64)  # int64: offsets past 2**31 elements must not wrap
    b = t // seq
    p = t % seq
    cols = tl.arange(0, BLOCK_HALF)
    t_off = b * tab_b + p * tab_s + cols
    c = tl.load(cos_ptr + t_off, mask=cols < HALF, other=0.0)[None, :]  # (1, H)
    s = tl.load(sin_ptr + t_off, mask=cols < HALF, other=0.0)[None, :]
    _rotate_heads(
        q_ptr + b * sq_b + p * sq_s, qy_ptr + b * sqy_b + p * sqy_s, sq_h, sqy_h, nq, c, s, cols, tail_q,
        INTERLEAVED, COPY_TAIL, HALF, BLOCK_HQ, Q_BLOCKS, BLOCK_TAIL,
    )  # fmt: skip
    _rotate_heads(
        k_ptr + b * sk_b + p * sk_s, ky_ptr + b * sky_b + p * sky_s, sk_h, sky_h, nk, c, s, cols, tail_k,
        INTERLEAVED, COPY_TAIL, HALF, BLOCK_HK, K_BLOCKS, BLOCK_TAIL,
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
    *,
    tune: dict | None = None,
) -> bool:
    """Rotate ``q`` into ``q_out`` and ``k`` into ``k_out`` (each may be its input) in one launch.

    The contract of :func:`ropekit.apply_rope_qk` (validated by it): one set of tables, GQA head counts, head
    dims that may differ (each at least ``rotary_dim``), in place or not. False, touching nothing, when the
    eager path must handle the inputs (dtypes other than fp16/bf16/fp32/fp64, q and k of different dtypes,
    a strided last dim, partial overlaps, expanded outputs).

    Shapes: ``q``/``k`` 4-D with ``seq_dim`` in (1, 2); ``cos``, ``sin`` ``(seq, rotary_dim // 2)`` or
    ``(batch | 1, seq, rotary_dim // 2)`` on their device. ``tune``: launch settings (``max_tile``,
    ``num_warps``) for the benchmark's sweep; the defaults otherwise.
    """
    if q.dtype not in _FLOATS or k.dtype != q.dtype:
        return False
    q_in_place, k_in_place = _writable(q, q_out), _writable(k, k_out)
    if q_in_place is None or k_in_place is None:
        return False
    if q.numel() == 0 and k.numel() == 0:
        return True
    cos, sin = _tables(cos, sin, q.dtype)
    copy_tail = not (q_in_place and k_in_place)
    _launch_qk(q, k, cos, sin, q_out, k_out, rotary_dim, interleaved, seq_dim, copy_tail, **(tune or {}))
    return True


def _launch_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
    copy_tail: bool,
    *,
    max_tile: int = 2048,
    num_warps: int = 8,
) -> None:
    """One program per (batch, position) token; heads in tiles of at most ``max_tile`` elements per half.

    The defaults are the fastest of ``benchmarks/profile_triton_qk.py``'s sweep on an H100 (8 warps; tiles of
    1024-4096 elements within 1%).
    """
    half = rotary_dim // 2
    block_half = triton.next_power_of_2(half)
    s_ax, h_ax = (1, 2) if seq_dim == 1 else (2, 1)
    nq, nk = q.shape[h_ax], k.shape[h_ax]
    tail_q, tail_k = q.shape[3] - rotary_dim, k.shape[3] - rotary_dim
    cap = max(1, max_tile // block_half)
    block_hq, block_hk = min(triton.next_power_of_2(max(nq, 1)), cap), min(triton.next_power_of_2(max(nk, 1)), cap)

    def strides(t):
        return t.stride(0), t.stride(s_ax), t.stride(h_ax)

    _rope_qk_kernel[(q.shape[0] * q.shape[s_ax],)](
        q, q_out, k, k_out, cos, sin, q.shape[s_ax], nq, nk,
        *strides(q), *strides(q_out), *strides(k), *strides(k_out),
        0 if cos.shape[0] == 1 else cos.stride(0), cos.stride(1), tail_q, tail_k,
        INTERLEAVED=bool(interleaved),
        COPY_TAIL=copy_tail and max(tail_q, tail_k) > 0,
        HALF=half,
        BLOCK_HALF=block_half,
        BLOCK_HQ=block_hq,
        BLOCK_HK=block_hk,
        Q_BLOCKS=triton.cdiv(nq, block_hq),
        K_BLOCKS=triton.cdiv(nk, block_hk),
        BLOCK_TAIL=triton.next_power_of_2(max(tail_q, tail_k, 1)),
        num_warps=num_warps,
    )  # fmt: skip
