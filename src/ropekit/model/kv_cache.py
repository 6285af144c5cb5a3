"""A KV cache for incremental decoding with the tiny model, and causal attention over cached keys.

The cache grows by concatenation along the sequence: a new tensor per step, no preallocated length. Under
``torch.compile(dynamic=True)`` the cached length is one symbolic size, so decode steps of growing length reuse
one compiled graph (prefill, with an empty cache, is a second graph); nothing in the step depends on the length's
value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["KVCache", "causal_attention"]


class KVCache:
    """Keys (after RoPE) and values of every layer so far.

    Shapes: per layer ``(batch, length, kv_heads, head_dim)``; layers are filled in order by the first call.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def length(self, layer: int = 0) -> int:
        """Tokens cached for ``layer`` (0 before the first call)."""
        return self.keys[layer].shape[1] if layer < len(self.keys) else 0

    def update(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's ``(batch, seq, kv_heads, head_dim)`` keys and values; return all of the layer's."""
        if layer == len(self.keys):
            # Own copies, not views of the projections: every later step's tensors are then alike (no view base),
            # so a compiled decode step keeps one set of guards.
            self.keys.append(keys.clone())
            self.values.append(values.clone())
        else:
            self.keys[layer] = torch.cat((self.keys[layer], keys), dim=1)
            self.values[layer] = torch.cat((self.values[layer], values), dim=1)
        return self.keys[layer], self.values[layer]

    def crop(self, length: int) -> None:
        """Keep the first ``length`` cached tokens of every layer (a longer ``length`` keeps everything)."""
        self.keys = [k[:, :length] for k in self.keys]
        self.values = [v[:, :length] for v in self.values]


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int) -> torch.Tensor:
    """Causal grouped-query attention of ``seq`` new queries over ``past`` cached and ``seq`` new keys.

    Query ``i`` (position ``past + i``) sees keys ``0 … past + i``.

    Shapes:
        q ``(batch, heads, seq, hd)``, k and v ``(batch, kv_heads, past + seq, hd)`` → ``(batch, heads, seq, hd)``.
    """
    if past == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if q.shape[2] == 1:  # one new token sees every key
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(past)  # (seq, past + seq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
