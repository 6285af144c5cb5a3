"""Time the exact base bound at d = 128 against one direct evaluation of B_m over all m < 2**20, in one run.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_bound.py`` (``ROPEKIT_NO_JIT=1`` in front times the numpy path
instead of the compiled loops of the ``fast`` extra; a few minutes, plus ``base_bound(2**20, 128)``, the
longest figure, which stops at its target unless ``--full-1m-limit`` says otherwise; ``--skip-full-1m`` leaves it
out, ``--only-full-1m`` times it alone). Every figure is printed as a ratio to one direct evaluation of
B_m(b) = Σ_i cos(m·θ_i) for every m < 2**20 at one base (``similarity_margin``, the best of three), measured in the
same run, so the ratios hold on a loaded machine as well as on an idle one. The targets are the project's speed targets for the bound.

How each is computed (see ``ropekit.theory.bound``):
* (A): a certified witness walk up from b = 1, full scans over m where the witnesses run out;
* (B) alone: a certified sweep *down* from the crude bound with grouped Lipschitz bounds over (m, u) cells;
* both with islands: the walk from (A) up through every island to (B) (the feasible stretches by the same sweep).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections.abc import Callable

import numpy as np

from ropekit.theory import _bound_jit, base_bound, robust_base_only, similarity_margin, smallest_feasible_base

#: (figure, target as a multiple of one direct evaluation)
TARGETS = {
    "(A) smallest feasible base, L = 2**20": 6,
    "(B) robust base alone, L = 2**20": 60,
    "base_bound(131072): (A), (B) and islands": 20,
    "base_bound(2**20): (A), (B) and islands": 300,
}


def timed(function: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def _full_bound(length: int, head_dim: int, queue: multiprocessing.Queue) -> None:
    bound = base_bound(length, head_dim)
    queue.put((bound.smallest_base, bound.robust_base, len(bound.islands)))


def timed_with_limit(length: int, head_dim: int, limit: float) -> tuple[str, float, bool]:
    """base_bound(length, head_dim) in a child process, stopped after ``limit`` seconds.

    Returns (its description or "did not finish", seconds, finished).
    """
    queue: multiprocessing.Queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=_full_bound, args=(length, head_dim, queue))
    start = time.perf_counter()
    child.start()
    child.join(limit)
    seconds = time.perf_counter() - start
    if child.is_alive():
        child.terminate()
        child.join()
        return f"did not finish within {limit:.0f} s", seconds, False
    smallest, robust, islands = queue.get()
    return f"A = {smallest:.7g}, B = {robust:.7g}, {islands} islands", seconds, True


def describe(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return f"A = {value.smallest_base:.7g}, B = {value.robust_base:.7g}, {len(value.islands)} islands"  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--skip-full-1m", action="store_true", help="leave out base_bound(2**20) (the longest)")
    parser.add_argument(
        "--full-1m-limit",
        type=float,
        default=None,
        help="stop base_bound(2**20) after this many seconds (default: its target × one direct evaluation)",
    )
    parser.add_argument("--only-full-1m", action="store_true", help="time only base_bound(2**20)")
    args = parser.parse_args()
    d, large = args.head_dim, 2**20
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; load average at start: {_load()}")
    _, seconds = timed(_bound_jit.warm_up)
    print(f"inner loops: {_bound_jit.describe()}; compiled or loaded in {seconds:.2f} s (once per install: cached)")
    distances = np.arange(large)
    direct = min(timed(lambda: similarity_margin(distances, d, 1e7))[1] for _ in range(3))
    print(f"one direct evaluation of B_m over all m < 2**20 (best of 3): {direct:.3f} s", flush=True)
    jobs = {
        "(A) smallest feasible base, L = 2**20": lambda: smallest_feasible_base(large, d),
        "(B) robust base alone, L = 2**20": lambda: robust_base_only(large, d),
        "base_bound(131072): (A), (B) and islands": lambda: base_bound(131072, d),
    }
    rows = []
    for name, job in {} if args.only_full_1m else jobs.items():
        value, seconds = timed(job)
        ratio = seconds / direct
        rows.append((name, seconds, ratio, TARGETS[name], True))
        print(f"{name}: {describe(value)} in {seconds:.1f} s ({ratio:.1f}x); load average {_load()}", flush=True)
    if not args.skip_full_1m:
        name = "base_bound(2**20): (A), (B) and islands"
        limit = TARGETS[name] * direct if args.full_1m_limit is None else args.full_1m_limit
        text, seconds, finished = timed_with_limit(large, d, limit)
        rows.append((name, seconds, seconds / direct, TARGETS[name], finished))
        print(f"{name}: {text} in {seconds:.1f} s ({seconds / direct:.1f}x); load average {_load()}", flush=True)
    print()
    print("| figure | time (s) | × one direct evaluation | target | |")
    print("|---|---:|---:|---:|---|")
    for name, seconds, ratio, target, finished in rows:
        more = "" if finished else "> "
        verdict = "met" if finished and ratio <= target else "missed" if ratio > target else "stopped before it"
        print(f"| {name} | {more}{seconds:.1f} | {more}{ratio:.1f} | ≤ {target} | {verdict} |")
    print(f"\none direct evaluation: {direct:.3f} s; load average at the end: {_load()}")


def _load() -> str:
    try:
        with open("/proc/loadavg") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
