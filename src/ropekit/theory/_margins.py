"""B_m(u) for one rotary dim and context length: scans, witness searches and certified walks (numpy, float64).

The evaluator behind the exact base bound (:mod:`ropekit.theory.bound`). Bases are handled as u = ln b, so
θ_i = exp(−x_i·u) with x_i = 2i/d, and B_m(u) = Σ_i cos(m·θ_i) (Men et al., arXiv 2405.14591, eq. 8). Full scans
use the one block scan of :func:`~ropekit.theory.decay.margin_chunks`; values within
:func:`~ropekit.theory.decay.tolerance` of zero count as zero. The walk and the search run as compiled loops with
numba from L = 32768 on (:mod:`ropekit.theory._bound_jit`; same results).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ropekit.theory import _bound_jit
from ropekit.theory.decay import margin_chunks, negative_in_chunk, similarity_sum, tolerance


class _Margins:
    """Evaluates B_m(u) = Σ_i cos(m·exp(−x_i·u)) for one rotary dim and context length, in float64."""

    def __init__(self, rotary_dim: int, context_length: int) -> None:
        self.length = context_length
        self.x = np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim  # (d/2,): θ_i = exp(−x_i·u)
        self.x2 = self.x * self.x
        self.unit = float(tolerance(0, rotary_dim))  # tolerance(m) = unit·(m+1)
        self.scans = 0

    def theta(self, u: float) -> np.ndarray:
        return np.exp(-self.x * u)

    def direct(self, m: np.ndarray, u: float) -> np.ndarray:
        """B_m(u) for an array of m, summed pair by pair."""
        return similarity_sum(m, self.theta(u))

    def tol(self, m: np.ndarray) -> np.ndarray:
        return self.unit * (np.asarray(m, dtype=np.float64) + 1)

    def chunks(self, u: float, *, first: int = 4) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (m0, B_m(u) for m = m0, m0+1, …) in growing chunks until m reaches L (one full scan)."""
        self.scans += 1
        return margin_chunks(self.theta(u), self.length, first=first)

    def scan(self, u: float) -> np.ndarray:
        """B_m(u) for every m in [0, L), shape ``(L,)``."""
        return np.concatenate([values for _, values in self.chunks(u, first=1 << 20)])

    def first_negative(self, u: float) -> tuple[np.ndarray, np.ndarray]:
        """Scan m upwards until a chunk holds an m with B_m(u) < −tolerance(m) (confirmed by direct summation).

        Returns:
            (the confirmed negative m of that chunk, sorted; the values of m = 0 … end of that chunk). Both
            cover all L values of m when none is negative.
        """
        theta = self.theta(u)
        seen = [np.zeros(0)]
        for start, values in self.chunks(u):
            seen.append(values)
            negative = negative_in_chunk(start, values, theta)
            if negative.size:
                return negative, np.concatenate(seen)
        return np.zeros(0, dtype=np.int64), np.concatenate(seen)

    def around(self, centres: np.ndarray, u: float, width: int) -> tuple[np.ndarray, np.ndarray]:
        """B_m(u) for m in centre ± width (and a few more), by the block identity with blocks of K ≈ √(2w+1) m.

        Returns (m, values), both flat; m may fall outside [0, L) (:meth:`confirmed_negative` drops those).
        """
        theta = self.theta(u)
        block = 1 << max(0, math.ceil(math.log2(math.sqrt(2 * width + 1))))
        offsets = np.arange(block, dtype=np.float64)[:, None] * theta  # (K, d/2)
        rows = np.concatenate([np.cos(offsets), -np.sin(offsets)], axis=1)  # (K, d)
        starts = (centres[:, None] - width + block * np.arange(-(-(2 * width + 1) // block))).reshape(-1)  # (J',)
        phase = np.multiply.outer(theta, starts.astype(np.float64))  # (d/2, J')
        values = rows @ np.concatenate([np.cos(phase), np.sin(phase)], axis=0)  # (K, J')
        m = starts[None, :] + np.arange(block)[:, None]  # (K, J')
        return m.reshape(-1), values.reshape(-1)

    def search(self, centres: np.ndarray, u: float, width: int) -> np.ndarray:
        """The witnesses (m with B_m(u) < −tolerance(m), direct sum) within ``width`` of the centres, sorted."""
        kernels = _bound_jit.compiled(self.length)
        if kernels is not None:  # the same search, compiled (_bound_jit.py)
            centres = np.asarray(centres, dtype=np.int64)
            return kernels.search(centres, float(u), int(width), self.x, self.unit, self.length)
        return self.confirmed_negative(self.candidates(*self.around(centres, u, width)), u)

    def confirmed_negative(self, m: np.ndarray, u: float) -> np.ndarray:
        """The m (in range, de-duplicated) with B_m(u) < −tolerance(m) by direct summation."""
        m = np.unique(m[(m >= 0) & (m < self.length)])
        return m[self.direct(m, u) < -self.tol(m)] if m.size else m

    def candidates(self, m: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The m whose (block-evaluated) value is below −tolerance(m)/2: worth confirming."""
        return m[values < -self.tol(m) / 2]

    def taylor(self, m: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """B_m(u), dB_m/du and a bound on |d²B_m/du²| over [u, ∞), for arrays m, u of equal shape."""
        phase = m[:, None] * np.exp(np.multiply.outer(u, -self.x))  # (K, d/2): φ_i = m·θ_i(u)
        value = np.cos(phase).sum(axis=1)
        slope = (phase * np.sin(phase)) @ self.x
        curvature = (phase * (1 + phase)) @ self.x2
        return value, slope, curvature

    def walk(
        self, m: np.ndarray, u: float, until: float, *, negative: bool, max_steps: int = 400
    ) -> tuple[np.ndarray, np.ndarray]:
        """Walk each m forward from u while B_m keeps its side of −tol, in steps the curvature bound proves safe.

        ``negative=True`` expects B_m(u) < −tol and finds where B_m first climbs to −tol (the right end of its
        negative stretch). ``negative=False`` expects B_m(u) >= −tol and finds where B_m first falls to −tol
        (to within rounding). Between u and the returned point the sign is proved.

        Returns:
            (where each walk ended, shape ``(K,)``; whether it ended at a crossing, shape ``(K,)``). A walk that
            reached ``until`` or ran out of steps has ``False``.
        """
        m = np.asarray(m, dtype=np.float64)
        at = np.full(m.shape, float(u))
        crossed = np.zeros(m.shape, dtype=bool)
        kernels = _bound_jit.compiled(self.length)
        if kernels is not None:  # the same loop, compiled (_bound_jit.py)
            until_each = np.full(m.shape, float(until))
            kernels.walk(m, at.copy(), until_each, self.x, self.x2, self.unit, negative, max_steps, at, crossed)
            return at, crossed
        tolerances = self.tol(m)
        index = np.arange(m.size)  # the walks still going
        for _ in range(max_steps):
            if not index.size:
                break
            here = at[index]
            value, slope, curvature = self.taylor(m[index], here)
            tol = tolerances[index]
            level = value + tol  # signed distance to the level −tolerance(m)
            # a step below the spacing of floats at u cannot move u: the crossing is there to within rounding
            unresolved = np.abs(level) <= np.abs(slope) * 4 * np.spacing(here)
            if negative:
                stop = (level >= 0) | (unresolved & (slope > 0))
                with np.errstate(divide="ignore", invalid="ignore"):  # stopped walks (level > 0) may give NaN
                    root = np.sqrt(slope * slope - 2 * curvature * level)  # largest t: level + s·t + c·t²/2 <= 0
                    step = np.where(slope <= 0, (root - slope) / curvature, -2 * level / (root + slope))
            else:
                # a crossing is B_m falling through −tolerance(m); where it only touches the level and climbs
                # again (as where an island starts) rounding may put it a hair below: step on
                stop = ((level <= 1e-3 * tol) | unresolved) & (slope < 0)
                positive = np.maximum(level, 0)
                root = np.sqrt(slope * slope + 2 * curvature * positive)  # largest t: level + s·t − c·t²/2 >= 0
                with np.errstate(divide="ignore", invalid="ignore"):  # the branch np.where discards may be 0/0
                    step = np.where(slope >= 0, (root + slope) / curvature, 2 * positive / (root - slope))
            crossed[index[stop]] = True
            new = np.where(stop, here, np.minimum(here + step, until))
            at[index] = new
            index = index[~(stop | (new >= until))]
        return at, crossed
