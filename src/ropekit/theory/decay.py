"""Long-term decay of RoPE scores: the ones-vector score, RoFormer's upper bound, and B_m(b) (numpy only).

All three are functions of the relative distance m and the frequencies θ_i = b^(−2i/d):

* g(m) = 2·Σ_i cos(m·θ_i): the score ⟨R_m 1, 1⟩ of all-ones query and key (seed 001).
* RoFormer's bound (arXiv 2104.09864, §3.4.3): by Abel summation |Σ_j h_j e^{i m θ_j}| <=
  (max_j |h_{j+1} − h_j|)·Σ_j |S_j| with S_j = Σ_{k<j} e^{i m θ_k}; the relative part (1/(d/2))·Σ_{j=1}^{d/2} |S_j|
  decays with m, though not monotonically.
* B_m(b) = Σ_i cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8): the expected score gap between a similar and a
  random key, divided by 2σ² (see :mod:`ropekit.theory.similar_tokens`). It equals g(m)/2.

B_m is computed in one place, :func:`similarity_sum` (any frequencies, so scaled ones too), and "the first m with
B_m < 0" in one place, :func:`first_negative_m`; :func:`similarity_margin` and the base bound
(:mod:`ropekit.theory.bound`) call them. Values within :func:`tolerance` of zero count as zero.
"""

from __future__ import annotations

import math

import numpy as np

from ropekit.scaling.registry import inv_freq

ArrayLike = float | int | np.ndarray | list

_EPS = float(np.finfo(np.float64).eps)
#: distances per chunk in :func:`similarity_sum` (bounds the (chunk, d/2) temporary to a few MB).
_CHUNK = 8192
#: :func:`first_negative_m` evaluates blocks of at most this many consecutive m with one matrix product.
_MAX_BLOCK = 1024


def tolerance(m: ArrayLike, head_dim: int) -> float | np.ndarray:
    """Values of B_m with |B_m| below this count as zero: 8·(d/2)·(m+1)·ε bounds the rounding of the phases."""
    return 8 * (head_dim // 2) * (np.asarray(m, dtype=np.float64) + 1) * _EPS


def similarity_sum(m: ArrayLike, frequencies: np.ndarray) -> np.ndarray:
    """B_m = Σ_i cos(m·f_i) for any frequencies f (Men et al., arXiv 2405.14591, eq. 8), summed pair by pair.

    The one place B_m is computed: with f = θ_i = b^(−2i/d) it is :func:`similarity_margin`; with a scaling
    method's frequencies it is that method's B_m. Float64, in chunks of m.

    Args:
        m: relative distance(s), any shape.
        frequencies: the d/2 angular frequencies, shape ``(d/2,)``.

    Returns:
        float64 array with the shape of ``m``.
    """
    m = np.asarray(m, dtype=np.float64)
    frequencies = np.asarray(frequencies, dtype=np.float64)
    flat = m.reshape(-1)
    out = np.empty(flat.shape)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start : start + _CHUNK]
        out[start : start + _CHUNK] = np.cos(np.multiply.outer(part, frequencies)).sum(axis=-1)  # (chunk, d/2)
    return out.reshape(m.shape)


def first_negative_m(frequencies: np.ndarray, limit: int, *, start: int = 0) -> int | None:
    """The first m in [start, limit) with B_m < −tolerance(m) for the frequencies f, or ``None`` if there is none.

    Every m is checked: blocks of K consecutive m are evaluated with one matrix product
    (cos((m0+k)f) = cos(m0 f)cos(k f) − sin(m0 f)sin(k f)), growing chunks stop at the first chunk that holds a
    candidate, and candidates are confirmed by direct summation (:func:`similarity_sum`), so the answer does not
    depend on the block identity's rounding. For b = 1e4, d = 128 this is 1707.

    Args:
        frequencies: the d/2 angular frequencies, shape ``(d/2,)``.
        limit: scan m < limit.
        start: the first m scanned.

    Returns:
        The first negative m, or ``None``.
    """
    frequencies = np.asarray(frequencies, dtype=np.float64)
    head_dim = 2 * frequencies.size
    length = limit - start
    if length <= 0:
        return None
    block = int(min(_MAX_BLOCK, 2 ** math.ceil(math.log2(math.sqrt(length) + 1))))
    offsets = np.arange(block, dtype=np.float64)[:, None] * frequencies  # (K, d/2)
    rows = np.concatenate([np.cos(offsets), -np.sin(offsets)], axis=1)  # (K, d): [cos kf | −sin kf]
    columns = 4
    while start < limit:
        count = min(columns, -(-(limit - start) // block))
        starts = (start + block * np.arange(count, dtype=np.float64))[None, :] * frequencies[:, None]  # (d/2, J)
        values = (rows @ np.concatenate([np.cos(starts), np.sin(starts)], axis=0)).T.reshape(-1)  # m = start + j·K + k
        m = start + np.arange(min(values.size, limit - start))
        values = values[: m.size]
        candidates = m[values < -tolerance(m, head_dim) / 2]  # the block values are good to ~(d/2)·m·ε
        if candidates.size:
            confirmed = candidates[similarity_sum(candidates, frequencies) < -tolerance(candidates, head_dim)]
            if confirmed.size:
                return int(confirmed[0])
        start += count * block
        columns = min(2 * columns, max(1, (1 << 20) // block))
    return None


def _distances(m: ArrayLike) -> np.ndarray:
    return np.asarray(m, dtype=np.float64)


def ones_score(m: ArrayLike, dim: int, base: float = 10000.0) -> np.ndarray:
    """g(m) = 2·Σ_i cos(m·θ_i): the RoPE score of all-ones query and key at relative distance m.

    Example (seed 001): with b = 1e4 and d = 4, θ = {1, 0.01} and g has period 200π; with d = 256, g(0) = 256 and
    g(1000) ≈ 49.3.

    Args:
        m: relative distance(s), any shape.
        dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``.
    """
    return 2 * similarity_margin(m, dim, base)


def similarity_margin(m: ArrayLike, dim: int, base: float = 10000.0) -> np.ndarray:
    """B_m(b) = Σ_{i<d/2} cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8), in float64.

    Args:
        m: relative distance(s), any shape.
        dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``; B_0 = d/2.
    """
    return similarity_sum(_distances(m), inv_freq(dim, base))


def roformer_upper_bound(m: ArrayLike, dim: int, base: float = 10000.0) -> np.ndarray:
    """RoFormer's relative upper bound (1/(d/2))·Σ_{j=1}^{d/2} |S_j|, S_j = Σ_{k=0}^{j−1} e^{i m θ_k}.

    RoFormer (arXiv 2104.09864), §3.4.3, eq. 37: the score of any query and key is at most
    (max_i |h_{i+1} − h_i|)·Σ_j |S_j|; this is the m-dependent factor, normalised by d/2. For d = 128, b = 1e4 it is
    32.5 at m = 0 and ≈ 6.55 at m = 250, and not monotone in m.

    Args:
        m: relative distance(s), any shape.
        dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``.
    """
    theta = inv_freq(dim, base)
    m = _distances(m)
    partial = np.cumsum(np.exp(1j * m[..., None] * theta), axis=-1)  # (..., d/2): S_1 … S_{d/2}
    return np.abs(partial).mean(axis=-1)
