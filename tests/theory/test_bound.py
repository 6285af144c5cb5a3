"""The exact base bound against a dense brute-force scan, direct summation and Su's independent table.

Oracle: B_m(b) = Σ_i cos(m·b^(−2i/d)) for every m < L, summed directly (``np.cos`` of the outer product) on a dense
log grid of bases — no block identity, no walk, no certificate. Grids are small enough to keep the file fast.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from ropekit.theory import BaseBound, base_bound, max_context_length, robust_base_only, smallest_feasible_base

#: (head_dim, context_length) pairs checked against brute force; L <= 4096 and several head dims.
CASES = [(8, 4096), (16, 4096), (32, 4096), (64, 2048), (128, 1024)]
#: bases this close (relatively) to a reported edge are not classified by the grid.
EDGE_MARGIN = 1e-6
#: B_m within this of zero counts as zero (rounding of m·θ_i in float64 at these L).
ZERO = 1e-9


def brute_min(bases: np.ndarray, head_dim: int, length: int) -> np.ndarray:
    """min over m < L of Σ_i cos(m·b^(−2i/d)) for each base, by direct summation. Shape ``(len(bases),)``."""
    m = np.arange(length, dtype=np.float64)
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    bases = np.atleast_1d(np.asarray(bases, dtype=np.float64))
    chunk = max(1, (1 << 21) // (length * (head_dim // 2)))
    out = []
    for start in range(0, bases.size, chunk):
        theta = bases[start : start + chunk, None] ** -exponents  # (nb, d/2)
        values = np.cos(m[None, :, None] * theta[:, None, :]).sum(axis=2)  # (nb, L)
        out.append(values.min(axis=1))
    return np.concatenate(out)


@functools.cache
def bound(length: int, head_dim: int) -> BaseBound:
    return base_bound(length, head_dim)


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_grid_agrees_with_brute_force(head_dim, length):
    result = bound(length, head_dim)
    assert result.certified
    grid = np.geomspace(result.smallest_base / 1.3, result.robust_base * 1.3, 400)
    grid = np.concatenate([grid, result.robust_base * np.array([2.0, 10.0, 100.0])])
    edges = np.array([edge for island in result.islands for edge in island] + [result.robust_base])
    near_edge = np.min(np.abs(grid[:, None] / edges[None, :] - 1), axis=1) < EDGE_MARGIN
    grid = grid[~near_edge]
    claimed = np.array([result.is_feasible(float(b)) for b in grid])
    minima = brute_min(grid, head_dim, length)
    # every base claimed feasible (inside an island or above the robust base) is feasible ...
    assert np.all(minima[claimed] >= -ZERO), grid[claimed][minima[claimed] < -ZERO]
    # ... and every base in a gap or below the smallest base is not
    assert np.all(minima[~claimed] < 0), grid[~claimed][minima[~claimed] >= 0]
    assert claimed.any() and (~claimed).any()


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_edges_are_zeros(head_dim, length):
    """At every reported edge min_m B_m is zero; just outside it is negative, just inside non-negative."""
    result = bound(length, head_dim)
    lows = np.array([low for low, _ in result.islands] + [result.robust_base])
    highs = np.array([high for _, high in result.islands])
    delta = 1e-6  # narrower than any island here (the narrowest is ~6e-5 relative)
    assert np.all(np.abs(brute_min(np.concatenate([lows, highs]), head_dim, length)) < ZERO)
    assert np.all(brute_min(lows * (1 - delta), head_dim, length) < -1e-10)
    assert np.all(brute_min(highs * (1 + delta), head_dim, length) < -1e-10)
    assert np.all(brute_min(lows * (1 + delta), head_dim, length) >= -ZERO)
    assert np.all(brute_min(highs * (1 - delta), head_dim, length) >= -ZERO)


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_islands_are_ordered_and_start_at_the_smallest_base(head_dim, length):
    result = bound(length, head_dim)
    flat = [edge for island in result.islands for edge in island] + [result.robust_base]
    assert flat == sorted(flat)
    assert result.islands[0][0] == result.smallest_base
    assert len(result.gaps) == len(result.islands)


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_smallest_feasible_base_alone_equals_the_full_bound(head_dim, length):
    assert smallest_feasible_base(length, head_dim) == pytest.approx(bound(length, head_dim).smallest_base, rel=1e-12)


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_robust_base_alone_equals_the_full_bound(head_dim, length):
    """The downward sweep finds the same (B) as the upward walk through every island."""
    assert robust_base_only(length, head_dim) == pytest.approx(bound(length, head_dim).robust_base, rel=1e-12)


@pytest.mark.parametrize(("head_dim", "length"), CASES)
def test_max_context_length_is_the_inverse(head_dim, length):
    """Inside an island the base supports every m < L; in a gap its first negative m is below L."""
    result = bound(length, head_dim)
    for low, high in result.islands:
        assert max_context_length(math.sqrt(low * high), head_dim, limit=length) is None
    for end, start in result.gaps:
        first = max_context_length(math.sqrt(end * start), head_dim, limit=length)
        assert first is not None and first < length


def test_first_negative_distance_for_llama_base():
    """b = 1e4, d = 128: B_m >= 0 for m < 1707 and B_1707 < 0, by direct summation."""
    assert max_context_length(10000.0, 128) == 1707
    theta = 10000.0 ** -(np.arange(0, 128, 2) / 128)
    values = np.cos(np.outer(np.arange(1708, dtype=np.float64), theta)).sum(axis=1)
    assert values[:1707].min() >= 0
    assert values[1707] < 0


def test_smallest_base_matches_su_table():
    """Su Jianlin's brute force (kexue.fm 10122), to the digits it prints: 4293, 1.16e4, 2.70e4."""
    expected = {1024: 4293, 2048: 1.16e4, 4096: 2.70e4}
    for length, value in expected.items():
        assert smallest_feasible_base(length, 128) == pytest.approx(value, rel=5e-3)


def test_smallest_base_4096_example():
    """The docstring example: 26952.34 for L = 4096, d = 128; 26952.3 is already infeasible (m = 4012)."""
    assert smallest_feasible_base(4096, 128) == pytest.approx(26952.339, rel=1e-8)
    assert max_context_length(26952.3, 128) == 4012


def test_short_contexts_are_feasible_for_every_base():
    assert smallest_feasible_base(2, 128) == 1.0
    assert base_bound(2, 128).robust_base == 1.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: base_bound(0, 128), "context_length"),
        (lambda: base_bound(1024, 7), "rotary_dim"),
        (lambda: base_bound(1024, 2), "rotary_dim"),
        (lambda: smallest_feasible_base(1024, 127), "rotary_dim"),
        (lambda: smallest_feasible_base(-5, 128), "context_length"),
        (lambda: max_context_length(1.0, 128), "base"),
        (lambda: max_context_length(1e4, 9), "rotary_dim"),
        (lambda: robust_base_only(0, 128), "context_length"),
        (lambda: robust_base_only(1024, 5), "rotary_dim"),
        (lambda: robust_base_only(1024, 128, residual=0), "residual"),
        (lambda: base_bound(1024, 128, residual=-3), "residual"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
