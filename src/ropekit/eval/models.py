"""The evaluation view of a model: logits for token ids, and a way to swap its RoPE scaling.

Two implementations: the bundled tiny model (:class:`TinyEvalModel`) and any local transformers causal LM
(:class:`ropekit.integrations.hf.HFEvalModel`). ``load_eval_model`` picks by what the path holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch

from ropekit.config import RopeConfig
from ropekit.scaling.registry import ScalingConfig


def is_out_of_memory(error: BaseException) -> bool:
    """True for allocation failures: CUDA's ``torch.OutOfMemoryError``, ``MemoryError``, and the CPU allocator's
    ``RuntimeError`` ("DefaultCPUAllocator: can't allocate memory")."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and "can't allocate memory" in str(error)


def guarded_logits(forward, ids: torch.Tensor) -> torch.Tensor:
    """``forward(ids)``, turning an out-of-memory failure into a ``ValueError`` that names the length.

    Raises:
        ValueError: the forward pass ran out of memory.
    """
    try:
        return forward(ids)
    except (RuntimeError, MemoryError) as error:
        if not is_out_of_memory(error):
            raise
        raise ValueError(
            f"out of memory at sequence length {ids.shape[-1]} (batch {ids.shape[0]}); evaluate shorter lengths "
            "(smaller --multiples), or for a transformers model spread it over devices with --device-map auto"
        ) from error


class EvalModel(Protocol):
    """What the evaluations need from a model."""

    name: str
    #: the length the model was trained at (the "original length" of every scaling method)
    train_length: int
    #: the model's RoPE without any scaling applied by the evaluation
    rope: RopeConfig
    #: the model's own scaling (e.g. Phi-3's LongRoPE factors), or None
    native_scaling: ScalingConfig | None

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        """Use ``scaling`` from now on (``None``: plain RoPE with the model's base)."""

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """``(batch, seq)`` ids → ``(batch, seq, vocab)`` float32 logits."""

    def encode(self, text: bytes) -> torch.Tensor:
        """Text → 1-D int64 ids."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready description recorded with every result."""


class TinyEvalModel:
    """:class:`EvalModel` over a :class:`ropekit.model.TinyLM` checkpoint."""

    def __init__(self, name_or_path: str | Path = "tiny") -> None:
        from ropekit.model import load, metadata

        self.model = load(name_or_path)
        self.name = str(name_or_path)
        self._meta = metadata(name_or_path)
        config = self.model.config
        if config.position != "rope":
            raise ValueError(f"model {self.name!r} uses position={config.position!r}; RoPE evaluations need 'rope'")
        self.train_length = config.train_length
        self.rope = RopeConfig(config.head_dim, base=config.rope_base)
        self.native_scaling = config.scaling

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        self.model.set_scaling(scaling)

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        return guarded_logits(self.model, ids)

    def encode(self, text: bytes) -> torch.Tensor:
        return torch.frombuffer(bytearray(text), dtype=torch.uint8).to(torch.int64)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "ropekit-tiny",
            "name": self.name,
            "parameters": self.model.num_parameters(),
            "config": self.model.config.to_dict(),
            "heldout_bpb": self._meta.get("heldout_bpb"),
        }


def load_eval_model(spec: str | Path = "tiny", **hf_options: Any) -> EvalModel:
    """``"tiny"`` or a tiny checkpoint directory → :class:`TinyEvalModel`; a transformers directory → HF.

    Raises:
        FileNotFoundError: the path does not exist or holds no model.
    """
    if str(spec) == "tiny":
        return TinyEvalModel("tiny")
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"model path {str(path)!r} does not exist (or use 'tiny' for the bundled model)")
    if (path / "model.safetensors").is_file() and (path / "config.json").is_file():
        import json

        if "model" in json.loads((path / "config.json").read_text()):
            return TinyEvalModel(path)
    from ropekit.integrations.hf import HFEvalModel

    return HFEvalModel(path, **hf_options)
