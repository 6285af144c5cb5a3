"""Long-term decay of RoPE scores: the ones-vector score, RoFormer's upper bound, and B_m(b) (numpy only).

All three are functions of the relative distance m and the frequencies θ_i = b^(−2i/d):

* g(m) = 2·Σ_i cos(m·θ_i): the score ⟨R_m 1, 1⟩ of all-ones query and key (seed 001).
* RoFormer's bound (arXiv 2104.09864, §3.4.3): by Abel summation |Σ_j h_j e^{i m θ_j}| <=
  (max_j |h_{j+1} − h_j|)·Σ_j |S_j| with S_j = Σ_{k<j} e^{i m θ_k}; the relative part (1/(d/2))·Σ_{j=1}^{d/2} |S_j|
  decays with m, though not monotonically.
* B_m(b) = Σ_i cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8): the expected score gap between a similar and a
  random key, divided by 2σ² (see :mod:`ropekit.theory.similar_tokens`). It equals g(m)/2.
"""

from __future__ import annotations

import numpy as np

from ropekit.scaling.registry import inv_freq

ArrayLike = float | int | np.ndarray | list


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
    theta = inv_freq(dim, base)
    m = _distances(m)
    return np.cos(m[..., None] * theta).sum(axis=-1)  # (..., d/2) summed over pairs


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
