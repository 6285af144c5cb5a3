"""The tiny reference decoder: a Llama-style model in one file, read top to bottom.

RMSNorm → grouped-query attention (``scaled_dot_product_attention``) with a configurable position encoding
(RoPE through :class:`ropekit.RotaryEmbedding`, sinusoidal, or none) → SwiGLU MLP; tied embeddings;
byte-level vocabulary. ``position="infini"`` swaps the attention for Infini-attention
(:mod:`ropekit.model.infini`): the model then runs segment by segment with a compressive memory per layer.
Shapes are written ``(batch, seq, …)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ropekit._validate import require_choice, require_float, require_int
from ropekit.attention.core import attend
from ropekit.attention.registry import AttentionConfig
from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument, Namer
from ropekit.mixed_window import document_mask
from ropekit.model.infini import MEMORY_UPDATES, InfiniAttention, Memory
from ropekit.model.kv_cache import KVCache, causal_attention
from ropekit.model.projections import GroupedProjections
from ropekit.model.tokenizer import VOCAB_SIZE
from ropekit.module import RotaryEmbedding
from ropekit.scaling.registry import ScalingConfig, get_scaling
from ropekit.tables import capturing

POSITION_ENCODINGS = ("rope", "sinusoidal", "none", "infini")
#: fields that only ``position="infini"`` uses (left out of other models' ``to_dict``, so their configs are unchanged)
INFINI_FIELDS = ("segment_length", "memory_update")


@dataclass(frozen=True, kw_only=True)
class TinyConfig:
    """Architecture of the tiny model; ``head_dim = d_model // n_heads`` is derived.

    Attributes:
        train_length: the context the model was trained at (the "original length" for scaling).
        position: ``"rope"``, ``"sinusoidal"``, ``"none"`` (NoPE) or ``"infini"`` (Infini-attention, arXiv
            2404.07143: RoPE inside segments of ``segment_length`` tokens plus a compressive memory across them).
        max_positions: positions at or beyond this raise ``ValueError`` (bounds the cos/sin tables).
        rope_base: the RoPE base b; ``scaling`` a context-extension method (``None`` = plain RoPE).
        segment_length: Infini-attention's segment (required for, and only allowed with, ``position="infini"``).
        memory_update: Infini-attention's memory rule, ``"linear"`` or ``"delta"``.
    """

    vocab_size: int = VOCAB_SIZE
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 384
    train_length: int = 256
    position: str = "rope"
    rope_base: float = 10000.0
    scaling: ScalingConfig | None = None
    norm_eps: float = 1e-5
    max_positions: int = 1 << 20
    segment_length: int | None = None
    memory_update: str = "linear"
    head_dim: int = field(init=False)

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "ffn_dim",
            "train_length",
            "max_positions",
        ):
            # store what the check returns: plain ints, so numpy inputs still give a JSON-ready to_dict()
            object.__setattr__(self, name, require_int(name, getattr(self, name), minimum=1))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads, got n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be divisible by n_kv_heads, got {self.n_kv_heads}")
        require_choice("position", self.position, POSITION_ENCODINGS)
        object.__setattr__(self, "rope_base", require_float("rope_base", self.rope_base, above=1.0))
        require_choice("memory_update", self.memory_update, MEMORY_UPDATES)
        if self.position == "infini":
            if self.segment_length is None:
                raise ValueError("segment_length is required with position='infini' (an integer >= 1), got None")
            object.__setattr__(self, "segment_length", require_int("segment_length", self.segment_length, minimum=1))
            if self.scaling is not None:
                raise ValueError(
                    f"scaling must be None with position='infini' (positions restart every segment), got {self.scaling}"
                )
        elif self.segment_length is not None or self.memory_update != "linear":
            raise InvalidArgument(
                "segment_length" if self.segment_length is not None else "memory_update",
                self.segment_length if self.segment_length is not None else self.memory_update,
                message=self._infini_only,
                leads=True,  # both fields are its subject
            )
        object.__setattr__(self, "head_dim", self.d_model // self.n_heads)

    def _infini_only(self, n: Namer) -> str:
        """The message refusing Infini-attention's fields with another position, written by ``n``."""
        return (
            f"{n('segment_length')} and {n('memory_update')} apply only to {n('position', 'infini')}, got "
            f"{n('position', self.position)} with {n('segment_length', self.segment_length)}, "
            f"{n('memory_update', self.memory_update)}"
        )

    @property
    def rope(self) -> RopeConfig:
        """The RoPE config the attention layers use."""
        return RopeConfig(self.head_dim, base=self.rope_base, scaling=self.scaling)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; the scaling is stored as ``{"rope_type": ..., **fields}``."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init and f.name != "scaling"}
        if self.position != "infini":
            for name in INFINI_FIELDS:
                del data[name]
        if self.scaling is not None:
            data["scaling"] = {"rope_type": self.scaling.rope_type, **dataclasses.asdict(self.scaling)}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TinyConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise ``ValueError``."""
        data = dict(data)
        scaling = data.pop("scaling", None)
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TinyConfig key(s) {unknown}; allowed: {sorted(known)}")
        if scaling is not None:
            scaling = dict(scaling)
            scaling = get_scaling(scaling.pop("rope_type")).make(**scaling)
        return cls(**data, scaling=scaling)


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain (Zhang & Sennrich, arXiv 1910.07467)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def sinusoidal_table(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Absolute sinusoidal encodings (Vaswani et al., arXiv 1706.03762), angles in float64.

    Returns:
        ``(seq, dim)`` float32, interleaving sin and cos per frequency.
    """
    freqs = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = positions.to(torch.float64)[:, None] * freqs  # (seq, dim/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2).float()  # (seq, dim)


class Attention(GroupedProjections):
    """Causal grouped-query self-attention with a pluggable rotary embedding."""

    def __init__(self, config: TinyConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__(config, rotary)
        #: a training-free attention method (:mod:`ropekit.attention`); None = plain causal sdpa
        self.method: AttentionConfig | None = None

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None, layer: int = 0, documents=None
    ) -> torch.Tensor:
        """``(batch, seq, d_model)`` → same; with ``cache``, attends to the cached keys of ``layer`` too; with
        ``documents`` (``(batch, seq)`` numbers of packed documents), only within each document."""
        batch, seq, _ = x.shape
        hd = self.config.head_dim
        q = self.q_proj(x).view(batch, seq, self.config.n_heads, hd)  # (b, s, h, hd)
        k = self.k_proj(x).view(batch, seq, self.config.n_kv_heads, hd)  # (b, s, kv, hd)
        v = self.v_proj(x).view(batch, seq, self.config.n_kv_heads, hd)  # (b, s, kv, hd)
        if self.rotary is not None:
            q, k = self.rotary(q, k, positions)
        past = 0
        if cache is not None:
            past = cache.length(layer)
            k, v = cache.update(layer, k, v)  # (b, past + s, kv, hd)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, heads, s, hd)
        if documents is not None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=document_mask(documents), enable_gqa=True)
        elif self.method is None:
            out = causal_attention(q, k, v, past)
        else:
            expected = torch.arange(past, past + seq, device=positions.device)
            if positions.shape[-1] != seq or bool((positions != expected).any()):
                raise ValueError(
                    "attention methods need positions 0 … seq-1 after the cached ones (they re-index positions "
                    "themselves)"
                )
            out = attend(q, k, v, self.method, self.rotary.frequencies)  # queries = the last seq keys: (b, h, s, hd)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))  # (b, s, d_model)


class SwiGLU(nn.Module):
    """SwiGLU feed-forward (Shazeer, arXiv 2002.05202)."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(config.d_model, config.ffn_dim, bias=False)
        self.up = nn.Linear(config.d_model, config.ffn_dim, bias=False)
        self.down = nn.Linear(config.ffn_dim, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: TinyConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = InfiniAttention(config, rotary) if config.position == "infini" else Attention(config, rotary)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None, layer: int = 0, documents=None
    ) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), positions, cache, layer, documents)
        return x + self.mlp(self.mlp_norm(x))

    def segment(self, x: torch.Tensor, memory: Memory | None) -> tuple[torch.Tensor, Memory]:
        """One Infini-attention segment through the block: the output and this layer's memory after it."""
        attended, memory = self.attn.segment(self.attn_norm(x), memory)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x)), memory


class TinyLM(nn.Module):
    """The tiny decoder. ``forward(ids) -> logits``; ``set_scaling`` swaps the RoPE scaling without retraining."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, None) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self._install_rotary()
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def _install_rotary(self) -> None:
        # One shared RotaryEmbedding: every layer uses the same frequencies and cos/sin cache.
        rope = self.config.rope
        rotary = (
            RotaryEmbedding(rope, max_positions=self.config.max_positions)
            if self.config.position in ("rope", "infini")
            else None
        )
        self.rotary = rotary
        for block in self.blocks:
            block.attn.rotary = rotary
            block.attn.config = self.config

    def set_scaling(self, scaling: ScalingConfig | None) -> TinyLM:
        """Switch the context-extension method in place (RoPE models only); returns ``self``."""
        if self.config.position != "rope":
            raise ValueError(f"set_scaling needs position='rope', this model uses position={self.config.position!r}")
        self.config = dataclasses.replace(self.config, scaling=scaling)
        self._install_rotary()
        return self

    def set_attention(self, method: AttentionConfig | None) -> TinyLM:
        """Attend with a training-free method of :mod:`ropekit.attention` (``None``: plain), in place; returns ``self``."""
        if method is not None and self.config.position != "rope":
            raise ValueError(f"attention methods need position='rope', this model uses {self.config.position!r}")
        for block in self.blocks:
            block.attn.method = method
        return self

    def num_parameters(self) -> int:
        """Parameter count (tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
        documents: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits for every position.

        Args:
            ids: ``(batch, seq)`` token ids.
            positions: ``(seq,)`` or ``(batch, seq)`` integer positions; default ``0 … seq-1`` (must be ``None``
                with ``position="infini"``, whose positions restart every segment), after the cached ones with
                ``cache``.
            cache: a :class:`~ropekit.model.kv_cache.KVCache` to decode incrementally: the new keys and values
                are appended to it and the tokens attend to everything cached (not with ``position="infini"``).
            documents: ``(batch, seq)`` numbers of packed documents: each token attends within its own only
                (:func:`ropekit.mixed_window.document_mask`; mixed-window training, no ``cache``).

        Returns:
            ``(batch, seq, vocab_size)`` float32 logits.
        """
        return F.linear(self.hidden_states(ids, positions, cache, documents), self.embed.weight)  # tied: (b, s, vocab)

    def hidden_states(
        self, ids: torch.Tensor, positions: torch.Tensor | None = None, cache: KVCache | None = None, documents=None
    ) -> torch.Tensor:
        """The body up to and including the final norm: ``(batch, seq)`` ids → ``(batch, seq, d_model)``."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, seq), got shape {tuple(ids.shape)}")
        if self.config.position == "infini":
            if positions is not None:
                raise ValueError("positions must be None with position='infini' (they restart every segment)")
            if cache is not None:
                raise ValueError("cache must be None with position='infini' (its memory is the state it carries)")
            return self.segment_states(ids)[0]
        if positions is None:
            start = 0 if cache is None else cache.length(0)
            positions = torch.arange(start, start + ids.shape[1], device=ids.device)
        if capturing():  # a compiled or traced graph cannot read the positions: the same check, in the graph
            torch._assert_async(
                (positions < self.config.max_positions).all(),
                f"a position is beyond max_positions={self.config.max_positions} of this model",
            )
        elif positions.numel() and int(positions.max()) >= self.config.max_positions:
            raise ValueError(
                f"position {int(positions.max())} is beyond max_positions={self.config.max_positions} of this model"
            )
        x = self.embed(ids)  # (b, s, d_model)
        if self.config.position == "sinusoidal":
            x = x + sinusoidal_table(positions.reshape(-1, ids.shape[1])[0], self.config.d_model).to(x.device)
        for layer, block in enumerate(self.blocks):
            x = block(x, positions, cache, layer, documents)
        return self.norm(x)

    def forward_segments(
        self, ids: torch.Tensor, memory: list[Memory] | None = None
    ) -> tuple[torch.Tensor, list[Memory]]:
        """Infini-attention models: logits for any length, segment by segment, in memory constant in the length.

        Each segment of ``segment_length`` tokens goes through every layer before the next one starts, so the
        only state carried is one :class:`~ropekit.model.infini.Memory` per layer.

        Args:
            ids: ``(batch, seq)`` token ids.
            memory: per-layer memories from earlier text (``None``: empty), e.g. the second value of a previous
                call, to continue a stream.

        Returns:
            ``(batch, seq, vocab_size)`` logits and the per-layer memories after the last segment.
        """
        hidden, memory = self.segment_states(ids, memory)
        return F.linear(hidden, self.embed.weight), memory  # (b, seq, vocab)

    def segment_states(
        self, ids: torch.Tensor, memory: list[Memory] | None = None
    ) -> tuple[torch.Tensor, list[Memory]]:
        """:meth:`forward_segments` without the output head: final-norm states ``(batch, seq, d_model)``."""
        if self.config.position != "infini":
            raise ValueError(f"forward_segments needs position='infini', this model uses {self.config.position!r}")
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, seq), got shape {tuple(ids.shape)}")
        if memory is not None and len(memory) != len(self.blocks):
            raise ValueError(f"memory must hold one Memory per layer ({len(self.blocks)}), got {len(memory)}")
        memory = list(memory) if memory is not None else [None] * len(self.blocks)
        step = self.config.segment_length
        states = []
        for start in range(0, ids.shape[1], step):
            x = self.embed(ids[:, start : start + step])  # (b, segment, d_model)
            for index, block in enumerate(self.blocks):
                x, memory[index] = block.segment(x, memory[index])
            states.append(self.norm(x))  # (b, segment, d_model)
        if not states:
            return self.embed.weight.new_zeros(ids.shape[0], 0, self.config.d_model), memory
        return torch.cat(states, dim=1), memory

    def gate_values(self) -> list[list[float]]:
        """Infini-attention models: ``sigmoid(β)`` per layer and query head (the share each head takes from memory)."""
        if self.config.position != "infini":
            raise ValueError(f"gate_values needs position='infini', this model uses {self.config.position!r}")
        return [block.attn.gate_values() for block in self.blocks]


def bits_per_byte(loss_nats: float) -> float:
    """Cross-entropy in nats per byte → bits per byte."""
    return loss_nats / math.log(2)
