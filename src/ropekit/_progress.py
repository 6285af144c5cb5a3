"""The one progress bar of ropekit: training (tiny model, fine-tuning) and evaluation (sweeps, tasks) all show it.

On stderr, so that a command's ``--json`` on stdout stays valid JSON. Columns: the title, the bar, the amount done
(``completed/total`` for steps, a percentage for work counted in tokens), the current description, the elapsed time
and the estimated time left.
"""

from __future__ import annotations

from typing import Any


def progress_bar(title: str, *, steps: bool = False, enabled: bool = True, transient: bool = False) -> Any:
    """A ``rich.progress.Progress`` with ropekit's columns, on stderr (use it as a context manager, or
    ``start``/``stop``).

    Args:
        title: the bold label at the left (``"train"``, ``"eval"``).
        steps: show ``completed/total`` (optimizer steps); otherwise a percentage (forward tokens).
        enabled: ``False`` gives a bar that draws nothing (quiet runs, non-main processes).
        transient: remove the bar when it stops.

    Returns:
        The ``Progress``; ``bar.add_task(description, total=..., completed=...)`` and
        ``bar.update(task, advance=..., description=...)`` drive it.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    amount = "{task.completed}/{task.total}" if steps else "{task.percentage:>3.0f}%"
    columns = [
        TextColumn(f"[bold]{title}"),
        BarColumn(),
        TextColumn(amount + " {task.description}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    return Progress(*columns, disable=not enabled, transient=transient, console=Console(stderr=True))
