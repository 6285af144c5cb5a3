"""Monte Carlo check of the similar-token property behind the base bound (numpy only).

Men et al. (arXiv 2405.14591, Theorem 1): for i.i.d. random query and key vectors q, k with per-entry
standard deviation σ and a similar key k* = q + ε (ε zero-mean, independent),

    E[qᵀ R_m k*] − E[qᵀ R_m k] = σ²·tr(R_m) = 2σ²·B_m(b),   B_m(b) = Σ_i cos(m·θ_i).

The estimate below draws ``samples`` triples (q, k, ε) and averages the paired difference
qᵀR_m k* − qᵀR_m k = qᵀR_m (q + ε − k) for each distance m. Its standard error is the sample standard deviation
over √samples, so the check shrinks as 1/√N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ropekit._validate import require_float, require_int
from ropekit.scaling.registry import inv_freq
from ropekit.theory.decay import similarity_margin


@dataclass(frozen=True)
class SimilarTokenCheck:
    """Measured and predicted gap E[qᵀR_m k*] − E[qᵀR_m k] per distance.

    Attributes:
        distances: the distances m, shape ``(M,)``.
        measured: the Monte Carlo mean of the paired difference, shape ``(M,)``.
        stderr: its standard error, shape ``(M,)``.
        predicted: 2σ²·B_m(b), shape ``(M,)``.
        samples: the number of Monte Carlo draws N.
    """

    distances: np.ndarray
    measured: np.ndarray
    stderr: np.ndarray
    predicted: np.ndarray
    samples: int

    @property
    def z_scores(self) -> np.ndarray:
        """(measured − predicted) / stderr: about standard normal when the theorem holds."""
        return (self.measured - self.predicted) / self.stderr


def rotate_pairs(vectors: np.ndarray, distance: float, theta: np.ndarray) -> np.ndarray:
    """R_m·v for interleaved pairs (0,1),(2,3),… — the explicit rotation of RoFormer eq. 15.

    Shapes:
        vectors: ``(N, d)``; theta: ``(d/2,)``; returns ``(N, d)``.
    """
    angle = distance * theta  # (d/2,)
    cos, sin = np.cos(angle), np.sin(angle)
    pairs = vectors.reshape(len(vectors), -1, 2)  # (N, d/2, 2)
    first, second = pairs[..., 0], pairs[..., 1]
    rotated = np.stack([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (N, d/2, 2)
    return rotated.reshape(vectors.shape)  # (N, d)


def similar_token_check(
    distances: list[int] | np.ndarray,
    dim: int,
    base: float = 10000.0,
    *,
    samples: int = 20000,
    sigma: float = 1.0,
    mean: float = 0.0,
    noise: float = 0.5,
    seed: int = 0,
) -> SimilarTokenCheck:
    """Monte Carlo estimate of E[qᵀR_m k*] − E[qᵀR_m k] beside the prediction 2σ²·B_m(b).

    q and k have i.i.d. Gaussian entries with the given ``mean`` and ``sigma``; ε has zero mean and standard
    deviation ``noise``. The theorem holds for any mean shared by q and k and any zero-mean ε.

    Args:
        distances: the relative distances m to check.
        dim: the rotary dimension d (even).
        base: the RoPE base b.
        samples: the number of draws N (the standard error shrinks as 1/√N).
        sigma: per-entry standard deviation σ of q and k.
        mean: per-entry mean of q and k.
        noise: standard deviation of ε.
        seed: seed of the numpy generator.

    Returns:
        A :class:`SimilarTokenCheck`.
    """
    require_int("samples", samples, minimum=2)
    sigma = require_float("sigma", sigma, above=0.0)
    require_float("noise", noise, at_least=0.0)
    theta = inv_freq(dim, base)
    distances = np.asarray(distances, dtype=np.float64)
    rng = np.random.default_rng(seed)
    query = rng.normal(mean, sigma, size=(samples, dim))  # (N, d)
    key = rng.normal(mean, sigma, size=(samples, dim))  # (N, d)
    similar = query + rng.normal(0.0, noise, size=(samples, dim))  # (N, d): k* = q + ε
    measured, stderr = [], []
    for m in distances:
        difference = np.einsum("nd,nd->n", query, rotate_pairs(similar - key, m, theta))  # (N,)
        measured.append(difference.mean())
        stderr.append(difference.std(ddof=1) / math.sqrt(samples))
    return SimilarTokenCheck(
        distances=distances,
        measured=np.array(measured),
        stderr=np.array(stderr),
        predicted=2 * sigma**2 * similarity_margin(distances, dim, base),
        samples=samples,
    )
