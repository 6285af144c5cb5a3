"""Using ropekit's scaling methods inside local transformers models (optional extra; imported lazily).

:func:`apply_scaling` replaces a model's rotary embedding module(s) with :class:`HFRotaryAdapter`, which
produces the ``(cos, sin)`` pair transformers' attention layers expect — ``(batch, seq, rotary_dim)``,
halves duplicated for ``rotate_half``, times the attention factor — from ropekit's float64 frequencies. Any
registry method works, including ones transformers lacks (static ``ntk``, YaRN's paper ramp, frozen dynamic
NTK or LongRoPE). Supported: architectures with a ``*RotaryEmbedding`` module called as
``rotary_emb(x, position_ids)`` and a flat ``rope_parameters`` — Llama, Mistral, Qwen2, Phi-3 (LongRoPE),
GPT-NeoX (partial rotary) and Gemma.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ropekit.config import RopeConfig
from ropekit.integrations.hf_config import from_hf_config
from ropekit.module import RotaryEmbedding
from ropekit.scaling.registry import ScalingConfig

SUPPORTED = ("Llama", "Mistral", "Qwen2", "Phi3", "GPTNeoX", "Gemma")


class HFRotaryAdapter(nn.Module):
    """Drop-in for a transformers ``*RotaryEmbedding``: ``forward(x, position_ids) -> (cos, sin)``.

    Shapes:
        position_ids ``(batch, seq)`` → cos, sin ``(batch, seq, rotary_dim)`` in ``x.dtype``.

    Precision: angles in float64, tables rounded once to fp32 and then to ``x.dtype`` (as transformers does).
    """

    def __init__(self, rope: RopeConfig) -> None:
        super().__init__()
        self.rope = rope
        self.rotary = RotaryEmbedding(rope)
        self.attention_scaling = self.rotary.frequencies.attention_factor
        self.rope_type = rope.rope_type

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None):
        cos, sin = self.rotary.cos_sin(position_ids, device=x.device)  # (b, seq, r/2)
        return torch.cat((cos, cos), dim=-1).to(x.dtype), torch.cat((sin, sin), dim=-1).to(x.dtype)


def rope_of(model: nn.Module) -> RopeConfig:
    """The model's own RoPE (with its native scaling), read from ``model.config``."""
    config = getattr(model, "config", None)
    if config is None:
        raise ValueError(f"{type(model).__name__} has no .config; pass a transformers PreTrainedModel")
    if getattr(config, "rope_parameters", None) is None and getattr(config, "rope_theta", None) is None:
        raise ValueError(
            f"{type(model).__name__} is not a RoPE model: its config has no rope_parameters or rope_theta "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    params = config.rope_parameters
    if isinstance(params, dict) and params and all(isinstance(v, dict) for v in params.values()):
        raise ValueError(
            f"{type(model).__name__} uses per-layer-type rope_parameters ({sorted(params)}); ropekit supports "
            f"one RoPE per model ({', '.join(SUPPORTED)})"
        )
    return from_hf_config(config)


def _rotary_modules(model: nn.Module) -> list[tuple[nn.Module, str]]:
    """(parent, attribute) of every rotary embedding module; an installed adapter counts as one (its inner
    :class:`ropekit.RotaryEmbedding` is not a target of its own)."""
    found = []
    for _, parent in model.named_modules():
        if isinstance(parent, HFRotaryAdapter):
            continue
        for child_name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding") or isinstance(child, HFRotaryAdapter):
                found.append((parent, child_name))
    return found


def apply_scaling(model: nn.Module, scaling: ScalingConfig | None) -> nn.Module:
    """Make ``model`` use ``scaling`` (``None``: plain RoPE at the model's base), in place; returns ``model``.

    Raises:
        ValueError: the model has no RoPE config, or no rotary embedding module ropekit knows how to replace.
    """
    native = rope_of(model)
    rope = dataclasses.replace(native, scaling=scaling)
    targets = _rotary_modules(model)
    if not targets:
        raise ValueError(
            f"{type(model).__name__} has no *RotaryEmbedding module called as rotary_emb(x, position_ids); "
            f"ropekit supports {', '.join(SUPPORTED)}"
        )
    for parent, name in targets:
        setattr(parent, name, HFRotaryAdapter(rope))
    return model


def train_length_of(rope: RopeConfig, config: Any) -> int:
    """The pre-training length: the scaling's original length if it has one, else ``max_position_embeddings``."""
    original = getattr(rope.scaling, "original_max_position_embeddings", None)
    return int(original or config.max_position_embeddings)


class HFEvalModel:
    """:class:`ropekit.eval.models.EvalModel` over a local transformers causal LM directory (offline)."""

    def __init__(self, path: str | Path, *, device_map: str | None = None) -> None:
        try:
            from transformers import AutoConfig, AutoModelForCausalLM
        except ImportError as error:
            raise ValueError("evaluating a transformers model needs transformers: pip install 'ropekit[hf]'") from error

        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"no config.json in {str(path)!r}: not a transformers model directory")
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        self.name = str(path)
        options: dict[str, Any] = {"local_files_only": True, "dtype": torch.float32}
        if device_map is not None:
            options["device_map"] = device_map
        self.model = AutoModelForCausalLM.from_pretrained(path, **options).eval()
        native = rope_of(self.model)
        if not _rotary_modules(self.model):
            raise ValueError(
                f"{type(self.model).__name__} has a RoPE config but no *RotaryEmbedding module called as "
                f"rotary_emb(x, position_ids) for ropekit to replace; supported: {', '.join(SUPPORTED)}"
            )
        self.native_scaling = native.scaling
        self.rope = dataclasses.replace(native, scaling=None)
        self.train_length = train_length_of(native, config)
        self.tokenizer = self._tokenizer(path)
        self.vocab_size = int(config.vocab_size)

    @staticmethod
    def _tokenizer(path: Path):
        if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json")):
            return None
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        apply_scaling(self.model, scaling)

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        from ropekit.eval.models import guarded_logits

        device = next(self.model.parameters()).device
        return guarded_logits(lambda batch: self.model(input_ids=batch.to(device)).logits.float().cpu(), ids)

    def encode(self, text: bytes) -> torch.Tensor:
        if self.tokenizer is not None:
            ids = self.tokenizer(text.decode("utf-8", errors="replace"), add_special_tokens=False)["input_ids"]
            return torch.tensor(ids, dtype=torch.int64)
        if self.vocab_size < 256:
            raise ValueError(f"{self.name!r} has no tokenizer and a vocabulary of {self.vocab_size} < 256 bytes")
        return torch.frombuffer(bytearray(text), dtype=torch.uint8).to(torch.int64)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "transformers",
            "name": self.name,
            "architecture": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "rope": {"head_dim": self.rope.head_dim, "rotary_dim": self.rope.dim, "base": self.rope.base},
            "native_scaling": None if self.native_scaling is None else self.native_scaling.rope_type,
            "tokenizer": "model" if self.tokenizer is not None else "bytes",
        }
