"""Mixed-window training on a transformers model: the per-sequence ``longrope`` switch and the document mask.

:func:`use_mixed_window` puts :class:`ropekit.mixed_window.MixedWindowRotary` inside the adapters
:func:`~ropekit.integrations.hf.patch_rope.apply_scaling` installed, so each sequence of a batch is rotated with the
short or the long list by its own largest position. Only training does this: the model's ``config`` keeps the native
``longrope`` form ``apply_scaling`` wrote, so the saved checkpoint is plain ``longrope`` that transformers loads and
switches by the current length, which for one document is the same choice.

:func:`attention_mask_for` is the 4-D mask transformers takes as given (``masking_utils`` returns a 4-D mask as is):
for ``sdpa`` the bool mask of :func:`ropekit.mixed_window.document_mask`, for ``eager`` the same as an additive float
mask. transformers' own packing detection (a position id that is not the previous one + 1 starts a document) is not
used: PoSE's skipping positions would read as document starts.
"""

from __future__ import annotations

import torch
from torch import nn

from ropekit.mixed_window import MixedWindowRotary, document_mask


def use_mixed_window(model: nn.Module) -> nn.Module:
    """Switch ``model``'s patched rotary modules to the per-sequence ``longrope`` choice, in place; returns ``model``.

    Raises:
        ValueError: the model was not patched by ``apply_scaling``, has one RoPE per layer type or complex rotary
            output, or its RoPE is not ``longrope`` (:func:`ropekit.mixed_window.mixed_window_scaling` says why).
    """
    from ropekit.integrations.hf.patch_rope import HFRotaryAdapter, rotary_modules

    adapters = [getattr(parent, name) for parent, name in rotary_modules(model)]
    adapters = [a for a in adapters if isinstance(a, HFRotaryAdapter)]  # not the RotaryEmbeddings inside them
    if not adapters:
        raise ValueError("mixed_window: apply ropekit's longrope scaling first (apply_scaling), then use_mixed_window")
    for adapter in adapters:
        if adapter.per_layer_type or adapter.complex_output:
            raise ValueError(
                f"mixed_window: {type(model).__name__} has one RoPE per layer type or complex rotary output; "
                "mixed-window training supports one RoPE for every layer"
            )
        mixed = MixedWindowRotary(adapter.rope)
        adapter.rotary = mixed
        adapter.rotaries["all"] = mixed
    return model


def attention_mask_for(model: nn.Module, documents: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The 4-D attention mask of packed ``documents`` in the form ``model``'s attention implementation reads.

    Shapes:
        documents ``(batch, seq)`` → ``(batch, 1, seq, seq)`` (bool for sdpa, ``dtype`` additive for eager).

    Raises:
        ValueError: an attention implementation other than sdpa or eager (flash kernels take no 4-D mask).
    """
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", "sdpa") or "sdpa"
    allowed = document_mask(documents)
    if implementation == "sdpa":
        return allowed
    if implementation == "eager":
        blocked = torch.full(allowed.shape, torch.finfo(dtype).min, dtype=dtype, device=documents.device)
        return blocked.masked_fill(allowed, 0.0)
    raise ValueError(
        f"mixed_window: packed documents need a 4-D attention mask, which attention {implementation!r} does not take; "
        "load the model with attn_implementation='sdpa'"
    )
