"""Grouped certificates for the base bound's feasible sweeps: B_m >= 0 for all m < L on a whole step of bases.

:class:`_Sums` extends the evaluator :class:`~ropekit.theory._margins._Margins` with the state and the bounds of
the certified sweeps of :mod:`ropekit.theory.bound` (its module docstring gives the method): per group g of pairs,
Lipschitz and curvature bounds on G_g(m, u) = Σ_{i in g} cos(m·θ_i(u)) over cells of K consecutive m × one step in
u = ln b (:meth:`_Sums.certify`), and the exact per-pair bound of :meth:`_Sums.pair_bound`.
"""

from __future__ import annotations

import math

import numpy as np

from ropekit.theory._margins import _Margins

#: :meth:`_Sums.group_block` uses one batched product (padded groups) up to this many values per group
_BATCHED = 1 << 14
#: :func:`_cos_sin_integers` splits m = high·_SPLIT + low for this many m or more
_SPLIT_FROM = 256
_SPLIT = 512
#: the certified sweeps aim each step at about this fraction of all m (at least ``_OPEN_FLOOR`` m) in coarse cells
#: left open, and at about ``_OPEN_M`` m left to the exact search (``residual`` overrides it).
_OPEN_SHARE = 0.01
_OPEN_FLOOR = 512
_OPEN_M = 100


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


class _Sums(_Margins):
    """B_m(u) for one rotary dim and context length (:class:`_Margins`), with the certified sweeps' bounds and state."""

    def __init__(self, rotary_dim: int, context_length: int) -> None:
        super().__init__(rotary_dim, context_length)
        pairs = rotary_dim // 2
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

    def set_cell(self, cell: int) -> None:
        """Change the m per coarse cell; the cached corners were for the old width."""
        self.cell = cell
        self._corners.clear()

    def group_block(self, u: float, starts: np.ndarray, width: int, stride: float = 1.0) -> np.ndarray:
        """Group sums G_g(m) = Σ_{i in group g} cos(m·θ_i(u)) for m = starts_j + k·stride, k < width.

        One matrix product per group (the block identity of :func:`~ropekit.theory.decay.margin_chunks`). Returns shape ``(G, J, width)``.
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
