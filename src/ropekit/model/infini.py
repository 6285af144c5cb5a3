"""Infini-attention (Munkhdalai et al., arXiv 2404.07143): local causal attention plus a compressive memory.

The input is cut into segments of ``segment_length`` tokens. Inside a segment each head attends causally, with
RoPE whose positions restart at 0 in every segment (the paper's local attention). Across segments each head
carries a linear-attention memory, updated after the segment and read by the next one:

* retrieval (eq. 3): ``A_mem = σ(Q) M_{s−1} / (σ(Q) z_{s−1})`` with ``σ = ELU + 1``;
* linear update (eq. 4): ``M_s = M_{s−1} + σ(K)ᵀ V``;
* delta update (eq. 5): ``M_s = M_{s−1} + σ(K)ᵀ (V − σ(K) M_{s−1} / (σ(K) z_{s−1}))``;
* normaliser: ``z_s = z_{s−1} + Σ_t σ(K_t)``;
* gate (eq. 6): ``A = sigmoid(β) · A_mem + (1 − sigmoid(β)) · A_local``, one learned ``β`` per query head.

Choices the paper leaves open, made here and stated once:

* **Empty memory.** ``M_0 = 0`` and ``z_0 = 0``, so eq. 3 (and the retrieval inside eq. 5) is 0/0 in the first
  segment. Because ``σ > 0``, ``σ(Q) z`` is zero only when ``z`` is (then ``M`` is zero too), so the guard
  divides by 1 wherever the denominator is exactly 0: the retrieval of an empty memory is defined as 0, and no
  NaN appears in the forward or the backward pass (a ``where`` over ``num / 0`` would put NaN in the gradient).
* **Memory keys are position-free.** The memory reads and writes with the projections *before* RoPE, so a
  stored fact is found by content whatever its offset inside its segment; RoPE rotates only the local attention.
* **Precision.** The memory (``M``, ``z``) is kept, updated and read in fp32 (fp64 for fp64 activations) whatever
  the activations' dtype: ``z`` sums σ(K) over every token stored, so in fp16 ``σ(Q) z`` overflows after about
  12k tokens and the retrieval becomes inf/inf = NaN. Only the retrieval's result is cast back.
* **Grouped-query attention.** Keys and values exist per KV head, so the memory (``M``, ``z``) is kept per KV
  head and read by every query head of its group (as a KV cache would be); the gate ``β`` is per query head.

Shapes are written ``(batch, seq, …)``; memories are ``(batch, kv_heads, d_k, d_v)`` and ``(batch, kv_heads, d_k)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ropekit._validate import require_choice
from ropekit.model.projections import GroupedProjections

if TYPE_CHECKING:
    from ropekit.model.tiny import TinyConfig
    from ropekit.module import RotaryEmbedding

MEMORY_UPDATES = ("linear", "delta")


@dataclass(frozen=True)
class Memory:
    """One layer's compressive memory after some segments.

    Attributes:
        matrix: ``(batch, kv_heads, d_k, d_v)`` the associative matrix ``M``.
        norm: ``(batch, kv_heads, d_k)`` the normaliser ``z`` (sum of σ(K) over every token stored).
    """

    matrix: torch.Tensor
    norm: torch.Tensor

    @classmethod
    def empty(cls, batch: int, kv_heads: int, d_k: int, d_v: int, *, like: torch.Tensor) -> Memory:
        """``M_0 = 0``, ``z_0 = 0`` on ``like``'s device, in its accumulation dtype (fp32, fp64 for fp64)."""
        zeros = dict(dtype=accumulation_dtype(like), device=like.device)
        return cls(torch.zeros(batch, kv_heads, d_k, d_v, **zeros), torch.zeros(batch, kv_heads, d_k, **zeros))


def accumulation_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the memory is kept in for activations like ``x``: fp64 for fp64, fp32 otherwise."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """σ(x) = ELU(x) + 1 > 0, the feature map of linear attention (Katharopoulos et al., arXiv 2006.16236)."""
    return F.elu(x) + 1.0


def retrieve(sigma_q: torch.Tensor, memory: Memory) -> torch.Tensor:
    """Read the memory: ``σ(Q) M / (σ(Q) z)`` (arXiv 2404.07143, eq. 3), 0 where ``σ(Q) z`` is exactly 0.

    Args:
        sigma_q: ``(batch, heads, seq, d_k)`` σ of the queries (or keys, for the delta rule); ``heads`` is a
            multiple of the memory's ``kv_heads`` (grouped-query attention).
        memory: the memory to read.

    Returns:
        ``(batch, heads, seq, d_v)`` in ``sigma_q``'s dtype (computed in the memory's, at least fp32).
    """
    compute = torch.promote_types(accumulation_dtype(sigma_q), memory.matrix.dtype)
    group = sigma_q.shape[1] // memory.matrix.shape[1]
    matrix = memory.matrix.to(compute).repeat_interleave(group, dim=1)  # (b, heads, d_k, d_v)
    norm = memory.norm.to(compute).repeat_interleave(group, dim=1)  # (b, heads, d_k)
    sq = sigma_q.to(compute)
    numerator = sq @ matrix  # (b, heads, seq, d_v)
    denominator = (sq * norm[:, :, None, :]).sum(-1, keepdim=True)  # (b, heads, seq, 1)
    # Guard for the empty memory (z = 0, hence M = 0 and numerator = 0): divide by 1 instead of 0.
    safe = torch.where(denominator == 0, torch.ones_like(denominator), denominator)
    return (numerator / safe).to(sigma_q.dtype)


def update(sigma_k: torch.Tensor, values: torch.Tensor, memory: Memory, rule: str = "linear") -> Memory:
    """Store one segment: the linear (eq. 4) or delta (eq. 5) rule for ``M``, and ``z += Σ_t σ(K_t)``.

    Args:
        sigma_k: ``(batch, kv_heads, seq, d_k)`` σ of the segment's keys.
        values: ``(batch, kv_heads, seq, d_v)``.
        memory: the memory before the segment.
        rule: ``"linear"`` or ``"delta"`` (which stores only what the memory does not already return).
    """
    require_choice("rule", rule, MEMORY_UPDATES)
    compute = torch.promote_types(accumulation_dtype(sigma_k), memory.matrix.dtype)
    sigma_k, values = sigma_k.to(compute), values.to(compute)  # the memory accumulates in fp32 (see module doc)
    if rule == "delta":
        values = values - retrieve(sigma_k, memory)  # (b, kv, seq, d_v)
    matrix = memory.matrix.to(compute) + sigma_k.transpose(-1, -2) @ values  # (b, kv, d_k, d_v)
    return Memory(matrix, memory.norm.to(compute) + sigma_k.sum(dim=2))


class InfiniAttention(GroupedProjections):
    """Grouped-query Infini-attention: causal attention inside each segment, compressive memory across them.

    The projections of :class:`~ropekit.model.projections.GroupedProjections` (as the tiny model's attention)
    plus ``gate``, the per-head ``β`` (initialised to 0, i.e. an even mix).
    """

    def __init__(self, config: TinyConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__(config, rotary)
        self.gate = nn.Parameter(torch.zeros(config.n_heads))

    def empty_memory(self, batch: int, like: torch.Tensor) -> Memory:
        hd = self.config.head_dim
        return Memory.empty(batch, self.config.n_kv_heads, hd, hd, like=like)

    def segment(self, x: torch.Tensor, memory: Memory | None = None) -> tuple[torch.Tensor, Memory]:
        """One segment (at most ``segment_length`` tokens): its output and the memory after it.

        Args:
            x: ``(batch, seq, d_model)``.
            memory: the memory before this segment (``None``: empty).

        Returns:
            ``(batch, seq, d_model)`` and the updated :class:`Memory`.
        """
        local, from_memory, memory = self.parts(x, memory)
        g = torch.sigmoid(self.gate)[None, :, None, None]  # (1, h, 1, 1)
        mixed = g * from_memory + (1 - g) * local  # (b, h, s, hd)
        batch, seq, _ = x.shape
        return self.o_proj(mixed.transpose(1, 2).reshape(batch, seq, -1)), memory  # (b, s, d_model)

    def parts(self, x: torch.Tensor, memory: Memory | None = None) -> tuple[torch.Tensor, torch.Tensor, Memory]:
        """The two things the gate mixes, before mixing: ``A_local`` and ``A_mem`` ``(batch, heads, seq, hd)``,
        and the memory after the segment (for diagnostics: how large each head's memory read is)."""
        batch, seq, _ = x.shape
        cfg = self.config
        if seq > cfg.segment_length:
            raise ValueError(f"a segment has at most segment_length={cfg.segment_length} tokens, got {seq}")
        if memory is None:
            memory = self.empty_memory(batch, x)
        hd = cfg.head_dim
        q = self.q_proj(x).view(batch, seq, cfg.n_heads, hd)  # (b, s, h, hd)
        k = self.k_proj(x).view(batch, seq, cfg.n_kv_heads, hd)  # (b, s, kv, hd)
        v = self.v_proj(x).view(batch, seq, cfg.n_kv_heads, hd).transpose(1, 2)  # (b, kv, s, hd)
        sigma_q = elu_plus_one(q.transpose(1, 2))  # (b, h, s, hd), before RoPE: the memory is position-free
        sigma_k = elu_plus_one(k.transpose(1, 2))  # (b, kv, s, hd)
        if self.rotary is not None:
            q, k = self.rotary(q, k, torch.arange(seq, device=x.device))  # positions restart every segment
        local = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v, is_causal=True, enable_gqa=True
        )  # (b, h, s, hd)
        from_memory = retrieve(sigma_q, memory)  # (b, h, s, hd)
        return local, from_memory, update(sigma_k, v, memory, cfg.memory_update)

    def forward(self, x: torch.Tensor, memory: Memory | None = None) -> tuple[torch.Tensor, Memory]:
        """Any length, segment by segment: ``(batch, seq, d_model)`` → same shape, and the final memory."""
        outputs = []
        for start in range(0, x.shape[1], self.config.segment_length):
            out, memory = self.segment(x[:, start : start + self.config.segment_length], memory)
            outputs.append(out)
        if memory is None:
            memory = self.empty_memory(x.shape[0], x)
        return torch.cat(outputs, dim=1) if outputs else x.new_zeros(x.shape), memory

    def gate_values(self) -> list[float]:
        """``sigmoid(β)`` per query head: how much each head's output comes from its memory."""
        return [round(float(g), 6) for g in torch.sigmoid(self.gate.detach())]
