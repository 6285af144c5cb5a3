"""RotaryEmbedding: a module that owns a RopeConfig's frequencies and a growing cos/sin cache."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ropekit._validate import require_int
from ropekit.config import RopeConfig
from ropekit.functional import _check_positions, apply_rope, cos_sin
from ropekit.scaling.registry import Frequencies, frequencies


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

    Args:
        config: the rotary config.
        max_positions: optional hard limit; positions at or beyond it raise ``ValueError``.

    Shapes:
        q: ``(batch, seq, q_heads, head_dim)``, k: ``(batch, seq, kv_heads, head_dim)`` (``seq_dim=1``), or
        heads before seq with ``seq_dim=2``. positions: ``(seq,)`` or ``(batch, seq)``.
    """

    def __init__(self, config: RopeConfig, *, max_positions: int | None = None) -> None:
        super().__init__()
        if not isinstance(config, RopeConfig):
            raise TypeError(f"config must be a RopeConfig, got {type(config).__name__}")
        self.config = config
        self.max_positions = None if max_positions is None else require_int("max_positions", max_positions, minimum=1)
        self._dynamic = config.scaling is not None and config.scaling.depends_on_seq_len
        self._freq_seq_len: int | None = None
        self._freqs = frequencies(config)
        self._cos: torch.Tensor | None = None
        self._sin: torch.Tensor | None = None

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
        size = max(256, 1 << (needed - 1).bit_length())
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
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tables for ``positions`` (with the attention factor applied).

        Args:
            positions: integer ``(seq,)`` or ``(batch, seq)``, values >= 0.
            device: where the tables go (default ``positions.device``).
            dtype: ``torch.float32`` reads the fp32 cache; ``torch.float64`` computes exact tables directly, so
                float64 inputs keep float64 accuracy.

        Returns:
            ``(cos, sin)`` of shape ``positions.shape + (rotary_dim // 2,)``.
        """
        _check_positions(positions)
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if positions.numel() == 0:
            empty = torch.empty(*positions.shape, self.rotary_dim // 2, device=device or positions.device, dtype=dtype)
            return empty, empty.clone()
        largest = int(positions.max())
        if self.max_positions is not None and largest >= self.max_positions:
            raise ValueError(f"position {largest} is beyond max_positions={self.max_positions} of this RotaryEmbedding")
        if self._dynamic:
            self._update_for_length(largest + 1)
        device = device or positions.device
        if dtype == torch.float64:
            return cos_sin(positions.to(device), self._freqs, dtype=torch.float64)
        self._ensure_cache(largest + 1, device)
        index = positions.to(device)
        return self._cos[index], self._sin[index]

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
        table_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(positions, device=q.device, dtype=table_dtype)
        kwargs = {"interleaved": self.config.interleaved, "seq_dim": seq_dim}
        return apply_rope(q, cos, sin, **kwargs), apply_rope(k, cos, sin, **kwargs)
