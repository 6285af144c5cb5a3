"""The final table of ``ropekit search`` (:mod:`ropekit.search.table`) as text: per row the held-out needle loss,
accuracy and 1x perplexity change with their 95% intervals, the paired difference against the search, and the
verdict."""

from __future__ import annotations

from typing import Any

import typer


def _interval(values: list[float], form: str) -> str:
    return f"[{values[0]:{form}}, {values[1]:{form}}]"


def print_table(table: dict[str, Any]) -> None:
    """The table, best held-out row first, then the verdict lines."""
    typer.echo(
        f"  held-out kinds ({table['samples']} samples: {', '.join(table['kinds'])}); 1x on {table['windows']} "
        f"windows of L0, where the attention factor alone costs {table['short_floor']:+.2%} (the search allows "
        f"{table['short_tolerance']:.1%} in all)"
    )
    typer.echo(
        f"    {'method':<22}{'loss':>9} {'95%':<20}{'accuracy':>9} {'95%':<15}{'1x ppl':>8}  "
        f"{'minus searched [95%]':<28}"
    )
    for name, row in table["rows"].items():
        paired = row["minus_searched"]
        typer.echo(
            f"    {name:<22}{row['loss']:>9.4g} {_interval(row['loss_ci95'], '.4g'):<20}{row['accuracy']:>9.0%} "
            f"{_interval(row['accuracy_ci95'], '.0%'):<15}{row['short_change']:>+8.1%}  "
            f"{paired['difference']:+.4g} {_interval(paired['ci95'], '+.3g')}"
        )
    for line in table["verdict"]:
        typer.echo(f"  {line}")
