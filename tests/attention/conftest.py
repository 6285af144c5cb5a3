"""Naive oracles written from each paper: the relative position a (query i, key j) pair sees, pair by pair, then
float64 scores ``q_i · R(r) k_j`` by complex multiplication, the softmax and the values.

Nothing here imports :mod:`ropekit.attention`: the definitions are written again, from the papers. Tests get
this module through the ``oracle`` fixture.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch


def self_extend(i: int, j: int, *, group: int, window: int) -> float:
    """Jin et al. 2024 (arXiv 2401.01325), eq. 3-4: neighbour positions, or grouped ones shifted by w − w // G."""
    if i - j < window:
        return i - j
    return (i // group + window - window // group) - j // group


def rerope(i: int, j: int, *, window: int) -> float:
    """Su 2023: min(i − j, w)."""
    return min(i - j, window)


def leaky_rerope(i: int, j: int, *, window: int, k: float) -> float:
    """Su 2023: i − j inside w, w + (i − j − w) / k beyond."""
    return i - j if i - j < window else window + (i - j - window) / k


def dual_chunk(i: int, j: int, *, chunk_size: int, local_window: int) -> float:
    """An et al. 2024 (arXiv 2402.17463) section 3: keys at j mod s; queries at i mod s (same chunk),
    min(s + i mod s, c − 1) (previous chunk), c − 1 (older chunks), with c = s + w."""
    s, c = chunk_size, chunk_size + local_window
    if i // s == j // s:
        query = i % s
    elif i // s - j // s == 1:
        query = min(s + i % s, c - 1)
    else:
        query = c - 1
    return query - j % s


def sinks(i: int, j: int, *, n_sink: int, window: int) -> float | None:
    """Xiao et al. 2023 (arXiv 2309.17453): the window keeps i − j; a sink s is seen from the query's cache
    position min(i, n_sink + window − 1); other keys are evicted (None)."""
    if i - j < window:
        return i - j
    if j < n_sink:
        return min(i, n_sink + window - 1) - j
    return None


def string(i: int, j: int, *, shift: int, local: int) -> float:
    """An et al. 2024 (arXiv 2410.18745) section 4: d = i − j below the shift S, d − S + W at or beyond it."""
    return i - j if i - j < shift else i - j - shift + local


#: parameters far below the test lengths, so every region of every method is exercised
CASES = {
    "self_extend": {"group": 3, "window": 20},
    "rerope": {"window": 24},
    "leaky_rerope": {"window": 24, "k": 3.5},
    "dual_chunk": {"chunk_size": 28, "local_window": 6},
    "sinks": {"n_sink": 3, "window": 30},
    "string": {"shift": 53, "local": 6},
}

ORACLES = {
    "self_extend": self_extend,
    "rerope": rerope,
    "leaky_rerope": leaky_rerope,
    "dual_chunk": dual_chunk,
    "sinks": sinks,
    "string": string,
}


def relative_positions(name: str, length: int, **params) -> list[list[float | None]]:
    """The (length × length) relative positions, None where a pair is not attended (j > i or evicted)."""
    rule = ORACLES[name]
    return [[rule(i, j, **params) if j <= i else None for j in range(length)] for i in range(length)]


def rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE by complex multiplication in float64: pair (x_m, x_{m+r/2}) times exp(i · p · θ_m).

    Shapes: x ``(..., head_dim)``, positions broadcastable to ``x.shape[:-1]``.
    """
    half = inv_freq.numel()
    x = x.double()
    pairs = torch.complex(x[..., :half], x[..., half : 2 * half])
    turned = pairs * torch.polar(torch.ones_like(inv_freq), positions.double()[..., None] * inv_freq)
    tail = x[..., 2 * half :].expand(*turned.shape[:-1], -1)
    return torch.cat((turned.real, turned.imag, tail), dim=-1)


def attention(
    name: str, q, k, v, inv_freq, scale: float | None = None, /, *, rotated: bool = False, **params
) -> torch.Tensor:
    """Oracle attention: ``q`` ``(b, hq, s, d)``, ``k``/``v`` ``(b, hkv, s, d)`` → ``(b, hq, s, d)`` float64.

    The score of (i, j) is ``(R(r_ij) q_i) · k_j``: RoPE's score depends only on the relative position r. With
    ``rotated=True``, q and k come rotated at their true positions (inside a model), which already gives
    ``i − j``, so q_i turns by ``r_ij − (i − j)`` more.
    """
    _, heads, length, dim = q.shape
    groups = heads // k.shape[1]
    k = k.double().repeat_interleave(groups, dim=1)
    v = v.double().repeat_interleave(groups, dim=1)
    scale = dim**-0.5 if scale is None else scale
    table = relative_positions(name, length, **params)
    rel = torch.tensor([[0.0 if r is None else r for r in row] for row in table], dtype=torch.float64)
    allowed = torch.tensor([[r is not None for r in row] for row in table])
    if rotated:
        index = torch.arange(length, dtype=torch.float64)
        rel = rel - (index[:, None] - index[None, :])
    turned = rotate(q[:, :, :, None, :], rel, inv_freq.double())  # (b, h, i, j, d): q_i rotated by r_ij
    scores = (turned * k[:, :, None, :, :]).sum(-1) * scale  # (b, h, i, j)
    scores = scores.masked_fill(~allowed, -math.inf)
    return torch.softmax(scores, dim=-1) @ v


@pytest.fixture
def oracle():
    """This module: the oracles of every method."""
    return sys.modules[__name__]
