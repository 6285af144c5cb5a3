"""The base bound of Men et al. ("Base of RoPE Bounds Context Length", arXiv 2405.14591), computed exactly.

Definition
----------
With θ_i = b^(−2i/d) and B_m(b) = Σ_{i<d/2} cos(m·θ_i) (eq. 8), a base b is *feasible* for a context length L when
B_m(b) >= 0 for every integer m in [0, L) (the similar-token gap of Theorem 1 stays non-negative at every distance
the model sees). B is not monotone in b, so the feasible bases are a union of intervals ("islands"). This module
reports:

* ``smallest_base`` (A): the smallest feasible base (the infimum; feasibility is a closed condition).
* ``robust_base`` (B): the base above which *every* base is feasible (the supremum of the infeasible ones).
* ``islands``: the feasible intervals [low, high] below ``robust_base``; the first starts at ``smallest_base``.
* :func:`max_context_length`: the inverse, the first m with B_m(b) < 0 (so b is feasible for L iff L <= it).
* :func:`smallest_feasible_base`: (A) alone, without the robust sweep (far cheaper for large L).
* :func:`robust_base_only`: (B) alone, by a sweep *down* from the crude bound that never visits the islands.

Values of B_m within ``tolerance(m) = 8·(d/2)·(m+1)·ε`` (float64 ε) of zero count as zero: that bounds the
rounding error of the phases m·θ_i. Bases are handled as u = ln b.

Method (why no island can be stepped over)
------------------------------------------
Every integer m in [0, L) is checked, and every claim about an interval of bases is backed by a certificate:

* **Infeasible stretches** are covered by *witnesses*: an m with B_m < 0, together with the exact interval of
  bases around the current one on which B_m stays negative. That interval is walked with steps that the bound
  |d²B_m/du²| <= Σ_i x_i²φ_i(1+φ_i) (x_i = 2i/d, φ_i = m·θ_i) proves safe, so it ends exactly at the next zero of
  B_m. The walk then needs a new witness at that base: first among the neighbours of recent witnesses (negative
  m come in runs that drift slowly with b; the nearest are walked at once), then in widening circles around them
  (±64, ±1024) and around the m that were nearly negative at the last full scan, and only then by a full scan
  over all m (at L = 2**20: about 24,000 witnesses and 140 full scans for (A)). A full scan that finds no negative m proves the base feasible: the walk has
  reached the left end of an island, exactly.
* **Feasible stretches** are swept in steps [u_j, u_{j+1}] (:meth:`_Sums.certify`), each certified for all m at
  once by Lipschitz bounds on *groups* of pairs: per group g, |∂G_g/∂u| <= m·Σ_g x_i θ_i(u_j) and
  |∂G_g/∂m| <= Σ_g θ_i(u_j) on [u_j, ∞), and G_g >= −(pairs in g). A cell of K consecutive m × the step is
  cleared when the sum over groups of max(−size, average of the four corner values − the Lipschitz terms,
  smallest corner − the curvature terms) is >= 0. The second-order alternative (the bilinear interpolant of the
  corners is within K²/8·max|∂²G_g/∂m²| + step²/8·max|∂²G_g/∂u²| of G_g, and takes its minimum at a corner)
  is far tighter for the slow and middle pairs, whose phases move little within a step; the fast pairs, which
  sweep whole periods within a step, cost their size and no more, so steps can be far wider than one Lipschitz
  constant for all of B_m allows. The m of cells left open get the same bounds one by one (between the step's
  ends), and the few m left after that are halved individually with the same two bounds and an
  exact per-pair bound (the minimum of cos over each pair's phase interval), then walked with the safe steps
  above, which find the first zero exactly if there is one: that is the right end of the island. The step and
  the cell width adapt so that about 1% of cells and ~100 m are left over.
* **The ray.** For u >= u_crude, Σ_i cos(min(L·θ_i, π)) >= 0 bounds every B_m below, so every base above is
  feasible. The sweep certifies up to ``min(u_crude, search_limit)``; ``BaseBound.checked_up_to`` says where it
  stopped, and ``BaseBound.certified`` is true when that is u_crude (the whole ray is proved).

Speed: full scans and the cells' corner values use cos((m0+k)θ) = cos(kθ)cos(m0θ) − sin(kθ)sin(m0θ), i.e. one
matrix product per block of m (per group for the cells; FACTS.md); :func:`max_context_length`
(:func:`~ropekit.theory.decay.first_negative_m`) stops at the first block holding a negative m. With numba
installed (extra ``fast``), the witness walk and the witness search run as compiled loops from L = 32768 on
(:mod:`ropekit.theory._bound_jit`; same results, ``ROPEKIT_NO_JIT=1`` turns them off).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ropekit._costs import ROBUST_AUTO_LIMIT
from ropekit._validate import require_float, require_int
from ropekit.theory import _bound_jit
from ropekit.theory.decay import _EPS, first_negative_m, similarity_sum, tolerance

__all__ = [
    "ROBUST_AUTO_LIMIT",
    "BaseBound",
    "base_bound",
    "crude_feasible_base",
    "max_context_length",
    "robust_base_only",
    "smallest_feasible_base",
    "tolerance",
]

#: the walk starts here (b = 1 + 1e-9): B_2 ≈ (d/2)·cos 2 < 0 just above b = 1, so every smaller base is infeasible.
_U_START = 1e-9
#: the scan blocks are at most this many m long.
_MAX_BLOCK = 1024
#: :meth:`_Sums.group_block` uses one batched product (padded groups) up to this many values per group
_BATCHED = 1 << 14


#: :func:`_cos_sin_integers` splits m = high·_SPLIT + low for this many m or more
_SPLIT_FROM = 256
_SPLIT = 512


def _cos_sin_integers(m: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos(m·θ) and sin(m·θ), shape ``(M, d/2)``, for non-negative integers m (as floats).

    For many m, m = h·512 + l and the angle-addition formula build them from tables over the distinct h and l:
    far fewer cos/sin evaluations, which cost some 12 ns each at the large phases of long contexts. The error is
    a few ulp plus the rounding of the phases h·512·θ and l·θ, no more than that of m·θ computed directly.
    """
    if m.size < _SPLIT_FROM:
        phases = np.multiply.outer(m, theta)
        return np.cos(phases), np.sin(phases)
    high, low = np.divmod(m, _SPLIT)
    high, high_index = np.unique(high, return_inverse=True)
    low, low_index = np.unique(low, return_inverse=True)
    big, small = np.multiply.outer(high * _SPLIT, theta), np.multiply.outer(low, theta)
    cos_big, sin_big, cos_small, sin_small = np.cos(big), np.sin(big), np.cos(small), np.sin(small)
    a, b = cos_big[high_index], sin_big[high_index]
    c, d = cos_small[low_index], sin_small[low_index]
    return a * c - b * d, b * c + a * d


class _Sums:
    """Evaluates B_m(u) = Σ_i cos(m·exp(−x_i·u)) for one head dim and context length, in float64."""

    def __init__(self, head_dim: int, context_length: int) -> None:
        self.length = context_length
        self.x = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # (d/2,): θ_i = exp(−x_i·u)
        self.x2 = self.x * self.x
        self.unit = 8 * (head_dim // 2) * _EPS  # tolerance(m) = unit·(m+1)
        self.scans = 0
        pairs = head_dim // 2
        # groups of consecutive pairs for the grouped bounds: pair 0 (θ_0 = 1 at every base) alone, the fast pairs
        # in small groups (they are bounded by −size when they sweep whole periods), the slow half in larger ones
        edges = {0, 1, pairs, *range(1, pairs // 2, max(1, pairs // 16)), *range(pairs // 2, pairs, max(1, pairs // 8))}
        self.edges = np.array(sorted(edges))
        self.sizes = np.diff(self.edges).astype(np.float64)  # (G,)
        self._columns = [
            np.r_[low:high, pairs + low : pairs + high]
            for low, high in zip(self.edges[:-1], self.edges[1:], strict=True)
        ]
        # the same columns padded to one width with a zero column (index d), for one batched matrix product
        self._padded = np.full((len(self._columns), 2 * int(np.diff(self.edges).max())), 2 * pairs)
        for g, index in enumerate(self._columns):
            self._padded[g, : index.size] = index
        #: m per coarse cell of :meth:`certify` (a cell shares one Lipschitz bound in m and u)
        self.max_cell = int(min(32, max(4, 2 ** math.floor(math.log2(math.sqrt(context_length) / 8 + 1)))))
        self.cell = self.max_cell
        self.cell_fraction = 0.0
        self._corners: dict[float, np.ndarray] = {}
        #: the last two fine evaluations of :meth:`certify`: (u, cell) -> (open cells, their values (G, cells, cell))
        self._fine: dict[tuple[float, int], tuple[np.ndarray, np.ndarray]] = {}
        # the certified sweeps' current step in u (adapted as they go); B_m turns over about m times as fast in u, so
        # long contexts start with narrower steps (1e-3 at L = 32768, 3e-5 at L = 2**20)
        self.step = min(1e-3, 32 / context_length)
        #: the m nearly negative at the last full scan (where witnesses are looked for before the next one)
        self.pool = np.zeros(0, dtype=np.int64)
        self.open_m = _OPEN_M

    def theta(self, u: float) -> np.ndarray:
        return np.exp(-self.x * u)

    def slope_scale(self, u: float) -> float:
        """c(u) = Σ_i x_i θ_i(u): Λ_m = m·c(u) bounds |dB_m/du| on [u, ∞) (θ_i falls with u)."""
        return float((self.x * self.theta(u)).sum())

    def direct(self, m: np.ndarray, u: float) -> np.ndarray:
        """B_m(u) for an array of m, summed pair by pair."""
        return similarity_sum(m, self.theta(u))

    def tol(self, m: np.ndarray) -> np.ndarray:
        return self.unit * (np.asarray(m, dtype=np.float64) + 1)

    def chunks(self, u: float, start: int = 0, *, first: int = 4) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (m0, B_m(u) for m = m0, m0+1, …) in growing chunks until m reaches L.

        Blocks of K consecutive m share cos(kθ), sin(kθ) for k < K; each block start m0 contributes cos(m0θ),
        sin(m0θ); one matrix product combines them. Error ≈ (d/2)·m·ε from the phases m0·θ. Chunks start with
        ``first`` blocks and double up to 2**20 values, so an early stop costs little.
        """
        self.scans += 1
        length = self.length
        theta = self.theta(u)
        block = int(min(_MAX_BLOCK, 2 ** math.ceil(math.log2(math.sqrt(length) + 1))))
        offsets = np.arange(block, dtype=np.float64)[:, None] * theta  # (K, d/2)
        rows = np.concatenate([np.cos(offsets), -np.sin(offsets)], axis=1)  # (K, d): [cos kθ | −sin kθ]
        columns = first
        while start < length:
            count = min(columns, -(-(length - start) // block))
            starts = (start + block * np.arange(count, dtype=np.float64))[None, :] * theta[:, None]  # (d/2, J)
            cols = np.concatenate([np.cos(starts), np.sin(starts)], axis=0)  # (d, J)
            # (J, K) straight from the product (transposed operands cost BLAS nothing; a transposed result a copy)
            yield start, (cols.T @ rows.T).reshape(-1)[: length - start]  # (J·K,): m = start + j·K + k
            start += count * block
            columns = min(2 * columns, max(1, (1 << 20) // block))

    def group_block(self, u: float, starts: np.ndarray, width: int, stride: float = 1.0) -> np.ndarray:
        """Group sums G_g(m) = Σ_{i in group g} cos(m·θ_i(u)) for m = starts_j + k·stride, k < width.

        One matrix product per group (the block identity of :meth:`chunks`). Returns shape ``(G, J, width)``.
        """
        theta = self.theta(u)
        offsets = np.multiply.outer(np.arange(width, dtype=np.float64) * stride, theta)  # (K, d/2)
        # [cos | −sin | 0] and [cos | sin | 0]: the zero column is the padding of self._padded
        rows = np.concatenate([np.cos(offsets), -np.sin(offsets), np.zeros((width, 1))], axis=1)  # (K, d+1)
        cos_start, sin_start = _cos_sin_integers(np.asarray(starts, dtype=np.float64), theta)  # (J, d/2) each
        cols = np.concatenate([cos_start, sin_start, np.zeros((cos_start.shape[0], 1))], axis=1)  # (J, d+1)
        if cols.shape[0] * width <= _BATCHED:  # small blocks: one batched product over zero-padded groups
            return np.matmul(cols[:, self._padded].transpose(1, 0, 2), rows[:, self._padded].transpose(1, 2, 0))
        out = np.empty((len(self._columns), cols.shape[0], width))
        for g, index in enumerate(self._columns):
            out[g] = cols[:, index] @ rows[:, index].T  # (J, K): cos(m0θ)cos(kθ) − sin(m0θ)sin(kθ)
        return out

    def corners(self, u: float) -> tuple[np.ndarray, np.ndarray]:
        """Over the corners G_g(j·cell, u), j = 0 … ceil((L−1)/cell): the sums and the minima of neighbouring ones,
        G_g(j·cell) + G_g((j+1)·cell) and min(G_g(j·cell), G_g((j+1)·cell)), each ``(G, J)`` (the last three bases
        are cached)."""
        if u not in self._corners:
            count = -(-max(self.length - 1, 1) // self.cell) + 1
            width = 1 << max(0, math.ceil(math.log2(math.sqrt(count))))
            starts = np.arange(-(-count // width), dtype=np.float64) * (width * self.cell)
            values = self.group_block(u, starts, width, float(self.cell)).reshape(len(self.sizes), -1)[:, :count]
            if len(self._corners) >= 3:
                self._corners.pop(next(iter(self._corners)))
            self._corners[u] = (values[:, :-1] + values[:, 1:], np.minimum(values[:, :-1], values[:, 1:]))
        else:  # most recently used last
            self._corners[u] = self._corners.pop(u)
        return self._corners[u]

    def certify(self, low: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """The m < L that grouped bounds cannot prove >= 0 on all of [low, high], with their values.

        Per group g of pairs G_g(m, u) = Σ_{i in g} cos(m·θ_i(u)), two lower bounds on a coarse cell
        [j·K, (j+1)·K] × [low, high] (m_max = (j+1)·K, θ_i at ``low``, where they are largest on [low, ∞)):

        * first order: the average of the four corners minus (s_g·K + m_max·c_g·(high − low))/2, with
          |∂G_g/∂m| <= s_g = Σ_g θ_i and |∂G_g/∂u| <= m·c_g, c_g = Σ_g x_i θ_i;
        * second order: the smallest corner minus K²/8·Σ_g θ_i² − (high − low)²/8·Σ_g x_i²·φ_i(1 + φ_i),
          φ_i = m_max·θ_i: the bilinear interpolant of the corners takes its minimum at a corner, and it is
          within K²/8·max|∂²G/∂m²| + (high − low)²/8·max|∂²G/∂u²| of G on the cell.

        The larger of the two, floored at −size_g, summed over groups, bounds B_m on the cell. The m of cells whose
        bound is below 0 get the same two bounds one by one (K = 0: the tent between G_g(m, low) and G_g(m, high)
        minus m·c_g·(high − low)/2, or the smaller end minus the u-curvature term). The rest are certified;
        every integer m < L is in some cell.

        Returns:
            (the m left over, sorted; B_m(low) and B_m(high) for them; the fraction of cells left over).
        """
        self.scans += 1
        width = high - low
        theta = self.theta(low)
        sizes = self.sizes[:, None]
        starts = self.edges[:-1]
        slopes = np.add.reduceat(theta, starts)[:, None]  # (G, 1): s_g
        scales = np.add.reduceat(self.x * theta, starts)[:, None]  # (G, 1): c_g
        bends = np.add.reduceat(theta * theta, starts)[:, None]  # (G, 1): Σ θ² bounds |∂²G_g/∂m²|
        # Σ x²φ(1 + φ) = m·Σ x²θ + m²·Σ x²θ² bounds |∂²G_g/∂u²|
        curve_1, curve_2 = np.add.reduceat(self.x2 * theta, starts), np.add.reduceat(self.x2 * theta * theta, starts)
        (pairs_a, mins_a), (pairs_b, mins_b) = self.corners(low), self.corners(high)  # (G, J) each
        cell = self.cell
        top = np.arange(1, pairs_a.shape[1] + 1, dtype=np.float64) * cell  # (J,): the largest m of each cell
        # groups that sit at their floor −size_g in every cell by both bounds (their m-terms alone are at least
        # twice their size; corners are at most size_g) add −size_g and need no arithmetic. θ falls along the
        # pairs, so they are the first groups.
        floored = (slopes[:, 0] * (cell / 2) >= 2 * self.sizes) & (bends[:, 0] * (cell * cell / 8) >= 2 * self.sizes)
        live = int(np.argmax(np.append(~floored, True)))
        floor = -float(self.sizes[:live].sum())
        average = (pairs_a[live:] + pairs_b[live:]) * 0.25 - slopes[live:] * (cell / 2)
        lowest = np.minimum(mins_a[live:], mins_b[live:]) - bends[live:] * (cell * cell / 8)
        first = average - np.multiply.outer(scales[live:, 0] * (width / 2), top)
        squared = width * width / 8
        second = (
            lowest
            - np.multiply.outer(curve_1[live:] * squared, top)
            - np.multiply.outer(curve_2[live:] * squared, top * top)
        )
        bound = np.maximum(np.maximum(first, second), -sizes[live:]).sum(axis=0) + floor  # (J,)
        open_cells = np.flatnonzero(bound < 0)
        fraction = open_cells.size / bound.size
        # cells that stay open whatever the step (the m-direction terms alone): the cells are too wide in m. Only
        # steers the cell width, so every 4th cell is enough
        sample = np.maximum(np.maximum(average[:, ::4], lowest[:, ::4]), -sizes[live:])
        self.cell_fraction = float(np.mean(sample.sum(axis=0) + floor < 0))
        if not open_cells.size:
            empty = np.zeros(0)
            return empty.astype(np.int64), empty, empty, 0.0
        fine_a = self._fine_block(low, open_cells)  # (G, J'·K)
        fine_b = self._fine_block(high, open_cells)
        m = (open_cells[:, None] * cell + np.arange(cell)).reshape(-1).astype(np.float64)  # (J'·K,)
        tent = (fine_a + fine_b) / 2 - scales * (m * (width / 2))
        end = np.minimum(fine_a, fine_b) - (curve_1[:, None] * m + curve_2[:, None] * (m * m)) * squared
        left = np.flatnonzero((np.maximum(np.maximum(tent, end), -sizes).sum(axis=0) < 0) & (m < self.length))
        return m[left].astype(np.int64), fine_a[:, left].sum(axis=0), fine_b[:, left].sum(axis=0), fraction

    def _fine_block(self, u: float, cells: np.ndarray) -> np.ndarray:
        """G_g(m, u) for every m of the given coarse cells (sorted), shape ``(G, cells·cell)``.

        The last result is kept: a sweep step's upper base is the next step's lower one, and most open cells stay
        open from one step to the next, so only the cells new at that base are evaluated.
        """
        cell = self.cell
        out = np.empty((len(self.sizes), cells.size, cell))
        new = np.ones(cells.size, dtype=bool)
        last_cells, last_values = self._fine.get((u, cell), (None, None))
        if last_cells is not None and last_cells.size:
            where = np.minimum(np.searchsorted(last_cells, cells), last_cells.size - 1)
            known = last_cells[where] == cells
            out[:, known] = last_values[:, where[known]]
            new = ~known
        if new.any():
            out[:, new] = self.group_block(u, cells[new].astype(np.float64) * cell, cell)
        if len(self._fine) >= 2:  # keep this one and the one before (both ends of the last step)
            self._fine.pop(next(iter(self._fine)))
        self._fine[(u, cell)] = (cells, out)
        return out.reshape(len(self.sizes), -1)

    def pair_bound(self, m: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Σ_i min over u in [low, high] of cos(m·θ_i(u)), exactly per pair: a lower bound of B_m on the interval.

        The phase of pair i runs over [m·θ_i(high), m·θ_i(low)]; cos reaches −1 there iff an odd multiple of π
        lies inside, else its minimum is at an end. Shapes: ``m``, ``low``, ``high`` ``(K,)``; returns ``(K,)``.
        """
        top = m[:, None] * np.exp(-np.outer(low, self.x))  # (K, d/2)
        bottom = m[:, None] * np.exp(-np.outer(high, self.x))
        odd = np.ceil((bottom - np.pi) / (2 * np.pi)) * (2 * np.pi) + np.pi <= top  # an odd multiple of π inside
        return np.where(odd, -1.0, np.minimum(np.cos(top), np.cos(bottom))).sum(axis=1)

    def scan(self, u: float) -> np.ndarray:
        """B_m(u) for every m in [0, L), shape ``(L,)``."""
        return np.concatenate([values for _, values in self.chunks(u, first=1 << 20)])

    def first_negative(self, u: float, *, keep: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Scan m upwards until a chunk holds an m with B_m(u) < −tolerance(m) (confirmed by direct summation).

        Returns:
            (the confirmed negative m of that chunk, sorted; the values of m = 0 … end of that chunk). Both
            cover all L values of m when none is negative. With ``keep=False`` the values are not kept (empty).
        """
        seen = [np.zeros(0)]
        for start, values in self.chunks(u):
            if keep:
                seen.append(values)
            # tolerance(m) grows with m: a first pass against the chunk's smallest one keeps a small superset
            rough = np.flatnonzero(values < -self.unit * (start + 1) / 2)
            if rough.size:
                negative = self.confirmed_negative(self.candidates(start + rough, values[rough]), u)
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

    def _taylor(self, m: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
            value, slope, curvature = self._taylor(m[index], here)
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


@dataclass(frozen=True)
class BaseBound:
    """The exact base bound for one context length and head dim (see the module docstring for the method).

    Attributes:
        context_length: L; every integer distance m in [0, L) is checked.
        head_dim: the rotary dimension d.
        smallest_base: (A) the smallest feasible base.
        robust_base: (B) every base >= this is feasible (checked up to ``checked_up_to``).
        islands: feasible intervals (low, high) below ``robust_base``, in increasing order.
        checked_up_to: the largest base the sweep certified; above it nothing was checked.
        certified: True when ``checked_up_to`` reaches the analytic bound above which every base is feasible,
            i.e. ``robust_base`` is proved, not only checked over a range.
        scans: full scans over all m that the computation used (a cost measure).
    """

    context_length: int
    head_dim: int
    smallest_base: float
    robust_base: float
    islands: list[tuple[float, float]] = field(default_factory=list)
    checked_up_to: float = math.inf
    certified: bool = True
    scans: int = 0

    def is_feasible(self, base: float) -> bool:
        """Whether B_m(base) >= 0 for all m < L, from the islands (exact at interval ends up to rounding)."""
        if base >= self.robust_base:
            return True
        return any(low <= base <= high for low, high in self.islands)

    @property
    def gaps(self) -> list[tuple[float, float]]:
        """Infeasible intervals between ``smallest_base`` and ``robust_base``."""
        ends = [high for _, high in self.islands]
        starts = [low for low, _ in self.islands[1:]] + [self.robust_base]
        return [(end, start) for end, start in zip(ends, starts, strict=True) if start > end]


def crude_feasible_base(context_length: int, head_dim: int) -> float:
    """A base above which every base is provably feasible: Σ_i cos(min(L·θ_i, π)) >= 0 there.

    For m < L, m·θ_i <= L·θ_i and cos falls on [0, π], so each term bounds cos(m·θ_i) from below; the sum grows
    with b. Found by bisection on u = ln b.
    """
    x = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim

    def lower(u: float) -> float:
        return float(np.cos(np.minimum(context_length * np.exp(-x * u), np.pi)).sum())

    low, high = 0.0, 8.0
    while lower(high) < 0:
        low, high = high, 2 * high
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if lower(middle) < 0 else (low, middle)
    return math.exp(high)


def _walk_infeasible(sums: _Sums, u: float, stop: float, seed: int | None = None) -> float:
    """From an infeasible u, follow witnesses to the first feasible u at or after it (exact), or to ``stop``.

    A witness is looked for next to the last ones (``seed`` first: an m known to be negative at u), then in widening
    circles around them and around the m that were nearly negative at the last scan (kept across calls), and only
    then by a full scan over m (a scan that finds no negative m proves u feasible).
    """
    recent: list[int] = [] if seed is None else [seed]
    while u < stop:
        if recent:  # the last witnesses' neighbours are walked at once: the walk's first step is the direct check
            near = np.unique(np.add.outer(np.array(recent), np.arange(-_NEAR, _NEAR + 1)))
            near = near[(near >= 0) & (near < sums.length)]
            ends, _ = sums.walk(near, u, stop, negative=True)
            best = int(np.argmax(ends))
            if ends[best] > u:  # a neighbour was negative at u and stays negative up to its end
                recent = [int(near[best]), *[m for m in recent if m != int(near[best])][:3]]
                u = float(ends[best])
                continue
        negative = np.zeros(0, dtype=np.int64)
        # runs of negative m drift slowly: look in widening circles around the last witnesses and the m that were
        # nearly negative at the last scan before a full scan
        for source, width in _SEARCH:
            centres = np.array(recent, dtype=np.int64) if source == "recent" else sums.pool
            width = min(width, max(_POOL_WIDTH, sums.length >> 10))  # wide circles pay off only for long scans
            if centres.size:
                negative = sums.search(centres, u, width)
                if negative.size:
                    break
        if not negative.size and seed is not None:
            # a gap walk most often ends where the next island starts: check u with the sweep's cell bounds at u
            # alone (no step in u: few cells stay open), and leave the corners of u cached for the sweep
            m, values, _, _ = sums.certify(u, u)
            negative = sums.confirmed_negative(sums.candidates(m, values), u)
            if not negative.size:
                return u
            sums.pool = m[np.argsort(values)[:_POOL_SIZE]]
        elif not negative.size:
            negative, values = sums.first_negative(u)
            if not negative.size:
                return u
            near = np.flatnonzero(values < _POOL_LEVEL)
            sums.pool = near[np.argsort(values[near])[:_POOL_SIZE]]
        if negative.size > 3:  # walk the three whose first safe step is longest
            value, slope, curvature = sums._taylor(negative.astype(np.float64), np.full(negative.size, u))
            level = value + sums.tol(negative)
            root = np.sqrt(slope * slope - 2 * curvature * level)
            with np.errstate(divide="ignore", invalid="ignore"):  # the branch np.where discards may be 0/0
                first = np.where(slope <= 0, (root - slope) / curvature, -2 * level / (root + slope))
            negative = negative[np.argsort(-first)[:3]]
        ends, _ = sums.walk(negative, u, stop, negative=True)
        best = int(np.argmax(ends))
        recent = [int(negative[best]), *[m for m in recent if m != int(negative[best])][:3]]
        u = max(float(ends[best]), math.nextafter(u, math.inf))
    return stop


#: the certified sweeps aim each step at about this fraction of all m (at least ``_OPEN_FLOOR`` m) in coarse cells
#: left open, and at about ``_OPEN_M`` m left to the exact search (``residual`` overrides it).
_OPEN_SHARE = 0.01
_OPEN_FLOOR = 512
_OPEN_M = 100
#: after a full scan, the witness pool: at most this many m with B_m below this level, each with this many
#: neighbours on either side
_POOL_SIZE = 128
_POOL_LEVEL = 0.5
_POOL_WIDTH = 6
#: where :func:`_walk_infeasible` looks for a new witness before a full scan: (centres, m on either side, at most
#: L/1024: a full scan costs about as much as 2·L/1024 circles of that width)
_SEARCH = (("recent", 64), ("recent", 1024), ("pool", _POOL_WIDTH), ("pool", 64))
#: first of all, the m within this distance of the last witnesses are walked directly
_NEAR = 4


def _adapt_cell(sums: _Sums) -> float:
    """Halve the coarse cells when their m-direction term alone leaves many open, double them when it leaves few.

    Returns the share of cells the sweeps aim to leave open.
    """
    share = max(_OPEN_SHARE, _OPEN_FLOOR / sums.length)
    if sums.cell_fraction > 4 * share and sums.cell > 4:
        sums.cell //= 2
        sums._corners.clear()
    elif sums.cell_fraction < share / 2 and sums.cell < sums.max_cell:
        sums.cell *= 2
        sums._corners.clear()
    return share


def _next_step(sums: _Sums, fraction: float, left: int, u: float) -> float:
    """Grow the sweep step when the last one left few m over, shrink it when it left many (never below 1e-13·u).

    Coarse cells that stay open at any step (their m-direction term alone is too large) halve the cell instead.
    """
    share = _adapt_cell(sums)
    step = sums.step
    if left > 4 * sums.open_m or fraction - sums.cell_fraction > 4 * share:
        step /= 2
    elif left < sums.open_m and fraction - sums.cell_fraction < share:
        step *= 1.5
    return max(step, 1e-13 * max(u, 1.0))


def _sweep_feasible(sums: _Sums, u: float, stop: float) -> tuple[float, int] | None:
    """From a feasible u, certify feasibility forward, one :meth:`_Sums.certify` step at a time.

    Returns:
        (the first u where some B_m falls to −tolerance(m), that m), or ``None`` when all of [u, stop] is feasible.
    """
    while u < stop:
        ahead = min(u + sums.step, stop)
        m, low_values, high_values, fraction = sums.certify(u, ahead)
        crossing = _first_crossing(sums, m, u, ahead, low_values, high_values) if m.size else None
        # adapt the step here too when the island ends inside it: where islands are shorter than a step (near (A)
        # at long contexts), every step ends in a crossing, and a step left too wide leaves thousands of m over
        sums.step = _next_step(sums, fraction, m.size, ahead)
        if crossing is not None:
            return crossing
        u = ahead
    return None


def _highest_infeasible_step(sums: _Sums, stop: float) -> tuple[float, float]:
    """Sweep certified steps down from ``stop`` (feasible, as is everything above it) to the first step
    [low, high] that holds an infeasible base; every base in [high, stop] is certified feasible on the way.

    Returns (low, high).
    """
    high = stop
    while True:
        low = max(high - sums.step, _U_START)
        m, low_values, high_values, fraction = sums.certify(low, high)
        if m.size and (
            np.any(low_values < -sums.tol(m)) or _first_crossing(sums, m, low, high, low_values, high_values)
        ):
            return low, high
        if low <= _U_START:
            return low, high
        sums.step = _next_step(sums, fraction, m.size, low)
        high = low


def robust_base_only(context_length: int, head_dim: int, *, residual: int | None = None) -> float:
    """(B) alone: the base above which every base is feasible for L, without the islands below it.

    Sweeps certified full scans *down* from :func:`crude_feasible_base` to the first step that holds an
    infeasible base, then resolves that one step with the forward machinery of :func:`base_bound` (witness walks
    and the feasible sweep), so the islands between (A) and (B), which cost most at large L, are never visited.
    Every base from the result up to the crude bound is certified, so the result is exact (``certified``).

    Args:
        context_length: L.
        head_dim: the rotary dimension d (even).
        residual: about how many m each sweep step may leave to the exact per-m search (a speed knob; default 100).

    Returns:
        (B) = ``base_bound(L, d).robust_base``; 1.0 when L <= 2.
    """
    _check_bound_args(context_length, head_dim)
    sums = _Sums(head_dim, context_length)
    if sums.confirmed_negative(np.array([2]), _U_START).size == 0:  # L <= 2: every base is feasible
        return 1.0
    if residual is not None:
        sums.open_m = require_int("residual", residual, minimum=1)
    low, high = _highest_infeasible_step(sums, math.log(crude_feasible_base(context_length, head_dim)))
    # somewhere in [low, high] a base is infeasible; everything above high is feasible: walk [low, high] forward
    u = _walk_infeasible(sums, low, high)
    while u < high:
        end = _sweep_feasible(sums, u, high)
        if end is None:
            break
        crossing, witness = end
        u = _walk_infeasible(sums, _enter_negative(sums, witness, crossing), high, witness)
    return math.exp(min(u, high))


def _first_crossing(
    sums: _Sums, m: np.ndarray, low: float, high: float, low_values: np.ndarray, high_values: np.ndarray
) -> tuple[float, int] | None:
    """The first u in [low, high] where some B_m (m in ``m``) falls to −tolerance(m), or ``None``.

    Intervals [a, b] of each m are halved until their tent closes (B_m(a) + B_m(b) + 2·tol >= Λ_m·(b − a), or
    min(B_m(a), B_m(b)) − (b − a)²/8·Σ x_i²φ_i(1 + φ_i) >= −tol, or the exact per-pair bound; each proves
    B_m >= −tol on [a, b]), or an end is negative, or they are too narrow to halve; those last two are walked
    exactly, from the left, and the earliest crossing wins.
    """
    m = m.astype(np.float64)
    a, b = np.full(m.shape, low), np.full(m.shape, high)
    va, vb = low_values.astype(np.float64), high_values.astype(np.float64)
    brackets: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    earliest = math.inf  # the earliest sampled u with some B_m < −tol
    for _ in range(64):
        tol = sums.tol(m)
        phase = m[:, None] * np.exp(-np.outer(a, sums.x))  # (K, d/2): φ_i at a, the largest on [a, ∞)
        scale = phase @ sums.x  # Λ_m on [a, ∞)
        closed = va + vb + 2 * tol >= scale * (b - a)
        # or the smaller end minus (b − a)²/8 · max|B_m''| (the chord's error bound), max|B_m''| <= Σ x²φ(1 + φ)
        closed |= np.minimum(va, vb) - (phase * (1 + phase)) @ sums.x2 * ((b - a) ** 2 / 8) >= -tol
        if not closed.all():  # the exact per-pair bound only where the tent is not enough
            closed[~closed] = sums.pair_bound(m[~closed], a[~closed], b[~closed]) >= -tol[~closed]
        negative = vb < -tol  # va >= −tol always holds for intervals still in play
        if negative.any():
            earliest = min(earliest, float(b[negative].min()))
        # too narrow to halve (B_m sits within rounding of −tol, e.g. where an island starts): walk instead
        narrow = ~closed & ~negative & (b - a <= 1e-12 * np.maximum(np.abs(a), 1.0))
        walk = negative | narrow
        if walk.any():
            brackets.append((m[walk], a[walk], b[walk]))
        keep = ~closed & ~walk & (a < earliest)
        if not keep.any():
            break
        m, a, b, va, vb = m[keep], a[keep], b[keep], va[keep], vb[keep]
        middle = (a + b) / 2
        vm = np.cos(m[:, None] * np.exp(-np.outer(middle, sums.x))).sum(axis=1)
        m, va, vb = np.concatenate([m, m]), np.concatenate([va, vm]), np.concatenate([vm, vb])
        a, b = np.concatenate([a, middle]), np.concatenate([middle, b])
        # a negative midpoint ends the left half's search there; the right half starts negative: drop it
        tol = sums.tol(m)
        alive = va >= -tol
        m, a, b, va, vb = m[alive], a[alive], b[alive], va[alive], vb[alive]
    else:
        raise RuntimeError("interval halving did not settle; please report this")
    if not brackets:
        return None
    bm = np.concatenate([x[0] for x in brackets])
    ba = np.concatenate([x[1] for x in brackets])
    bb = np.concatenate([x[2] for x in brackets])
    order = np.argsort(ba)
    best: tuple[float, int] | None = None
    for index in order:  # walk brackets from the left; one that starts after the best crossing cannot win
        if best is not None and ba[index] >= best[0]:
            break
        at, top = float(ba[index]), float(bb[index])
        for _ in range(1000):
            ends, crossed = sums.walk(bm[index : index + 1], at, top, negative=False)
            at = float(ends[0])
            if crossed[0] or at >= top:
                break
        else:
            raise RuntimeError(
                f"the walk of B_{int(bm[index])} from u = {float(ba[index])!r} stalls; please report this"
            )
        if crossed[0] and (best is None or at < best[0]):
            best = (at, int(bm[index]))
    return best


def _enter_negative(sums: _Sums, m: int, u: float) -> float:
    """A u' just above u where B_m(u') < −tolerance(m), B_m falling through −tolerance(m) at u."""
    _, slope, _ = sums._taylor(np.array([float(m)]), np.array([u]))
    step = float(sums.tol(m)) / max(abs(float(slope[0])), 1e-300)
    for _ in range(60):
        if sums.direct(np.array([m]), u + step)[0] < -float(sums.tol(m)):
            return u + step
        step *= 2
    raise RuntimeError(f"B_{m} does not go below its tolerance after u = {u!r}; please report this")


def _check_head_dim(head_dim: int) -> None:
    require_int("head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (dims rotate in pairs), got {head_dim}")


def _check_bound_args(context_length: int, head_dim: int) -> None:
    """Shared argument checks of :func:`base_bound` and :func:`smallest_feasible_base`."""
    require_int("context_length", context_length, minimum=1)
    _check_head_dim(head_dim)
    if head_dim == 2 and context_length >= 3:
        # one pair: θ_0 = b^0 = 1 for every base, so B_2 = cos 2 < 0 and no base is feasible
        raise ValueError("head_dim must be >= 4 for context_length >= 3 (no base is feasible with one pair), got 2")


def base_bound(
    context_length: int,
    head_dim: int,
    *,
    search_limit: float | None = None,
    residual: int | None = None,
) -> BaseBound:
    """The exact smallest base, robust base and feasible islands for a context length (Men et al., eq. 8).

    Every integer m in [0, L) is checked and every interval of bases is backed by a certificate (see the module
    docstring): no island can be stepped over, and the reported edges are zeros of some B_m to about 1e-12.

    Args:
        context_length: L, the number of distances m = 0 … L−1 that must keep B_m(b) >= 0.
        head_dim: the rotary dimension d (even).
        search_limit: the largest base to certify; ``None`` certifies the whole ray (up to
            :func:`crude_feasible_base`), which takes longer for large L. Above ``search_limit`` nothing is claimed.
        residual: about how many m each sweep step may leave to the exact per-m search (a speed knob; default 100).

    Returns:
        A :class:`BaseBound`. ``robust_base`` is exact when ``certified`` is true; with a ``search_limit`` below
        the crude bound it is "every base in [robust_base, checked_up_to] is feasible".

    Example:
        >>> bound = base_bound(4096, 128)
        >>> round(bound.smallest_base)
        26952
    """
    _check_bound_args(context_length, head_dim)
    crude = crude_feasible_base(context_length, head_dim)
    if search_limit is not None:
        require_float("search_limit", search_limit, above=1.0)
    limit = crude if search_limit is None else min(search_limit, crude)
    stop = math.log(limit)
    if residual is not None:
        require_int("residual", residual, minimum=1)
    sums = _Sums(head_dim, context_length)
    sums.open_m = _OPEN_M if residual is None else residual
    if sums.confirmed_negative(np.array([2]), _U_START).size == 0:  # L <= 2: every base is feasible
        return BaseBound(context_length, head_dim, 1.0, 1.0, [], math.inf, True, 0)
    smallest = _walk_infeasible(sums, _U_START, stop)
    if smallest >= stop:
        raise ValueError(f"no feasible base up to search_limit={limit:g} for context_length={context_length}")
    islands: list[tuple[float, float]] = []
    low = smallest
    while True:
        end = _sweep_feasible(sums, low, stop)
        if end is None:
            break
        high, witness = end
        islands.append((math.exp(low), math.exp(high)))
        low = _walk_infeasible(sums, _enter_negative(sums, witness, high), stop, witness)
        if low >= stop:
            raise ValueError(f"bases up to search_limit={limit:g} end infeasible for context_length={context_length}")
    return BaseBound(
        context_length=context_length,
        head_dim=head_dim,
        smallest_base=math.exp(smallest),
        robust_base=math.exp(low),
        islands=islands,
        checked_up_to=limit,
        certified=limit >= crude,
        scans=sums.scans,
    )


def smallest_feasible_base(context_length: int, head_dim: int) -> float:
    """(A) alone: the smallest base b with B_m(b) >= 0 for every integer m in [0, L) (Men et al., eq. 8).

    The same certified walk as :func:`base_bound` (witnesses from b = 1 up to the first base where a full scan
    over all m finds no negative B_m), without the sweep for the robust bound and the islands, which costs far
    more for large L. For d = 128 it reproduces Su's brute-force values, e.g. 2.70e4 at L = 4096 and 6.54e7 at
    L = 2**20.

    Args:
        context_length: L, the number of distances m = 0 … L−1 that must keep B_m(b) >= 0.
        head_dim: the rotary dimension d (even).

    Returns:
        The smallest feasible base (``base_bound(L, d).smallest_base``); 1.0 when L <= 2 (every base is feasible).

    Example:
        >>> round(smallest_feasible_base(4096, 128))
        26952
    """
    _check_bound_args(context_length, head_dim)
    sums = _Sums(head_dim, context_length)
    if sums.confirmed_negative(np.array([2]), _U_START).size == 0:  # L <= 2: every base is feasible
        return 1.0
    crude = crude_feasible_base(context_length, head_dim)
    return math.exp(_walk_infeasible(sums, _U_START, math.log(crude)))


def max_context_length(base: float, head_dim: int, *, limit: int = 1 << 26) -> int | None:
    """The first distance m with B_m(base) < 0: the longest context L for which ``base`` is feasible.

    Every m is checked in blocks (one matrix product per block) and the scan stops at the first block holding
    a negative value. For b = 1e4, d = 128 this is 1707 (FACTS.md).

    Args:
        base: the RoPE base b (> 1).
        head_dim: the rotary dimension d (even).
        limit: scan m < limit at most.

    Returns:
        The first m with B_m(b) < −tolerance(m), or ``None`` if every m < ``limit`` has B_m(b) >= 0.
    """
    base = require_float("base", base, above=1.0)
    _check_head_dim(head_dim)
    require_int("limit", limit, minimum=1)
    return first_negative_m(np.exp(-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim * math.log(base)), limit)
