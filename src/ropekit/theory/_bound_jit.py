"""The witness walk and witness search of :mod:`ropekit.theory.bound`, compiled with numba when it is installed.

Below the smallest feasible base, :func:`ropekit.theory._search.walk_infeasible` needs some 24,000 witnesses at
L = 2**20 (an m with B_m < 0 and the stretch of bases it covers). Finding and walking each one takes a few dozen
numpy operations on a handful of values, so in numpy the time goes to Python, not arithmetic. This file holds the
two inner loops as plain loops that numba compiles:

* :func:`_walk_loop`, the certified walk of :meth:`~ropekit.theory._margins._Margins.walk`: the same formulas and
  stopping rules, float64 throughout, one loop per m;
* :func:`_search_loop`, the search of :meth:`~ropekit.theory._margins._Margins.around` followed by
  :meth:`~ropekit.theory._margins._Margins.confirmed_negative`: B_m(u) for m in circles around given centres by the
  rotation cos((m+1)θ) = cos(mθ)cos θ − sin(mθ)sin θ (restarted from exact values every ``_RESTART`` m, so its
  error stays below 1e-13 per pair), and the candidates below −tolerance(m)/2 confirmed by direct summation.

Exactness does not depend on the compiled code's rounding: every witness is confirmed by direct summation with
the tolerance of :func:`ropekit.theory.decay.tolerance`, the walk's steps carry the same curvature certificate,
and a missed candidate only costs a full scan. The results agree with the numpy path to rounding (a few ulp of u);
``tests/theory/test_bound_jit.py`` runs both, and the uncompiled loops, against each other.

numba is optional (the ``fast`` extra): :func:`compiled` returns ``None`` without it, and
:mod:`~ropekit.theory.bound` keeps its numpy path. ``ROPEKIT_NO_JIT=1`` forces the numpy path. The first call after
an install compiles the kernels (a few seconds) and caches them on disk (``cache=True``), so later processes load
them at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import NamedTuple

import numpy as np

#: the rotation in :func:`_search_loop` restarts from exact cos/sin every this many m
_RESTART = 256


class Kernels(NamedTuple):
    """The compiled loops (same signatures as :func:`_walk_loop` and :func:`_search_loop`)."""

    walk: Callable[..., None]
    search: Callable[..., np.ndarray]


def enabled() -> bool:
    """False when ``ROPEKIT_NO_JIT`` is set to anything but ``""`` or ``"0"``."""
    return os.environ.get("ROPEKIT_NO_JIT", "") in ("", "0")


@cache
def _compile() -> Kernels | None:
    try:
        import numba
    except ImportError:
        return None
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    # the search may sum in any order (its values only pick candidates; each is then confirmed, and the confirming
    # sum's order changes it by rounding far below the tolerance): that lets the pair loop run in SIMD lanes
    vector = numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})
    return Kernels(walk=jit(_walk_loop), search=vector(_search_loop))


#: the compiled loops are used from this context length on: below it the whole bound takes about a second in numpy,
#: less than loading the compiled loops from their cache (0.3 s) or compiling them after an install (about 3.5 s)
JIT_FROM = 1 << 15


def compiled(length: int | None = None) -> Kernels | None:
    """The compiled loops, or ``None`` when numba is not installed, ``ROPEKIT_NO_JIT`` is set, or ``length`` (the
    context length, when given) is below :data:`JIT_FROM`."""
    if not enabled() or (length is not None and length < JIT_FROM):
        return None
    return _compile()


def describe() -> str:
    """Which path the base bound takes, in words (for benchmarks and reports)."""
    if not enabled():
        return "numpy (ROPEKIT_NO_JIT is set)"
    if _compile() is None:
        return "numpy (numba is not installed; pip install 'ropekit[fast]' for the compiled loops)"
    import numba

    return f"compiled loops (numba {numba.__version__})"


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both loops now, on a tiny input, so later timings exclude it."""
    kernels = compiled()
    if kernels is None:
        return
    x = np.arange(0, 8, 2, dtype=np.float64) / 8
    m, start = np.array([3.0]), np.array([1.0])
    at, crossed = start.copy(), np.zeros(1, dtype=np.bool_)
    kernels.walk(m, start, start + 1.0, x, x * x, 1e-15, True, 2, at, crossed)
    kernels.search(np.array([3], dtype=np.int64), 1.0, 2, x, 1e-15, 8)


def _walk_loop(
    m: np.ndarray,
    start: np.ndarray,
    until: np.ndarray,
    x: np.ndarray,
    x2: np.ndarray,
    unit: float,
    negative: bool,
    max_steps: int,
    at: np.ndarray,
    crossed: np.ndarray,
) -> None:
    """Walk each m[j] from start[j] towards until[j] (see :meth:`~ropekit.theory._margins._Margins.walk`); write the ends to ``at``, ``crossed``.

    Plain Python too (numba compiles it as it stands), so the tests can run it uncompiled.
    """
    pairs = x.shape[0]
    shared = start[0] if start.shape[0] else 0.0  # walks usually start together: θ there is computed once
    theta_shared = np.exp(-x * shared)
    for j in range(m.shape[0]):
        mj = m[j]
        u = start[j]
        top = until[j]
        tol = unit * (mj + 1.0)
        hit = False
        for _ in range(max_steps):
            value = 0.0
            slope = 0.0
            curvature = 0.0
            for i in range(pairs):
                phase = mj * (theta_shared[i] if u == shared else np.exp(-x[i] * u))
                value += np.cos(phase)
                slope += x[i] * (phase * np.sin(phase))
                curvature += x2[i] * (phase * (1.0 + phase))
            level = value + tol  # signed distance to the level −tolerance(m)
            # a step below the spacing of floats at u cannot move u: the crossing is there to within rounding
            unresolved = abs(level) <= abs(slope) * 4.0 * np.spacing(u)
            if negative:
                if level >= 0.0 or (unresolved and slope > 0.0):
                    hit = True
                    break
                root = np.sqrt(slope * slope - 2.0 * curvature * level)  # largest t: level + s·t + c·t²/2 <= 0
                step = (root - slope) / curvature if slope <= 0.0 else -2.0 * level / (root + slope)
            else:
                if (level <= 1e-3 * tol or unresolved) and slope < 0.0:
                    hit = True
                    break
                positive = max(level, 0.0)
                root = np.sqrt(slope * slope + 2.0 * curvature * positive)  # largest t: level + s·t − c·t²/2 >= 0
                step = (root + slope) / curvature if slope >= 0.0 else 2.0 * positive / (root - slope)
            u = min(u + step, top)
            if u >= top:
                break
        at[j] = u
        crossed[j] = hit


def _search_loop(centres: np.ndarray, u: float, width: int, x: np.ndarray, unit: float, length: int) -> np.ndarray:
    """The m in [0, length) within ``width`` of some centre with B_m(u) < −tolerance(m) by direct summation.

    Sorted and without repeats. Candidates come from the rotation (values below −tolerance(m)/2); each is then
    summed directly, so a returned m is a witness exactly as :meth:`~ropekit.theory._margins._Margins.confirmed_negative` defines one.
    """
    pairs = x.shape[0]
    theta = np.exp(-x * u)
    step_cos = np.cos(theta)
    step_sin = np.sin(theta)
    span = 2 * width + 1
    found = np.empty(centres.shape[0] * span, dtype=np.int64)
    count = 0
    values = np.empty(span)
    c = np.empty(pairs)
    s = np.empty(pairs)
    for centre in centres:
        first = max(centre - width, 0)
        last = min(centre + width, length - 1)
        for k in range(last - first + 1):
            m = first + k
            if k % _RESTART == 0:
                for i in range(pairs):
                    c[i] = np.cos(m * theta[i])
                    s[i] = np.sin(m * theta[i])
            total = 0.0
            for i in range(pairs):
                total += c[i]
                c_next = c[i] * step_cos[i] - s[i] * step_sin[i]
                s[i] = s[i] * step_cos[i] + c[i] * step_sin[i]
                c[i] = c_next
            values[k] = total
        for k in range(last - first + 1):
            m = first + k
            tol = unit * (m + 1.0)
            if values[k] < -tol / 2:
                direct = 0.0
                for i in range(pairs):
                    direct += np.cos(m * theta[i])
                if direct < -tol:
                    found[count] = m
                    count += 1
    return np.unique(found[:count])
