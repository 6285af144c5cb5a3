"""Helpers every evaluation model shares: the ``--dtype`` names, out-of-memory detection that names the length, a
transformers tokenizer's ids and stop tokens, and a transformers model's description."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ropekit.eval.hf_model import HFEvalModel

from ropekit.errors import InvalidArgument

#: what ``--dtype`` accepts; ``auto`` is the checkpoint's own dtype (float32 for the bundled model)
DTYPES = ("auto", "bfloat16", "float16", "float32")


def is_out_of_memory(error: BaseException) -> bool:
    """True for allocation failures: CUDA's ``torch.OutOfMemoryError``, ``MemoryError``, and the CPU allocator's
    ``RuntimeError`` ("DefaultCPUAllocator: can't allocate memory")."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and "can't allocate memory" in str(error)


def guarded_logits(forward: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """``forward(ids)``, turning an out-of-memory failure into a ``ValueError`` that names the length.

    Raises:
        ValueError: the forward pass ran out of memory.
    """
    try:
        return forward(ids)
    except (RuntimeError, MemoryError) as error:
        if not is_out_of_memory(error):
            raise
        length, batch = ids.shape[-1], ids.shape[0]
        raise InvalidArgument(
            "length",
            length,
            message=lambda n: (
                f"out of memory at sequence length {length} (batch {batch}); evaluate shorter lengths "
                "(smaller multiples), a smaller dtype, or for a transformers model spread it over devices with "
                f"{n('device_map', 'auto')}"
            ),
        ) from error


def torch_dtype(name: str) -> torch.dtype | None:
    """``--dtype`` name → torch dtype (``None`` for ``auto``).

    Raises:
        ValueError: the name is not one of :data:`DTYPES`.
    """
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return None if name == "auto" else getattr(torch, name)


def tokenizer_ids(tokenizer: Any, text: bytes) -> torch.Tensor:
    """Text → 1-D int64 ids by a transformers tokenizer, no special tokens added (every evaluation's encoding)."""
    ids = tokenizer(text.decode("utf-8", errors="replace"), add_special_tokens=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.int64)


def tokenizer_stops(tokenizer: Any) -> frozenset[int]:
    """The end-of-sequence id of a transformers tokenizer as the stop tokens (none when it has none)."""
    eos = tokenizer.eos_token_id
    return frozenset() if eos is None else frozenset({int(eos)})


def hf_description(model: HFEvalModel) -> dict[str, Any]:
    """What an :class:`~ropekit.eval.hf_model.HFEvalModel` is (its ``describe()``): kind, architecture, size, dtype,
    attention, RoPE, tokenizer, and its layer types, RoPE layout and GGUF metadata where it has them."""
    description = {
        "kind": "gguf" if model.gguf is not None else "transformers",
        "name": model.name,
        "architecture": type(model.model).__name__,
        "parameters": sum(p.numel() for p in model.model.parameters()),
        "dtype": model.dtype,
        "attention": model.attention,
        "rope": {"head_dim": model.rope.head_dim, "rotary_dim": model.rope.dim, "base": model.rope.base},
        "native_scaling": None if model.native_scaling is None else model.native_scaling.rope_type,
        "tokenizer": "model" if model.tokenizer is not None else "bytes",
    }
    if model.layer_types is not None:
        description["layer_types"] = model.layer_types
        description["scaled_layer_types"] = model.scaled_layers
    if model.rope_layout is not None and model.rope_layout.nope_layers:
        description["rope_layout"] = model.rope_layout.to_dict()
    if model.gguf is not None:
        description["gguf"] = model.gguf
    return description
