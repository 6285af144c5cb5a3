"""Time the exact base bound: the smallest feasible base at L = 2**20 and both definitions at L = 2**16 (d = 128).

Run: ``python benchmarks/bench_bound.py`` (a few minutes on 2 cores). The issue's target is both definitions for
L = 2**20 in under 5 s on this 2-core machine; the robust bound at 2**20 is not timed here because it takes hours
(its sweep grows about quadratically in L), so the script times what is feasible and prints the gap to the target.
"""

from __future__ import annotations

import argparse
import time

from ropekit.theory import base_bound, smallest_feasible_base

TARGET_SECONDS = 5.0


def timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--large", type=int, default=2**20, help="L for the smallest base alone")
    parser.add_argument("--small", type=int, default=2**16, help="L for both definitions")
    args = parser.parse_args()
    smallest, seconds = timed(smallest_feasible_base, args.large, args.head_dim)
    print(f"smallest feasible base, L = {args.large:,}: {smallest:.6g} in {seconds:.1f} s", flush=True)
    print(
        f"  target for both definitions at this L: {TARGET_SECONDS:g} s; smallest alone is {seconds / TARGET_SECONDS:.1f}x it"
    )
    smallest, seconds = timed(smallest_feasible_base, args.small, args.head_dim)
    print(f"smallest feasible base, L = {args.small:,}: {smallest:.6g} in {seconds:.1f} s", flush=True)
    bound, seconds = timed(base_bound, args.small, args.head_dim)
    print(
        f"both definitions, L = {args.small:,}: smallest {bound.smallest_base:.6g}, robust {bound.robust_base:.6g}, "
        f"{len(bound.islands)} islands, {bound.scans} full scans, in {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
