"""Time the exact base bound at d = 128: (A) at L = 2**20, (B) alone at L = 2**17, both with islands at 2**16.

Run: ``python benchmarks/bench_bound.py`` (about two minutes on 2 cores; ``--robust-large`` also times (B) alone
at L = 2**20, which takes tens of minutes). The issue's target is both definitions for L = 2**20 in under 5 s on
this 2-core machine; the script prints each time beside that target.

How each is computed (see ``ropekit.theory.bound``):
* (A): a certified witness walk up from b = 1 (starting it at (A) for L/2 instead was tried: no faster, since
  the cost sits in the last stretch below (A));
* (B) alone: a certified sweep of full scans *down* from the crude bound to the first infeasible step;
* both with islands: the walk from (A) up through every island to (B).
"""

from __future__ import annotations

import argparse
import time

from ropekit.theory import base_bound, robust_base_only, smallest_feasible_base

TARGET_SECONDS = 5.0


def timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    return value, time.perf_counter() - start


def report(what: str, value: float, seconds: float) -> None:
    print(f"{what}: {value:.7g} in {seconds:.1f} s ({seconds / TARGET_SECONDS:.1f}x the 5 s target)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--large", type=int, default=2**20, help="L for (A) alone")
    parser.add_argument("--medium", type=int, default=2**17, help="L for (B) alone")
    parser.add_argument("--small", type=int, default=2**16, help="L for both definitions with the islands")
    parser.add_argument("--robust-large", action="store_true", help="also time (B) alone at --large (long)")
    args = parser.parse_args()
    report(f"(A) smallest feasible base, L = {args.large:,}", *timed(smallest_feasible_base, args.large, args.head_dim))
    report(f"(B) robust base alone, L = {args.medium:,}", *timed(robust_base_only, args.medium, args.head_dim))
    if args.robust_large:
        report(f"(B) robust base alone, L = {args.large:,}", *timed(robust_base_only, args.large, args.head_dim))
    bound, seconds = timed(base_bound, args.small, args.head_dim)
    print(
        f"both with islands, L = {args.small:,}: smallest {bound.smallest_base:.7g}, robust {bound.robust_base:.7g}, "
        f"{len(bound.islands)} islands, {bound.scans} full scans, in {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
