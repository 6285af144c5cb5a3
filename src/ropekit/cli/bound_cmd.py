"""``ropekit bound``: the exact base bound of Men et al. for one context length, beside the published values."""

from __future__ import annotations

import time

import typer

from ropekit._costs import ROBUST_AUTO_LIMIT  # the one cut-off, shared with plan and the report
from ropekit.cli.common import (
    check_bound_work,
    check_range,
    fail,
    json_option,
    option_errors,
    parse_length,
    print_json,
    resolve_alias,
)

#: islands shown in the table (JSON has all of them).
SHOWN_ISLANDS = 5
#: the largest context length: (A) alone takes about 4 s at 1M on one core, (A), (B) and the islands about 2.5 minutes
MAX_CONTEXT = 1 << 20
#: the largest rotary dim (the cost grows with d: about 35 s for d = 1024 at 64k)
MAX_ROTARY_DIM = 1024
#: the robust bound's islands grow fast with d (about 40 s of CPU at L = 4k for d = 128, minutes for d = 256):
#: by default it is computed only up to this d
ROBUST_AUTO_DIM = 128


def bound_command(
    context: str = typer.Option(..., help="Context length L: 4096, 128k, 1M (k = 1024; at most 1M)."),
    rotary_dim: int = typer.Option(128, "--rotary-dim", help="Rotary dimension d (even, at most 1024)."),
    head_dim: int | None = typer.Option(None, "--head-dim", hidden=True, help="Old name of --rotary-dim."),
    robust: bool | None = typer.Option(
        None,
        "--robust/--no-robust",
        metavar="",
        help=f"Also compute the robust bound (default: only when L <= {ROBUST_AUTO_LIMIT:,} and d <= {ROBUST_AUTO_DIM}, "
        "with the islands; "
        "above that, --robust computes it alone: about 15 s at 1M on 2 idle cores).",
    ),
    with_islands: bool = typer.Option(
        False,
        "--islands",
        metavar="",
        help="With --robust above the default cut-off: also walk the feasible islands between (A) and (B) "
        "(about 12 s at 128k and 2.5 minutes at 1M on 2 idle cores).",
    ),
    json_output: bool = json_option("Print JSON instead of a table."),
) -> None:
    """Smallest feasible base (A), robust base (B) and feasible islands for a context length (arXiv 2405.14591).

    A base b is feasible for L when B_m(b) = Σ_i cos(m·b^(−2i/d)) >= 0 for every integer m < L. Every m is checked.
    """
    from rich.console import Console
    from rich.table import Table

    from ropekit.theory.bound import base_bound, robust_base_only, smallest_feasible_base
    from ropekit.theory.published import PAPER_BOUND, PUBLISHED_HEAD_DIM, SU_BOUND, face_value_check

    length = parse_length(context, "--context", minimum=2, maximum=MAX_CONTEXT)
    head_dim, dim_option = resolve_alias(rotary_dim, head_dim, "--rotary-dim", "--head-dim", default=128)
    check_range(dim_option, head_dim, minimum=2, maximum=MAX_ROTARY_DIM)
    check_bound_work(length, head_dim, "--context", dim_option)
    if with_islands and robust is False:
        raise fail("--islands walks the islands below the robust bound (B); it cannot go with --no-robust")
    with_robust = (
        robust if robust is not None else with_islands or (length <= ROBUST_AUTO_LIMIT and head_dim <= ROBUST_AUTO_DIM)
    )
    start = time.perf_counter()
    with option_errors(head_dim=dim_option, rotary_dim=dim_option, context_length="--context", length="--context"):
        if with_robust and (length <= ROBUST_AUTO_LIMIT or with_islands):
            bound = base_bound(length, head_dim)
            smallest, robust_base, islands = bound.smallest_base, bound.robust_base, bound.islands
            certified = bound.certified
        elif with_robust:  # (B) alone: the islands between (A) and (B) cost minutes at this L
            smallest = smallest_feasible_base(length, head_dim)
            robust_base, islands, certified = robust_base_only(length, head_dim), None, True
        else:
            smallest = smallest_feasible_base(length, head_dim)
            robust_base = islands = certified = None
    seconds = time.perf_counter() - start
    published = None
    if head_dim == PUBLISHED_HEAD_DIM and length in PAPER_BOUND:
        published = {}
        for source, table in (("paper", PAPER_BOUND), ("su", SU_BOUND)):
            check = face_value_check(length, table[length])
            published[source] = {
                "base": check.base,
                "first_negative": check.first_negative,
                "satisfied": check.satisfied,
            }
    if json_output:
        print_json(
            {
                "context_length": length,
                "head_dim": head_dim,
                "rotary_dim": head_dim,
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
    table = Table(title=f"Base bound for L = {length:,}, d = {head_dim} (Men et al., arXiv 2405.14591)")
    table.add_column("")
    table.add_column("base", justify="right")
    table.add_column("note")
    table.add_row("(A) smallest feasible", f"{smallest:.6g}", "B_m >= 0 for every m < L; bases just above may fail")
    if robust_base is None:
        why = f"L > {ROBUST_AUTO_LIMIT:,}" if length > ROBUST_AUTO_LIMIT else f"d > {ROBUST_AUTO_DIM}"
        if robust is False:
            why = "--no-robust"
        table.add_row("(B) robust", "not computed", f"{why}; --robust computes it (about 13 s more at 1M)")
    else:
        table.add_row("(B) robust", f"{robust_base:.6g}", "every base above is feasible")
        if islands is None:
            table.add_row(
                "islands",
                "not computed",
                f"L > {ROBUST_AUTO_LIMIT:,}: (B) alone, by the downward sweep; --islands walks them (about 12 s "
                "at 128k and 2.5 minutes at 1M on 2 idle cores)",
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
    console = Console()
    console.print(table)
    if islands:
        shown = Table(title=f"first {min(SHOWN_ISLANDS, len(islands))} of {len(islands)} feasible islands")
        for column in ("low", "high", "width"):
            shown.add_column(column, justify="right")
        for low, high in islands[:SHOWN_ISLANDS]:
            shown.add_row(f"{low:.8g}", f"{high:.8g}", f"{(high - low) / low:.2%}")
        console.print(shown)
    console.print(f"computed in {seconds:.1f} s")
