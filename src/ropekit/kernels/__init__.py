"""Fast paths for :func:`ropekit.apply_rope`, with the same semantics as the eager torch reference.

``apply_rope_into(x, cos, sin, target, ...)`` writes the rotation of ``x`` into ``target`` (which may be ``x``
itself, in place) and picks the backend from the tensors, never from a flag:

* CUDA tensors: a Triton kernel (:mod:`ropekit.kernels._triton`), if ``triton`` imports; q and k together in
  one launch (:func:`apply_rope_qk_into`);
* CPU tensors: a C++ kernel (:mod:`ropekit.kernels._cpu`), compiled on first use and cached per machine;
* anything else, inputs a kernel declines (a last dim with stride != 1, an output that partly overlaps the
  input, an integer or complex dtype), a missing compiler or Triton, and code being traced by
  ``torch.compile`` (inductor fuses the eager ops itself; an opaque extension call would break the graph) or
  recorded by ``torch.jit.trace`` (which sees only dispatcher ops, so a kernel's write would be lost):
  :func:`ropekit.kernels.reference.rope_reference`, the readable definition and the test oracle.

Mutation is tracked as torch tracks its own in-place ops: a kernel that writes into ``target`` bumps its autograd
version counter (so a backward that saved it raises "modified by an inplace operation" instead of returning a
wrong gradient), and an inference tensor outside inference mode goes to the eager path, which raises torch's own
error.

Every backend forms each product ``x·cos``, ``x·sin`` in fp32 (fp64 for fp64 input), adds them, and rounds once
to ``x.dtype``; pass-through dims past ``rotary_dim`` are copied bit for bit. The CPU kernel is bit-identical
to the eager path; the Triton kernel may fuse a multiply-add on GPU (within one fp32 rounding).

Environment switches (read once): ``ROPEKIT_CPU_KERNEL=0`` and ``ROPEKIT_TRITON=0`` disable a backend.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import torch

from ropekit.kernels import _cpu
from ropekit.kernels.reference import rope_reference

__all__ = ["apply_rope_into", "apply_rope_qk_into", "backend_for", "fast_qk", "rope_reference"]

_UNSET = object()
_triton_loaded: object = _UNSET


def _triton_kernel() -> Callable[..., bool] | None:
    global _triton_loaded
    if _triton_loaded is _UNSET:
        _triton_loaded = None
        if os.environ.get("ROPEKIT_TRITON", "1") != "0":
            try:
                from ropekit.kernels import _triton

                _triton_loaded = _triton.rope_into
            except ImportError as exc:
                warnings.warn(
                    f"ropekit: Triton is unavailable ({exc}); apply_rope on CUDA uses the eager torch path",
                    RuntimeWarning,
                    stacklevel=3,
                )
    return _triton_loaded  # type: ignore[return-value]


def backend_for(x: torch.Tensor) -> str:
    """Name of the backend :func:`apply_rope_into` tries first for ``x``: ``"triton"``, ``"cpu"`` or ``"eager"``.

    Builds the CPU kernel in the foreground if needed (with a message), so calling it before timing keeps the
    compile out of the timing and makes every later call use the kernel.
    """
    if x.is_cuda:
        return "triton" if _triton_kernel() is not None else "eager"
    if x.device.type == "cpu":
        return "cpu" if _cpu.load(wait=True) is not None else "eager"
    return "eager"


def apply_rope_into(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    target: torch.Tensor,
    *,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
    conjugate: bool = False,
) -> torch.Tensor:
    """Rotate ``x`` into ``target`` (validated by the caller, may be ``x``) with the fastest backend that applies.

    Args:
        x: ``(batch, seq, heads, head_dim)`` if ``seq_dim=1`` else ``(batch, heads, seq, head_dim)``.
        cos, sin: ``(seq, rotary_dim // 2)`` or ``(batch | 1, seq, rotary_dim // 2)``.
        target: same shape and dtype as ``x``; ``x`` itself for in place.
        rotary_dim: rotating dims; the rest are copied.
        interleaved: pairs (2i, 2i+1) instead of (i, i + rotary_dim/2).
        seq_dim: 1 or 2, the sequence axis of ``x``.
        conjugate: rotate by −θ (used by the backward).

    Returns:
        ``target``.
    """
    if (
        not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
        and not (target.is_inference() and not torch.is_inference_mode_enabled())
    ):
        kernel = _triton_kernel() if x.is_cuda else _cpu.load()
        if kernel is not None and kernel(x, cos, sin, target, rotary_dim, interleaved, seq_dim, conjugate):  # type: ignore[operator]
            # The extension wrote behind the dispatcher's back: record the mutation as torch's in-place ops do.
            torch.autograd.graph.increment_version(target)
            return target
    return rope_reference(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, conjugate=conjugate, out=target)


def apply_rope_qk_into(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    *,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
) -> bool:
    """Rotate q into ``q_out`` and k into ``k_out`` (validated by :func:`ropekit.apply_rope_qk`; each may be its
    input) in one Triton launch on CUDA. False, touching nothing, where that does not apply (not CUDA, no Triton,
    a graph being captured, an inference tensor outside inference mode, inputs the kernel declines): the caller
    then rotates each tensor with :func:`apply_rope_into`.
    """
    if not q.is_cuda or torch.compiler.is_compiling() or torch.jit.is_tracing() or _triton_kernel() is None:
        return False
    if not torch.is_inference_mode_enabled() and (q_out.is_inference() or k_out.is_inference()):
        return False
    from ropekit.kernels import _triton

    if not _triton.rope_qk_into(q, k, cos, sin, q_out, k_out, rotary_dim, interleaved, seq_dim):
        return False
    torch.autograd.graph.increment_version(q_out)  # written behind the dispatcher, as in apply_rope_into
    torch.autograd.graph.increment_version(k_out)
    return True


def fast_qk() -> Callable[..., tuple] | None:
    """The C++ entry that validates and rotates q and k in one call (CPU), or None where it does not apply.

    It declines (returns ``(False, None, None)``) whatever is not the common case: CUDA or other devices,
    autograd, odd strides or overlaps, inference tensors outside inference mode, and every shape error, so the
    Python path gives the error messages. Not used while ``torch.compile`` or ``torch.jit.trace`` records a graph
    (the extension is invisible to both: a trace would keep only its ``empty_like``).
    """
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None
    return _cpu.load_qk()
