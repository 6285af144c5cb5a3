"""The compiled loops of the base bound (``ropekit.theory._bound_jit``) against the numpy path they replace.

Oracles: the numpy walk and search of :class:`ropekit.theory._certificates._Sums` (``ROPEKIT_NO_JIT=1``), direct summation
of B_m(u) = Σ_i cos(m·e^(−x_i·u)), and the same loops run uncompiled as plain Python. Skipped without numba.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.theory import _bound_jit, base_bound, smallest_feasible_base
from ropekit.theory._certificates import _Sums

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def compiled_at_every_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled loops start at L = 32768 in use; these tests compare both paths at small L too."""
    monkeypatch.setattr(_bound_jit, "JIT_FROM", 0)


def test_small_contexts_stay_in_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    assert _bound_jit.compiled(4096) is None
    assert _bound_jit.compiled(1 << 15) is not None


def test_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _bound_jit.compiled() is not None
    monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
    assert _bound_jit.compiled() is None
    monkeypatch.setenv("ROPEKIT_NO_JIT", "0")
    assert _bound_jit.compiled() is not None


def _walk_both(monkeypatch: pytest.MonkeyPatch, sums: _Sums, m: np.ndarray, u: float, until: float, negative: bool):
    compiled = sums.walk(m, u, until, negative=negative)
    monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
    reference = sums.walk(m, u, until, negative=negative)
    monkeypatch.delenv("ROPEKIT_NO_JIT")
    # the plain-Python loop (what numba compiles), on a few m: slow uncompiled
    few = m[:6].astype(np.float64)
    at, crossed = np.full(few.shape, u), np.zeros(few.shape, dtype=bool)
    _bound_jit._walk_loop(
        few, at.copy(), np.full(few.shape, until), sums.x, sums.x2, sums.unit, negative, 400, at, crossed
    )
    return compiled, reference, (at, crossed)


@pytest.mark.parametrize("negative", [True, False])
def test_walk_matches_numpy(monkeypatch: pytest.MonkeyPatch, negative: bool) -> None:
    sums = _Sums(128, 1 << 16)
    u = math.log(3.0e5)
    values = sums.scan(u)
    tol = sums.tol(np.arange(values.size))
    side = values < -tol if negative else values > 1.0
    side[0] = False  # B_0 = d/2 for every base: nothing to walk
    m = np.flatnonzero(side)[:: max(1, int(side.sum()) // 60)][:60]
    assert m.size >= 12
    until = u + 1e-3
    (at, crossed), (at_np, crossed_np), (at_py, crossed_py) = _walk_both(monkeypatch, sums, m, u, until, negative)
    np.testing.assert_array_equal(crossed, crossed_np)
    np.testing.assert_allclose(at, at_np, rtol=1e-12, atol=0)
    np.testing.assert_allclose(at_py, at[:6], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(crossed_py, crossed[:6])
    assert np.all(at > u)  # every walk moved: each m starts strictly on its side
    # where a walk crossed, B_m sits at the level −tolerance(m): its sign flips within a hair of the end
    for mi, end in zip(m[crossed], at[crossed], strict=True):
        theta = lambda v: np.exp(-sums.x * v)  # noqa: E731
        level = lambda v: np.cos(mi * theta(v)).sum() + sums.tol(mi)  # noqa: E731, B023
        hair = 1e-9 * end
        inside, outside = level(end - hair), level(end + hair)
        assert (inside < 0 < outside) if negative else (inside > 0 > outside), (mi, end)


def test_search_matches_numpy_and_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    sums = _Sums(128, 1 << 18)
    u = math.log(3.0e6)
    direct = sums.scan(u)
    truth = np.flatnonzero(direct < -sums.tol(np.arange(direct.size)))
    assert truth.size > 10
    rng = np.random.default_rng(0)
    centres = np.concatenate([rng.choice(truth, 3), [0, sums.length - 1, 12345]]).astype(np.int64)
    for width in (4, 64, 1024):
        found = sums.search(centres, u, width)
        monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
        reference = sums.search(centres, u, width)
        monkeypatch.delenv("ROPEKIT_NO_JIT")
        near = np.unique(np.add.outer(centres, np.arange(-width, width + 1)))
        expected = np.intersect1d(truth, near)
        np.testing.assert_array_equal(found, expected)
        # the numpy path evaluates whole blocks around each centre, so it may also report witnesses a little further
        assert np.isin(expected, reference).all() and np.isin(reference, truth).all()
        assert np.all(np.diff(found) > 0)
    # the plain-Python loop gives the same set
    plain = _bound_jit._search_loop(centres, u, 64, sums.x, sums.unit, sums.length)
    np.testing.assert_array_equal(plain, sums.search(centres, u, 64))


@pytest.mark.parametrize(("length", "head_dim"), [(4096, 128), (20000, 64), (12000, 128)])
def test_bound_same_with_and_without_jit(monkeypatch: pytest.MonkeyPatch, length: int, head_dim: int) -> None:
    fast = base_bound(length, head_dim)
    monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
    slow = base_bound(length, head_dim)
    assert len(fast.islands) == len(slow.islands)
    assert fast.smallest_base == pytest.approx(slow.smallest_base, rel=1e-12)
    assert fast.robust_base == pytest.approx(slow.robust_base, rel=1e-12)
    for (a, b), (c, d) in zip(fast.islands, slow.islands, strict=True):
        assert a == pytest.approx(c, rel=1e-12)
        assert b == pytest.approx(d, rel=1e-12)


def test_smallest_same_with_and_without_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = smallest_feasible_base(1 << 17, 128)
    monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
    assert fast == pytest.approx(smallest_feasible_base(1 << 17, 128), rel=1e-12)


def test_describe_and_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    _bound_jit.warm_up()  # compiles or loads both loops; must not raise
    assert _bound_jit.describe() == f"compiled loops (numba {numba.__version__})"
    monkeypatch.setenv("ROPEKIT_NO_JIT", "1")
    assert _bound_jit.describe().startswith("numpy (ROPEKIT_NO_JIT")
    _bound_jit.warm_up()  # nothing to compile on the numpy path


def test_without_numba_the_numpy_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now raises ImportError
    _bound_jit._compile.cache_clear()
    try:
        assert _bound_jit.compiled() is None
        assert "numba is not installed" in _bound_jit.describe()
        assert round(smallest_feasible_base(4096, 128)) == 26952  # Su's brute force: 2.70e4
    finally:
        monkeypatch.undo()
        _bound_jit._compile.cache_clear()
    assert _bound_jit.compiled() is not None
