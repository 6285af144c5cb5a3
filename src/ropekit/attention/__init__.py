"""Training-free attention methods that change which relative positions attention sees.

Self-Extend (:mod:`~ropekit.attention.self_extend`), ReRoPE and leaky ReRoPE (:mod:`~ropekit.attention.rerope`),
Dual Chunk Attention (:mod:`~ropekit.attention.dual_chunk`), STRING (:mod:`~ropekit.attention.string_rope`) and
StreamingLLM attention sinks (:mod:`~ropekit.attention.sinks`): each a frozen config in :data:`ATTENTIONS`, run by
:func:`~ropekit.attention.core.attend` on queries and keys the model has already rotated. No transformers here:
:mod:`ropekit.integrations.hf.patch_attention` plugs the core into transformers models, and
:meth:`ropekit.model.tiny.TinyLM.set_attention` into the bundled tiny model.
"""

from typing import Any

from ropekit.attention.dual_chunk import DualChunk
from ropekit.attention.registry import ATTENTIONS, AttentionConfig, Region, get_attention, list_attentions
from ropekit.attention.rerope import LeakyReRoPE, ReRoPE
from ropekit.attention.self_extend import SelfExtend
from ropekit.attention.sinks import Sinks
from ropekit.attention.string_rope import String

ATTENTIONS.load()  # imports every method file, each registering itself


def __getattr__(name: str) -> Any:
    """``attend`` and ``shift`` from :mod:`ropekit.attention.core`, imported on first use: the configs, the
    registry and planning need no torch, so ``ropekit plan`` and ``inspect`` start without it."""
    if name in ("attend", "shift"):
        from ropekit.attention import core

        return getattr(core, name)
    raise AttributeError(f"module 'ropekit.attention' has no attribute {name!r}")


__all__ = [
    "ATTENTIONS",
    "AttentionConfig",
    "DualChunk",
    "LeakyReRoPE",
    "ReRoPE",
    "Region",
    "SelfExtend",
    "Sinks",
    "String",
    "attend",
    "get_attention",
    "list_attentions",
    "shift",
]
