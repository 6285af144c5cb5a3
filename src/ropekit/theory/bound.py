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
* **Feasible stretches** are swept in steps [u_j, u_{j+1}] (:meth:`~ropekit.theory._certificates._Sums.certify`), each certified for all m at
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

Speed: full scans use cos((m0+k)θ) = cos(kθ)cos(m0θ) − sin(kθ)sin(m0θ), i.e. one matrix product per block of m,
in the one block scan :func:`~ropekit.theory.decay.margin_chunks` (which :func:`max_context_length`, through
:func:`~ropekit.theory.decay.first_negative_m`, stops at the first block holding a negative m); the cells' corner
values use the same identity per group of pairs. With numba installed (extra ``fast``), the witness walk and the
witness search run as compiled loops from L = 32768 on (:mod:`ropekit.theory._bound_jit`; same results,
``ROPEKIT_NO_JIT=1`` turns them off).

Layout: the B_m evaluator is :mod:`ropekit.theory._margins`, the grouped certificates
:mod:`ropekit.theory._certificates`, the walks and sweeps :mod:`ropekit.theory._search`; this module drives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ropekit._validate import require_float, require_int, require_rotary_dim
from ropekit.theory._certificates import _OPEN_M, _Sums
from ropekit.theory._search import U_START, enter_negative, highest_infeasible_step, sweep_feasible, walk_infeasible
from ropekit.theory.decay import first_negative_m

__all__ = [
    "BaseBound",
    "base_bound",
    "crude_feasible_base",
    "max_context_length",
    "robust_base_only",
    "smallest_feasible_base",
]


@dataclass(frozen=True)
class BaseBound:
    """The exact base bound for one context length and rotary dim (see the module docstring for the method).

    Attributes:
        context_length: L; every integer distance m in [0, L) is checked.
        rotary_dim: the rotary dimension d.
        smallest_base: (A) the smallest feasible base.
        robust_base: (B) every base >= this is feasible (checked up to ``checked_up_to``).
        islands: feasible intervals (low, high) below ``robust_base``, in increasing order.
        checked_up_to: the largest base the sweep certified; above it nothing was checked.
        certified: True when ``checked_up_to`` reaches the analytic bound above which every base is feasible,
            i.e. ``robust_base`` is proved, not only checked over a range.
        scans: full scans over all m that the computation used (a cost measure).
    """

    context_length: int
    rotary_dim: int
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


def crude_feasible_base(context_length: int, rotary_dim: int) -> float:
    """A base above which every base is provably feasible: Σ_i cos(min(L·θ_i, π)) >= 0 there.

    For m < L, m·θ_i <= L·θ_i and cos falls on [0, π], so each term bounds cos(m·θ_i) from below; the sum grows
    with b. Found by bisection on u = ln b.
    """
    context_length, rotary_dim, _ = _bound_args(context_length, rotary_dim)
    x = np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim

    def lower(u: float) -> float:
        return float(np.cos(np.minimum(context_length * np.exp(-x * u), np.pi)).sum())

    low, high = 0.0, 8.0
    while lower(high) < 0:
        low, high = high, 2 * high
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if lower(middle) < 0 else (low, middle)
    return math.exp(high)


def _bound_args(context_length: int, rotary_dim: int) -> tuple[int, int, bool]:
    """The checked arguments of the bound functions, and whether every base is feasible (L <= 2).

    For L <= 2 only m = 0 and m = 1 count, and B_0 = d/2, B_1 = Σ_i cos θ_i >= (d/2)·cos 1 > 0 at every base. For
    L >= 3, B_2 ≈ (d/2)·cos 2 < 0 just above b = 1 (at :data:`~ropekit.theory._search.U_START`), so the walk has
    something to do.

    Returns:
        (context_length, rotary_dim, every base feasible).
    """
    context_length = require_int("context_length", context_length, minimum=1)
    rotary_dim = require_rotary_dim("rotary_dim", rotary_dim)
    if rotary_dim == 2 and context_length >= 3:
        # one pair: θ_0 = b^0 = 1 for every base, so B_2 = cos 2 < 0 and no base is feasible
        raise ValueError("rotary_dim must be >= 4 for context_length >= 3 (no base is feasible with one pair), got 2")
    return context_length, rotary_dim, context_length <= 2


def base_bound(
    context_length: int,
    rotary_dim: int,
    *,
    search_limit: float | None = None,
    residual: int | None = None,
) -> BaseBound:
    """The exact smallest base, robust base and feasible islands for a context length (Men et al., eq. 8).

    Every integer m in [0, L) is checked and every interval of bases is backed by a certificate (see the module
    docstring): no island can be stepped over, and the reported edges are zeros of some B_m to about 1e-12.

    Args:
        context_length: L, the number of distances m = 0 … L−1 that must keep B_m(b) >= 0.
        rotary_dim: the rotary dimension d (even).
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
    context_length, rotary_dim, trivial = _bound_args(context_length, rotary_dim)
    crude = crude_feasible_base(context_length, rotary_dim)
    if search_limit is not None:
        search_limit = require_float("search_limit", search_limit, above=1.0)
    limit = crude if search_limit is None else min(search_limit, crude)
    stop = math.log(limit)
    residual = _OPEN_M if residual is None else require_int("residual", residual, minimum=1)
    if trivial:
        return BaseBound(context_length, rotary_dim, 1.0, 1.0, [], math.inf, True, 0)
    sums = _Sums(rotary_dim, context_length)
    sums.open_m = residual
    smallest = walk_infeasible(sums, U_START, stop)
    if smallest >= stop:
        raise ValueError(f"no feasible base up to search_limit={limit:g} for context_length={context_length}")
    islands: list[tuple[float, float]] = []
    low = smallest
    while True:
        end = sweep_feasible(sums, low, stop)
        if end is None:
            break
        high, witness = end
        islands.append((math.exp(low), math.exp(high)))
        low = walk_infeasible(sums, enter_negative(sums, witness, high), stop, witness)
        if low >= stop:
            raise ValueError(f"bases up to search_limit={limit:g} end infeasible for context_length={context_length}")
    return BaseBound(
        context_length=context_length,
        rotary_dim=rotary_dim,
        smallest_base=math.exp(smallest),
        robust_base=math.exp(low),
        islands=islands,
        checked_up_to=limit,
        certified=limit >= crude,
        scans=sums.scans,
    )


def smallest_feasible_base(context_length: int, rotary_dim: int) -> float:
    """(A) alone: the smallest base b with B_m(b) >= 0 for every integer m in [0, L) (Men et al., eq. 8).

    The same certified walk as :func:`base_bound` (witnesses from b = 1 up to the first base where a full scan
    over all m finds no negative B_m), without the sweep for the robust bound and the islands, which costs far
    more for large L. For d = 128 it reproduces Su's brute-force values, e.g. 2.70e4 at L = 4096 and 6.54e7 at
    L = 2**20 (tests/theory/test_bound.py).

    Args:
        context_length: L, the number of distances m = 0 … L−1 that must keep B_m(b) >= 0.
        rotary_dim: the rotary dimension d (even).

    Returns:
        The smallest feasible base (``base_bound(L, d).smallest_base``); 1.0 when L <= 2 (every base is feasible).

    Example:
        >>> round(smallest_feasible_base(4096, 128))
        26952
    """
    context_length, rotary_dim, trivial = _bound_args(context_length, rotary_dim)
    if trivial:
        return 1.0
    sums = _Sums(rotary_dim, context_length)
    return math.exp(walk_infeasible(sums, U_START, math.log(crude_feasible_base(context_length, rotary_dim))))


def robust_base_only(context_length: int, rotary_dim: int, *, residual: int | None = None) -> float:
    """(B) alone: the base above which every base is feasible for L, without the islands below it.

    Sweeps certified full scans *down* from :func:`crude_feasible_base` to the first step that holds an
    infeasible base, then resolves that one step with the forward machinery of :func:`base_bound` (witness walks
    and the feasible sweep), so the islands between (A) and (B), which cost most at large L, are never visited.
    Every base from the result up to the crude bound is certified, so the result is exact (``certified``).

    Args:
        context_length: L.
        rotary_dim: the rotary dimension d (even).
        residual: about how many m each sweep step may leave to the exact per-m search (a speed knob; default 100).

    Returns:
        (B) = ``base_bound(L, d).robust_base``; 1.0 when L <= 2.

    Example:
        >>> round(robust_base_only(1024, 32))
        152903
    """
    context_length, rotary_dim, trivial = _bound_args(context_length, rotary_dim)
    residual = _OPEN_M if residual is None else require_int("residual", residual, minimum=1)
    if trivial:
        return 1.0
    sums = _Sums(rotary_dim, context_length)
    sums.open_m = residual
    low, high = highest_infeasible_step(sums, math.log(crude_feasible_base(context_length, rotary_dim)))
    # somewhere in [low, high] a base is infeasible; everything above high is feasible: walk [low, high] forward
    u = walk_infeasible(sums, low, high)
    while u < high:
        end = sweep_feasible(sums, u, high)
        if end is None:
            break
        crossing, witness = end
        u = walk_infeasible(sums, enter_negative(sums, witness, crossing), high, witness)
    return math.exp(min(u, high))


def max_context_length(base: float, rotary_dim: int, *, limit: int = 1 << 26) -> int | None:
    """The first distance m with B_m(base) < 0: the longest context L for which ``base`` is feasible.

    Every m is checked by :func:`~ropekit.theory.decay.first_negative_m` (one matrix product per block of m; the
    scan stops at the first block holding a negative value).

    Args:
        base: the RoPE base b (> 1).
        rotary_dim: the rotary dimension d (even).
        limit: scan m < limit at most.

    Returns:
        The first m with B_m(b) < −tolerance(m), or ``None`` if every m < ``limit`` has B_m(b) >= 0.

    Example:
        >>> max_context_length(10000.0, 128)
        1707
    """
    base = require_float("base", base, above=1.0)
    rotary_dim = require_rotary_dim("rotary_dim", rotary_dim)
    limit = require_int("limit", limit, minimum=1)
    theta = np.exp(-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim * math.log(base))  # (d/2,)
    return first_negative_m(theta, limit)
