"""The base bound for d = 128, L = 1k … 1M, beside Men et al.'s Table 1 and Su's values, as a markdown table.

Run: ``python evidence/theory/theory_table.py`` (a few minutes on 2 cores; ``--robust-limit``, ``--robust-alone-limit``
and ``--max-exponent`` change how much is computed). Prints markdown for docs/theory.md.

Columns: ropekit's smallest feasible base (A), exact at every L; the robust base (B), exact where
L <= ``--robust-alone-limit``; the number of feasible islands where L <= ``--robust-limit`` (the walk through the
islands costs most: about 2 minutes at 128k on the loaded 2-core machine; above that (B) comes alone from the
certified downward sweep, about a minute at 1M there); the two published values with their face-value check (the first m where B_m of
the printed base goes negative, or "ok" when none below L).
"""

from __future__ import annotations

import argparse
import time

from ropekit.theory import (
    PAPER_BOUND,
    SU_BOUND,
    base_bound,
    face_value_check,
    robust_base_only,
    smallest_feasible_base,
)

NOT_COMPUTED = "not computed (raise --robust-alone-limit)"


def _sci(value: float, digits: int = 2) -> str:
    """4.3e3 rather than 4.3e+03."""
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _face(length: int, base: float) -> str:
    check = face_value_check(length, base)
    return f"{_sci(base)} (ok)" if check.satisfied else f"{_sci(base)} (fails: m = {check.first_negative:,})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--robust-limit", type=int, default=2**17, help="compute the islands up to this L")
    parser.add_argument("--robust-alone-limit", type=int, default=2**20, help="compute (B) alone up to this L")
    parser.add_argument("--max-exponent", type=int, default=20, help="largest L = 2**this")
    args = parser.parse_args()
    total = time.perf_counter()
    print("| L | smallest feasible base (A) | robust base (B) | islands | Men et al. Table 1 | Su | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for exponent in range(10, args.max_exponent + 1):
        length = 2**exponent
        start = time.perf_counter()
        if length <= args.robust_limit:
            bound = base_bound(length, args.head_dim)
            smallest, robust, islands = bound.smallest_base, _sci(bound.robust_base, 4), str(len(bound.islands))
        else:
            smallest, islands = smallest_feasible_base(length, args.head_dim), "–"
            alone = length <= args.robust_alone_limit
            robust = _sci(robust_base_only(length, args.head_dim), 4) if alone else NOT_COMPUTED
        seconds = time.perf_counter() - start
        label = f"{length // 1024}k" if length < 2**20 else f"{length // 2**20}M"
        print(
            f"| {label} | {_sci(smallest, 4)} | {robust} | {islands} | {_face(length, PAPER_BOUND[length])} | "
            f"{_face(length, SU_BOUND[length])} | {seconds:.1f} |",
            flush=True,
        )
    print(f"\ntotal wall time: {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
