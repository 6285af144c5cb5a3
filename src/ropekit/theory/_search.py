"""The base bound's walks and sweeps over bases u = ln b: witness walks through infeasible stretches and certified
sweeps through feasible ones (the method is in the docstring of :mod:`ropekit.theory.bound`, which drives them).
"""

from __future__ import annotations

import math

import numpy as np

from ropekit.theory._certificates import _OPEN_FLOOR, _OPEN_SHARE, _Sums

#: the walk starts here (b = 1 + 1e-9): B_2 ≈ (d/2)·cos 2 < 0 just above b = 1, so every smaller base is infeasible.
U_START = 1e-9
#: after a full scan, the witness pool: at most this many m with B_m below this level, each with this many
#: neighbours on either side
_POOL_SIZE = 128
_POOL_LEVEL = 0.5
_POOL_WIDTH = 6
#: where :func:`walk_infeasible` looks for a new witness before a full scan: (centres, m on either side, at most
#: L/1024: a full scan costs about as much as 2·L/1024 circles of that width)
_SEARCH = (("recent", 64), ("recent", 1024), ("pool", _POOL_WIDTH), ("pool", 64))
#: first of all, the m within this distance of the last witnesses are walked directly
_NEAR = 4


def walk_infeasible(sums: _Sums, u: float, stop: float, seed: int | None = None) -> float:
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
            value, slope, curvature = sums.taylor(negative.astype(np.float64), np.full(negative.size, u))
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


def _adapt_cell(sums: _Sums) -> float:
    """Halve the coarse cells when their m-direction term alone leaves many open, double them when it leaves few.

    Returns the share of cells the sweeps aim to leave open.
    """
    share = max(_OPEN_SHARE, _OPEN_FLOOR / sums.length)
    if sums.cell_fraction > 4 * share and sums.cell > 4:
        sums.set_cell(sums.cell // 2)
    elif sums.cell_fraction < share / 2 and sums.cell < sums.max_cell:
        sums.set_cell(sums.cell * 2)
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


def sweep_feasible(sums: _Sums, u: float, stop: float) -> tuple[float, int] | None:
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


def highest_infeasible_step(sums: _Sums, stop: float) -> tuple[float, float]:
    """Sweep certified steps down from ``stop`` (feasible, as is everything above it) to the first step
    [low, high] that holds an infeasible base; every base in [high, stop] is certified feasible on the way.

    Returns (low, high).
    """
    high = stop
    while True:
        low = max(high - sums.step, U_START)
        m, low_values, high_values, fraction = sums.certify(low, high)
        if m.size and (
            np.any(low_values < -sums.tol(m)) or _first_crossing(sums, m, low, high, low_values, high_values)
        ):
            return low, high
        if low <= U_START:
            return low, high
        sums.step = _next_step(sums, fraction, m.size, low)
        high = low


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


def enter_negative(sums: _Sums, m: int, u: float) -> float:
    """A u' just above u where B_m(u') < −tolerance(m), B_m falling through −tolerance(m) at u."""
    _, slope, _ = sums.taylor(np.array([float(m)]), np.array([u]))
    step = float(sums.tol(m)) / max(abs(float(slope[0])), 1e-300)
    for _ in range(60):
        if sums.direct(np.array([m]), u + step)[0] < -float(sums.tol(m)):
            return u + step
        step *= 2
    raise RuntimeError(f"B_{m} does not go below its tolerance after u = {u!r}; please report this")
