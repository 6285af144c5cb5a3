"""Long-term decay of RoPE scores: the ones-vector score, RoFormer's upper bound, and B_m(b) (numpy only).

All three are functions of the relative distance m and the frequencies θ_i = b^(−2i/d):

* g(m) = 2·Σ_i cos(m·θ_i): the score ⟨R_m 1, 1⟩ of all-ones query and key.
* RoFormer's bound (arXiv 2104.09864, §3.4.3): by Abel summation |Σ_j h_j e^{i m θ_j}| <=
  (max_j |h_{j+1} − h_j|)·Σ_j |S_j| with S_j = Σ_{k<j} e^{i m θ_k}; the relative part (1/(d/2))·Σ_{j=1}^{d/2} |S_j|
  decays with m, though not monotonically.
* B_m(b) = Σ_i cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8): the expected score gap between a similar and a
  random key, divided by 2σ² (see :mod:`ropekit.theory.similar_tokens`). It equals g(m)/2.

B_m by direct summation lives in :func:`similarity_sum` (any frequencies, so scaled ones too), and the scan over
every m, a block of consecutive m per matrix product, in :func:`margin_chunks` with its confirmation by direct
summation in :func:`negative_in_chunk`: :func:`first_negative_m` ("the first m with B_m < 0") and the full scans of
the base bound (:mod:`ropekit.theory.bound`) both use them. The bound's certified walks and grouped bounds
(:mod:`ropekit.theory._margins`, :mod:`ropekit.theory._certificates`) evaluate B_m together with its derivatives
over bases. Values within :func:`tolerance` of zero count as zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ropekit.scaling.registry import inv_freq

ArrayLike = float | int | np.ndarray | list

_EPS = float(np.finfo(np.float64).eps)
#: distances per chunk in :func:`similarity_sum` (bounds the (chunk, d/2) temporary to a few MB).
_CHUNK = 8192
#: :func:`margin_chunks` evaluates blocks of at most this many consecutive m with one matrix product.
_MAX_BLOCK = 1024


def tolerance(m: ArrayLike, rotary_dim: int) -> float | np.ndarray:
    """Values of B_m with |B_m| below this count as zero: 8·(d/2)·(m+1)·ε bounds the rounding of the phases.

    Example:
        >>> float(tolerance(0, 128)) == 512 * 2.0**-52
        True
    """
    return 8 * (rotary_dim // 2) * (np.asarray(m, dtype=np.float64) + 1) * _EPS


def similarity_sum(m: ArrayLike, frequencies: np.ndarray) -> np.ndarray:
    """B_m = Σ_i cos(m·f_i) for any frequencies f (Men et al., arXiv 2405.14591, eq. 8), summed pair by pair.

    B_m by direct summation: with f = θ_i = b^(−2i/d) it is :func:`similarity_margin`; with a scaling
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


def margin_chunks(
    frequencies: np.ndarray, limit: int, *, start: int = 0, first: int = 4
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (m0, B_m for m = m0, m0+1, …) in growing chunks until m reaches ``limit``: the one block scan.

    Blocks of K consecutive m share cos(kf), sin(kf) for k < K; each block start m0 contributes cos(m0 f),
    sin(m0 f); one matrix product combines them (cos((m0+k)f) = cos(m0 f)cos(kf) − sin(m0 f)sin(kf)). The error is
    about (d/2)·m·ε, from the phases m0·f. Chunks start with ``first`` blocks and double up to 2**20 values, so an
    early stop costs little. Used by :func:`first_negative_m` and by the base bound's full scans.

    Args:
        frequencies: the d/2 angular frequencies, shape ``(d/2,)``.
        limit: scan m < limit.
        start: the first m scanned.
        first: blocks in the first chunk.

    Yields:
        (the chunk's first m, its values, shape ``(J·K,)`` with m = m0 + j·K + k, cut at ``limit``).
    """
    block = int(min(_MAX_BLOCK, 2 ** math.ceil(math.log2(math.sqrt(max(limit - start, 0)) + 1))))
    offsets = np.arange(block, dtype=np.float64)[:, None] * frequencies  # (K, d/2)
    rows = np.concatenate([np.cos(offsets), -np.sin(offsets)], axis=1)  # (K, d): [cos kf | −sin kf]
    columns = first
    while start < limit:
        count = min(columns, -(-(limit - start) // block))
        starts = (start + block * np.arange(count, dtype=np.float64))[None, :] * frequencies[:, None]  # (d/2, J)
        cols = np.concatenate([np.cos(starts), np.sin(starts)], axis=0)  # (d, J)
        # (J, K) straight from the product (transposed operands cost BLAS nothing; a transposed result a copy)
        yield start, (cols.T @ rows.T).reshape(-1)[: limit - start]  # (J·K,): m = start + j·K + k
        start += count * block
        columns = min(2 * columns, max(1, (1 << 20) // block))


def negative_in_chunk(start: int, values: np.ndarray, frequencies: np.ndarray) -> np.ndarray:
    """The m of one chunk of :func:`margin_chunks` with B_m < −tolerance(m), confirmed by direct summation.

    Candidates are the block values below −tolerance(m)/2 (the block values are good to ~(d/2)·m·ε); each is
    confirmed with :func:`similarity_sum`, so the answer does not depend on the block identity's rounding.

    Returns:
        The confirmed m, sorted, int64.
    """
    rotary_dim = 2 * frequencies.size
    # tolerance(m) grows with m: a first pass against the chunk's smallest one keeps a small superset
    rough = np.flatnonzero(values < -tolerance(start, rotary_dim) / 2)
    m = start + rough
    m = m[values[rough] < -tolerance(m, rotary_dim) / 2]
    if not m.size:
        return m
    return m[similarity_sum(m, frequencies) < -tolerance(m, rotary_dim)]


def first_negative_m(frequencies: np.ndarray, limit: int, *, start: int = 0) -> int | None:
    """The first m in [start, limit) with B_m < −tolerance(m) for the frequencies f, or ``None`` if there is none.

    Every m is checked: :func:`margin_chunks` evaluates them a block at a time and stops at the first chunk that
    holds a confirmed negative m (:func:`negative_in_chunk`). For b = 1e4, d = 128 this is 1707
    (tests/theory/test_decay.py checks it against direct summation).

    Args:
        frequencies: the d/2 angular frequencies, shape ``(d/2,)``.
        limit: scan m < limit.
        start: the first m scanned.

    Returns:
        The first negative m, or ``None``.

    Example:
        >>> from ropekit.scaling.registry import inv_freq
        >>> first_negative_m(inv_freq(128, 10000.0), 1 << 16)
        1707
    """
    frequencies = np.asarray(frequencies, dtype=np.float64)
    for chunk_start, values in margin_chunks(frequencies, limit, start=start):
        negative = negative_in_chunk(chunk_start, values, frequencies)
        if negative.size:
            return int(negative[0])
    return None


def _distances(m: ArrayLike) -> np.ndarray:
    return np.asarray(m, dtype=np.float64)


def ones_score(m: ArrayLike, rotary_dim: int, base: float = 10000.0) -> np.ndarray:
    """g(m) = 2·Σ_i cos(m·θ_i): the RoPE score of all-ones query and key at relative distance m.

    Example (tests/theory/test_decay.py): with b = 1e4 and d = 4, θ = {1, 0.01} and g has period 200π; with
    d = 256, g(0) = 256 and g(1000) ≈ 49.3.

    Args:
        m: relative distance(s), any shape.
        rotary_dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``.
    """
    return 2 * similarity_margin(m, rotary_dim, base)


def similarity_margin(m: ArrayLike, rotary_dim: int, base: float = 10000.0) -> np.ndarray:
    """B_m(b) = Σ_{i<d/2} cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8), in float64.

    Args:
        m: relative distance(s), any shape.
        rotary_dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``; B_0 = d/2.
    """
    return similarity_sum(_distances(m), inv_freq(rotary_dim, base))


def roformer_upper_bound(m: ArrayLike, rotary_dim: int, base: float = 10000.0) -> np.ndarray:
    """RoFormer's relative upper bound (1/(d/2))·Σ_{j=1}^{d/2} |S_j|, S_j = Σ_{k=0}^{j−1} e^{i m θ_k}.

    RoFormer (arXiv 2104.09864), §3.4.3, eq. 37: the score of any query and key is at most
    (max_i |h_{i+1} − h_i|)·Σ_j |S_j|; this is the m-dependent factor, normalised by d/2. For d = 128, b = 1e4 it is
    32.5 at m = 0 and ≈ 6.55 at m = 250, and not monotone in m.

    Args:
        m: relative distance(s), any shape.
        rotary_dim: the rotary dimension d (even).
        base: the RoPE base b.

    Returns:
        float64 array with the shape of ``m``.
    """
    theta = inv_freq(rotary_dim, base)
    m = _distances(m)
    partial = np.cumsum(np.exp(1j * m[..., None] * theta), axis=-1)  # (..., d/2): S_1 … S_{d/2}
    return np.abs(partial).mean(axis=-1)
