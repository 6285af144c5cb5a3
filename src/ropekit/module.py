"""RotaryEmbedding: a module that owns a RopeConfig's frequencies and a growing cos/sin cache."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ropekit._validate import require_int
from ropekit.config import RopeConfig
from ropekit.functional import apply_rope_qk
from ropekit.scaling.registry import Frequencies, frequencies
from ropekit.tables import _check_positions, capturing, chunk_phases, cos_sin, graph_cos_sin


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys as ``config`` says, with any scaling method and its attention factor.

    The cos/sin cache is fp32, rebuilt from float64 angles, and grows by doubling when a position beyond it
    is requested. It is not a buffer, so ``model.to(torch.bfloat16)`` cannot degrade it; it follows the
    device of the tensors it is applied to.

    Length-dependent methods (dynamic NTK, LongRoPE) without ``fixed_seq_len`` follow transformers: the
    frequencies are recomputed for the current length ``max(position) + 1`` — dynamic grows when that length
    exceeds the largest seen and resets below the original length; LongRoPE switches to the long factors
    above L0. Keys already in a KV cache keep their old rotation; set ``fixed_seq_len`` on the scaling config
    to avoid that.

    The cache holds at most ``cache_limit`` positions (default 2**17: 2 × 64 MiB for 128 rotating pairs);
    tables for positions beyond it are computed directly for each call (exact at any int64 position, see
    :func:`ropekit.cos_sin`), so a far position never builds a table for every smaller one.

    Args:
        config: the rotary config.
        max_positions: optional hard limit; positions at or beyond it raise ``ValueError``.
        cache_limit: most positions kept in the cos/sin cache (>= 1).

    Shapes:
        q: ``(batch, seq, q_heads, head_dim)``, k: ``(batch, seq, kv_heads, head_dim)`` (``seq_dim=1``), or
        heads before seq with ``seq_dim=2``. positions: ``(seq,)`` or ``(batch, seq)``.
    """

    #: default bound on the cached positions
    CACHE_LIMIT = 1 << 17

    def __init__(self, config: RopeConfig, *, max_positions: int | None = None, cache_limit: int = CACHE_LIMIT) -> None:
        super().__init__()
        if not isinstance(config, RopeConfig):
            raise TypeError(f"config must be a RopeConfig, got {type(config).__name__}")
        self.config = config
        self.max_positions = None if max_positions is None else require_int("max_positions", max_positions, minimum=1)
        self.cache_limit = require_int("cache_limit", cache_limit, minimum=1)
        self._dynamic = config.scaling is not None and config.scaling.depends_on_seq_len
        self._freq_seq_len: int | None = None
        self._freqs = frequencies(config)
        self._cos: torch.Tensor | None = None
        self._sin: torch.Tensor | None = None
        # For captured graphs, which cannot read positions: float64 inv_freq and the phases of every chunk level.
        inv_freq = torch.as_tensor(self._freqs.inv_freq, dtype=torch.float64)
        self._graph_freqs = (inv_freq, chunk_phases(inv_freq))

    @property
    def frequencies(self) -> Frequencies:
        """The frequencies currently in use (float64) and their attention factor."""
        return self._freqs

    @property
    def rotary_dim(self) -> int:
        """Dims that rotate: 2 × the number of frequencies (``head_dim`` for proportional RoPE)."""
        return 2 * len(self._freqs.inv_freq)

    def extra_repr(self) -> str:
        return f"{self.config}"

    def _update_for_length(self, seq_len: int) -> None:
        """transformers' rule for length-dependent methods, as each method states it (``recompute_length``)."""
        target = self.config.scaling.recompute_length(self._freq_seq_len, seq_len)
        if target is None:
            return
        self._freq_seq_len = target
        freqs = frequencies(self.config, seq_len=target)
        # A fixed_seq_len method returns the same frequencies for every length: keep the cache then, or decoding
        # past L0 would rebuild the whole table at every new token.
        if freqs.attention_factor != self._freqs.attention_factor or not np.array_equal(
            freqs.inv_freq, self._freqs.inv_freq
        ):
            self._cos = self._sin = None
        self._freqs = freqs

    def _ensure_cache(self, needed: int, device: torch.device) -> None:
        if self._cos is not None and self._cos.shape[0] >= needed and self._cos.device == device:
            return
        size = min(max(256, 1 << (needed - 1).bit_length()), self.cache_limit)
        if self.max_positions is not None:
            size = min(size, self.max_positions)
        positions = torch.arange(size, device=device)
        self._cos, self._sin = cos_sin(positions, self._freqs)

    def cos_sin(
        self,
        positions: torch.Tensor,
        *,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
        length: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tables for ``positions`` (with the attention factor applied).

        Args:
            positions: integer ``(seq,)`` or ``(batch, seq)``, values >= 0.
            device: where the tables go (default ``positions.device``).
            dtype: ``torch.float32`` reads the fp32 cache; ``torch.float64`` computes exact tables directly, so
                float64 inputs keep float64 accuracy.
            length: the sequence length the length-following methods (dynamic NTK's base, LongRoPE's switch) decide
                by; default the largest position + 1. A shard of a sharded sequence passes the whole sequence's
                (:func:`ropekit.integrations.hf.shard_length.sequence_lengths`): its own largest position is not it.

        Returns:
            ``(cos, sin)`` of shape ``positions.shape + (rotary_dim // 2,)``.
        """
        positions, largest = _check_positions(positions)
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if largest is None and capturing() and positions.numel() and not positions.is_meta:
            return self._graph_cos_sin(positions, device or positions.device, dtype)
        if largest is None:  # empty or meta positions
            empty = torch.empty(*positions.shape, self.rotary_dim // 2, device=device or positions.device, dtype=dtype)
            return empty, empty.clone()
        if self.max_positions is not None and largest >= self.max_positions:
            raise ValueError(f"position {largest} is beyond max_positions={self.max_positions} of this RotaryEmbedding")
        if length is not None and require_int("length", length, minimum=1) <= largest:
            raise ValueError(f"length must be above the largest position {largest}, got {length}")
        if self._dynamic:
            self._update_for_length(largest + 1 if length is None else length)
        device = device or positions.device
        if dtype == torch.float64 or largest >= self.cache_limit:
            # Beyond the bounded cache: exact tables for just these positions (never a table of all smaller ones).
            return cos_sin(positions.to(device), self._freqs, dtype=dtype)
        self._ensure_cache(largest + 1, device)
        index = positions.to(device)
        return self._cos[index], self._sin[index]

    def _graph_cos_sin(
        self, positions: torch.Tensor, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tables while a graph is captured (``torch.compile``, ``torch.jit.trace``): no position value is read
        and no cache is touched; the exact tables are computed in the graph (inductor fuses them), and the
        checks eager mode makes on values (>= 0, < ``max_positions``) are assertions inside the graph."""
        if self._dynamic and self.config.scaling.frozen_length() is None:
            raise NotImplementedError(
                f"{self.config.scaling.rope_type} recomputes its frequencies from the largest position, a value a "
                "captured graph cannot read; compile or trace with fixed_seq_len set on the scaling config"
            )
        if self.max_positions is not None:
            torch._assert_async(
                (positions < self.max_positions).all(),
                f"a position is beyond max_positions={self.max_positions} of this RotaryEmbedding",
            )
        inv_freq, phases = self._graph_freqs
        return graph_cos_sin(
            positions.to(device), inv_freq, phases, attention_factor=self._freqs.attention_factor, dtype=dtype
        )

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        offset: int = 0,
        seq_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` (their head counts may differ).

        Args:
            q, k: see Shapes in the class docstring.
            positions: integer positions; default ``offset, offset + 1, …`` along the sequence.
            offset: first position when ``positions`` is not given (KV-cache decoding).
            seq_dim: 1 for ``(batch, seq, heads, head_dim)``, 2 for ``(batch, heads, seq, head_dim)``.
        """
        if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
            raise TypeError(f"q and k must be tensors, got {type(q).__name__} and {type(k).__name__}")
        if positions is None:
            require_int("offset", offset, minimum=0)
            if seq_dim not in (1, 2):
                raise ValueError(f"seq_dim must be 1 or 2, got {seq_dim!r}")
            if q.dim() != 4:
                raise ValueError(f"q must be 4-D (see seq_dim), got shape {tuple(q.shape)}")
            positions = torch.arange(offset, offset + q.shape[seq_dim], device=q.device)
        elif offset != 0:
            raise ValueError(f"pass either positions or offset, not both (got offset={offset!r})")
        head_dim = self.config.head_dim
        for name, t in (("q", q), ("k", k)):
            if t.dim() != 4 or t.shape[-1] != head_dim:
                raise ValueError(
                    f"{name} must be 4-D with head_dim {head_dim} (this RotaryEmbedding's config) as its last dim, "
                    f"got shape {tuple(t.shape)}"
                )
        table_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(positions, device=q.device, dtype=table_dtype)
        return apply_rope_qk(q, k, cos, sin, interleaved=self.config.interleaved, seq_dim=seq_dim)
