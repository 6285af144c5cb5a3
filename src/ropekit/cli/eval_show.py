"""What the evaluation commands print without ``--json``: the sweep's tables, the task summary and the report's
summary (rich, on stdout)."""

from __future__ import annotations

from pathlib import Path

from ropekit.eval.tasks.limits import LEARNED, NOLIMA_SHARE


def print_tables(result) -> None:
    """Rich tables of perplexity (all scored tokens, and those beyond the training length) and passkey accuracy."""
    from rich.console import Console
    from rich.table import Table

    from ropekit.eval.report import perplexity_matrix

    console = Console()
    if result.perplexity:
        titles = {"perplexity": "perplexity by length (all scored tokens)"}
        if any(r.get("beyond") is not None for r in result.perplexity):
            titles["beyond"] = "perplexity of the tokens beyond the training length"
        for key, title in titles.items():
            cols, rows = perplexity_matrix(result.perplexity, key)
            table = Table(title=title)
            for c in cols:
                table.add_column(c, justify="right")
            for r in rows:
                table.add_row(
                    *[f"{r.get(c):.3g}" if isinstance(r.get(c), float) else str(r.get(c) or "—") for c in cols]
                )
            console.print(table)
    if result.passkey:
        acc = {}
        for r in result.passkey:
            acc.setdefault(r["method"], {}).setdefault(r["length"], []).append(r["accuracy"])
        lengths = sorted({r["length"] for r in result.passkey})
        table = Table(title="passkey accuracy (mean over depths)")
        table.add_column("method")
        for n in lengths:
            table.add_column(str(n), justify="right")
        for method, by_length in acc.items():
            table.add_row(
                method, *[f"{sum(by_length[n]) / len(by_length[n]):.0%}" if n in by_length else "" for n in lengths]
            )
        console.print(table)
    for row in result.skipped:
        console.print(f"skipped {row['method']}: {row['reason']}", highlight=False)


def print_task_summary(result) -> None:
    """Mean score per method × length (all tasks) and the effective lengths."""
    from rich.console import Console
    from rich.table import Table

    summary = result.summary()
    console = Console()
    lengths = sorted({m["length"] for m in summary["means"]})
    table = Table(title="mean score over tasks (%, string_match_all)")
    table.add_column("method")
    for n in lengths:
        table.add_column(str(n), justify="right")
    table.add_column("effective length", justify="right")
    table.add_column(f"relative to the shortest ({NOLIMA_SHARE:g}%)", justify="right")
    effective = {(e["method"], e["subset"]): e for e in summary["effective"]}
    methods = list(dict.fromkeys(m["method"] for m in summary["means"]))
    for method in methods:
        cells = {m["length"]: m for m in summary["means"] if m["method"] == method and m["subset"] == "all"}
        e = effective[method, "all"]
        table.add_row(
            method,
            *[f"{100 * cells[n]['score']:.1f}" if n in cells else "" for n in lengths],
            f"{e['effective_length'] or '—'} [{e['interval'][0] or '—'}, {e['interval'][1] or '—'}]",
            f"{e['short_relative_effective_length'] or '—'} [{e['short_relative_interval'][0] or '—'}, "
            f"{e['short_relative_interval'][1] or '—'}]",
        )
    console.print(table)
    print_long_answers(result.rows)
    print_twin_gaps(summary.get("twins", []))
    if "note" in summary:
        console.print(f"not judged: {summary['note']}", highlight=False)
    if summary["not_learned"]:
        console.print(
            f"below {LEARNED:.0%} at the training length (not learned by this model): {', '.join(summary['not_learned'])}",
            highlight=False,
        )
    for row in result.skipped:
        console.print(f"skipped {row['method']}: {row['reason']}", highlight=False)


def print_long_answers(rows: list[dict]) -> None:
    """Per task scored by its correct prefix (path traversal): the prefix score and the exact answers' share."""
    long = [r for r in rows if "exact" in r]
    if not long:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="long answers (%, 95% intervals): correct prefix and exact")
    for column in ("method", "task", "length", "correct prefix", "exact"):
        table.add_column(column, justify="left" if column in ("method", "task") else "right")
    for r in long:
        e = r["exact"]
        table.add_row(
            r["method"],
            r["task"],
            f"{r['length']:,}",
            f"{100 * r['score']:.0f} [{100 * r['ci95'][0]:.0f}, {100 * r['ci95'][1]:.0f}]",
            f"{100 * e['score']:.0f} [{100 * e['ci95'][0]:.0f}, {100 * e['ci95'][1]:.0f}]",
        )
    Console().print(table)


def print_twin_gaps(twins: list[dict]) -> None:
    """Per method × length: the tasks' own score beside their twins' (latent against literal), and the gap with its
    95% interval (Newcombe's, paired by sample)."""
    if not twins:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="twin questions on the same contexts (%, 95% intervals)")
    for column in ("method", "length", "tasks", "own (latent)", "twin", "twin − own"):
        table.add_column(column, justify="left" if column in ("method", "tasks", "twin") else "right")
    for row in twins:
        own, twin, gap = row["own"], row[row["twin"]], row["gap"]
        table.add_row(
            row["method"],
            f"{row['length']:,}",
            ", ".join(row["tasks"]),
            f"{100 * own['score']:.0f} [{100 * own['ci95'][0]:.0f}, {100 * own['ci95'][1]:.0f}]",
            f"{row['twin']} {100 * twin['score']:.0f} [{100 * twin['ci95'][0]:.0f}, {100 * twin['ci95'][1]:.0f}]",
            f"{100 * gap['difference']:+.0f} [{100 * gap['ci95'][0]:+.0f}, {100 * gap['ci95'][1]:+.0f}]",
        )
    Console().print(table)


def print_report_summary(summary: dict, index: Path, elapsed_s: float) -> None:
    """The report's summary table (method x measure), its verdict line and where the report is."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="summary")
    for column in summary["table"]["columns"]:
        table.add_column(column)
    for row in summary["table"]["rows"]:
        table.add_row(*(str(row.get(column, "")) for column in summary["table"]["columns"]))
    console.print(table)
    console.print(f"[bold]verdict[/]: {summary['verdict']}")
    console.print(f"[bold]report[/]: {index} ({elapsed_s:.0f} s)")


def print_task_cells(result) -> None:
    """Per method, a task x length table of mean scores with their 95% Wilson intervals and sample counts."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    lengths = sorted({r["length"] for r in result.rows})
    for method in dict.fromkeys(r["method"] for r in result.rows):
        cells = {(r["task"], r["length"]): r for r in result.rows if r["method"] == method}
        table = Table(title=f"{method}: score per task (%, 95% Wilson interval, samples)")
        table.add_column("task")
        for n in lengths:
            table.add_column(f"{n:,}", justify="right")
        for task in dict.fromkeys(task for task, _ in cells):
            row = [cells.get((task, n)) for n in lengths]
            table.add_row(
                task,
                *[_cell_text(c) for c in row],
            )
        console.print(table)


def _cell_text(c: dict | None) -> str:
    """One task cell: its score with its interval and sample count, the exact answers' share where scored by prefix."""
    if c is None:
        return ""
    text = f"{100 * c['score']:.0f} [{100 * c['ci95'][0]:.0f}, {100 * c['ci95'][1]:.0f}] ({c['samples']})"
    return text + (f" exact {100 * c['exact']['score']:.0f}" if "exact" in c else "")
