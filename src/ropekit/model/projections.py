"""The q/k/v/o projections of grouped-query attention, one constructor for the tiny model's attention
(:class:`ropekit.model.tiny.Attention`) and Infini-attention (:class:`ropekit.model.infini.InfiniAttention`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from ropekit.model.tiny import TinyConfig
    from ropekit.module import RotaryEmbedding


class GroupedProjections(nn.Module):
    """``q_proj`` (``n_heads`` heads), ``k_proj`` and ``v_proj`` (``n_kv_heads`` heads) and ``o_proj``, without
    biases, and the rotary embedding the subclass applies to q and k (``None``: no positions, e.g. NoPE)."""

    def __init__(self, config: TinyConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__()
        self.config = config
        self.rotary = rotary
        hd = config.head_dim
        self.q_proj = nn.Linear(config.d_model, config.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(config.n_heads * hd, config.d_model, bias=False)
