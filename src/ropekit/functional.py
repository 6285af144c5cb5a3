"""Pure-torch RoPE: the rotation itself (``apply_rope``, ``apply_rope_qk``), with its argument checks and autograd.

``cos_sin`` (exact tables, :mod:`ropekit.tables`) and the q/k weight permutations (:mod:`ropekit.permute`) live in
their own modules and are re-exported here.

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

from numbers import Integral

import torch

from ropekit._memory import aliasing, has_overlap
from ropekit._validate import require_rotary_dim
from ropekit.kernels import apply_rope_into, apply_rope_qk_into, fast_qk
from ropekit.kernels.reference import rope_reference
from ropekit.permute import half_split_to_interleaved, interleaved_to_half_split
from ropekit.tables import cos_sin

__all__ = [
    "apply_rope",
    "apply_rope_qk",
    "cos_sin",
    "half_split_to_interleaved",
    "interleaved_to_half_split",
    "rope_reference",
]


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
        rotary_dim = require_rotary_dim("rotary_dim", rotary_dim)
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
        raise ValueError(f"rotary_dim must be <= head_dim ({head_dim}), got {rotary_dim}{where}")
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
    if has_overlap(target):
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
    """Rotate one validated tensor: into ``target``, through autograd, or into a fresh tensor.

    While ``torch.jit.trace`` records, only dispatcher ops are seen (an extension writing into a fresh tensor
    would leave an uninitialised ``empty_like`` in the graph), so the eager definition runs instead: the trace
    then holds plain aten ops, exact, differentiable and exportable (``torch.onnx.export``).
    """
    if torch.jit.is_tracing():
        return rope_reference(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, out=target)
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

    Graphs: ``torch.compile`` (``fullgraph=True``) and ``torch.jit.trace`` record the eager definition (plain
    aten ops: exact, differentiable, exportable with ``torch.onnx.export``). ``torch.jit.script`` is not
    supported (TorchScript cannot compile keyword-only arguments and raises ``NotSupportedError``): trace or
    compile instead.
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

    Graphs: as :func:`apply_rope` (trace or compile; ``torch.jit.script`` is unsupported). ``inplace=True`` with q and k sharing memory: one tensor (or one view) passed
    twice is rotated once; views that share some elements raise ``ValueError``; disjoint views of one buffer
    (q and k of a fused qkv projection) are fine.
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
        shared = aliasing(q, k)
        if shared == "same":  # one tensor passed twice: rotate it once (a second pass would rotate it by 2θ)
            return _rope_one(q, cos, sin, rotary_dim, interleaved, seq_dim, q_target, tables_need_grad), k
        if shared == "overlap":
            raise ValueError(
                "inplace=True: q and k share memory (overlapping views of one buffer, e.g. q = heads 0-7 and "
                "k = heads 6-9): the shared elements would be rotated twice; pass disjoint views or use the "
                "out-of-place call"
            )
    if q.is_cuda and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or tables_need_grad)):
        q_out = torch.empty_like(q) if q_target is None else q_target
        k_out = torch.empty_like(k) if k_target is None else k_target
        if apply_rope_qk_into(
            q, k, cos, sin, q_out, k_out, rotary_dim=rotary_dim, interleaved=interleaved, seq_dim=seq_dim
        ):
            return q_out, k_out  # one Triton launch for both
    return (
        _rope_one(q, cos, sin, rotary_dim, interleaved, seq_dim, q_target, tables_need_grad),
        _rope_one(k, cos, sin, rotary_dim, interleaved, seq_dim, k_target, tables_need_grad),
    )
