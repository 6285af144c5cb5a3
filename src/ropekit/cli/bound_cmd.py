"""``ropekit bound``: the exact base bound of Men et al. for one context length, beside the published values."""

from __future__ import annotations

import time
from typing import Any

import typer

from ropekit import _costs
from ropekit._costs import ISLANDS_COST, MAX_CONTEXT, MAX_ROTARY_DIM, ROBUST_ALONE_COST, ROBUST_DEFAULT
from ropekit.cli.common import check_bound_work, check_range, fail, json_option, option_errors, parse_length, print_json

#: islands shown in the table (JSON has all of them).
SHOWN_ISLANDS = 5


def bound_command(
    target_length: str = typer.Option(
        ..., "--target-length", help="Context length L the base must serve: 4096, 128k, 1M (k = 1024; at most 1M)."
    ),
    rotary_dim: int = typer.Option(128, "--rotary-dim", help=f"Rotary dimension d (even, at most {MAX_ROTARY_DIM})."),
    robust: bool | None = typer.Option(
        None,
        "--robust/--no-robust",
        metavar="",
        help=f"Also compute the robust bound (default: only when {ROBUST_DEFAULT}, with the islands; otherwise "
        f"--robust computes it alone: {ROBUST_ALONE_COST}).",
    ),
    with_islands: bool = typer.Option(
        False,
        "--islands",
        metavar="",
        help=f"With --robust beyond the default: also walk the feasible islands between (A) and (B) ({ISLANDS_COST}).",
    ),
    json_output: bool = json_option("Print JSON instead of a table."),
) -> None:
    """Smallest feasible base (A), robust base (B) and feasible islands for a context length (arXiv 2405.14591).

    A base b is feasible for L when B_m(b) = Σ_i cos(m·b^(−2i/d)) >= 0 for every integer m < L. Every m is checked.
    """
    length = parse_length(target_length, "--target-length", minimum=2, maximum=MAX_CONTEXT)
    dim = rotary_dim
    check_range("--rotary-dim", dim, minimum=2, maximum=MAX_ROTARY_DIM)
    check_bound_work(length, dim, "--target-length", "--rotary-dim")
    if with_islands and robust is False:
        raise fail("--islands walks the islands below the robust bound (B); it cannot go with --no-robust")
    start = time.perf_counter()
    smallest, robust_base, islands, certified = _bounds(length, dim, robust, with_islands)
    seconds = time.perf_counter() - start
    published = _published(length, dim)
    if json_output:
        print_json(
            {
                "context_length": length,
                "rotary_dim": dim,
                "smallest_base": smallest,
                "robust_base": robust_base,
                "islands": None if islands is None else [list(pair) for pair in islands],
                "island_count": None if islands is None else len(islands),
                "certified": certified,
                "published": published,
                "seconds": seconds,
            }
        )
        return
    _print_bounds(length, dim, robust, smallest, robust_base, islands, published)
    from rich.console import Console

    console = Console()
    if islands:
        from rich.table import Table

        shown = Table(title=f"first {min(SHOWN_ISLANDS, len(islands))} of {len(islands)} feasible islands")
        for column in ("low", "high", "width"):
            shown.add_column(column, justify="right")
        for low, high in islands[:SHOWN_ISLANDS]:
            shown.add_row(f"{low:.8g}", f"{high:.8g}", f"{(high - low) / low:.2%}")
        console.print(shown)
    console.print(f"computed in {seconds:.1f} s")


def _bounds(length: int, dim: int, robust: bool | None, with_islands: bool) -> tuple[float, Any, Any, Any]:
    """``(smallest, robust_base, islands, certified)``: (A) always; (B) and the islands as asked or by default
    (``None`` where not computed)."""
    from ropekit.theory.bound import base_bound, robust_base_only, smallest_feasible_base

    by_default = _costs.robust_by_default(length, dim)
    with_robust = robust if robust is not None else with_islands or by_default
    with option_errors(rotary_dim="--rotary-dim", context_length="--target-length"):
        if with_robust and (by_default or with_islands):
            bound = base_bound(length, dim)
            return bound.smallest_base, bound.robust_base, bound.islands, bound.certified
        smallest = smallest_feasible_base(length, dim)
        if with_robust:  # (B) alone: the islands between (A) and (B) cost minutes here
            return smallest, robust_base_only(length, dim), None, True
        return smallest, None, None, None


def _published(length: int, dim: int) -> dict[str, dict[str, Any]] | None:
    """The published bases for ``length`` (Men et al.'s Table 1, Su's) checked at face value, where there are any."""
    from ropekit.theory.published import PAPER_BOUND, PUBLISHED_ROTARY_DIM, SU_BOUND, face_value_check

    if dim != PUBLISHED_ROTARY_DIM or length not in PAPER_BOUND:
        return None
    published = {}
    for source, table in (("paper", PAPER_BOUND), ("su", SU_BOUND)):
        check = face_value_check(length, table[length])
        published[source] = {"base": check.base, "first_negative": check.first_negative, "satisfied": check.satisfied}
    return published


def _print_bounds(
    length: int,
    dim: int,
    robust: bool | None,
    smallest: float,
    robust_base: float | None,
    islands: Any,
    published: dict[str, dict[str, Any]] | None,
) -> None:
    """The table of (A), (B), the islands' count and the published bases."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Base bound for L = {length:,}, d = {dim} (Men et al., arXiv 2405.14591)")
    table.add_column("")
    table.add_column("base", justify="right")
    table.add_column("note")
    table.add_row("(A) smallest feasible", f"{smallest:.6g}", "B_m >= 0 for every m < L; bases just above may fail")
    if robust_base is None:
        why = "--no-robust" if robust is False else _beyond_default(length, dim)
        table.add_row("(B) robust", "not computed", f"{why}; --robust computes it ({ROBUST_ALONE_COST})")
    else:
        table.add_row("(B) robust", f"{robust_base:.6g}", "every base above is feasible")
        if islands is None:
            table.add_row(
                "islands",
                "not computed",
                f"{_beyond_default(length, dim)}: (B) alone, by the downward sweep; --islands walks them "
                f"({ISLANDS_COST})",
            )
        else:
            table.add_row("islands", str(len(islands)), "feasible intervals from (A) up to (B)")
    if published is not None:
        names = {"paper": "Men et al., Table 1", "su": "Su (kexue.fm 10122)"}
        for source, entry in published.items():
            verdict = (
                "satisfies its condition"
                if entry["satisfied"]
                else f"fails at face value: B_m < 0 at m = {entry['first_negative']:,}"
            )
            table.add_row(names[source], f"{entry['base']:.2g}", verdict)
    Console().print(table)


def _beyond_default(length: int, dim: int) -> str:
    """Why the robust bound's islands are not computed by default here (see :func:`ropekit._costs.robust_by_default`)."""
    return f"L > {_costs.ROBUST_AUTO_LIMIT:,}" if length > _costs.ROBUST_AUTO_LIMIT else f"d > {_costs.ROBUST_AUTO_DIM}"
