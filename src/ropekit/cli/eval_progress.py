"""The evaluation commands' progress display and failure messages (``ropekit.eval.run`` reports, the CLI shows)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ropekit.cli.common import error_message, fail

#: the arguments the evaluation's messages name (an out-of-memory hint), as options
EVAL_HINTS = {"device_map": "--device-map", "model": "--model"}


@contextlib.contextmanager
def rich_progress(
    name: str, total: int, notes: list[str]
) -> Iterator[tuple[Callable[[str], None], Callable[[int], None]]]:
    """The :data:`ropekit.eval.run.Progress` of every evaluation command: ``notes`` (the cost), then ropekit's
    progress bar titled ``name`` in forward tokens, all on stderr so that ``--json`` on stdout stays valid JSON."""
    from rich.console import Console

    from ropekit._progress import progress_bar

    console = Console(stderr=True)
    for line in notes:
        console.print(line, highlight=False)
    with progress_bar(name) as bar:
        task = bar.add_task("", total=total)
        yield (lambda label: bar.update(task, description=label)), (lambda tokens: bar.update(task, advance=tokens))


def sweep_failed(failure, out: Path | None, force: bool):
    """The one-line error for a sweep's :class:`ropekit.eval.run.EvaluationFailed`, after writing the methods
    measured before it to ``out`` (when given; existing files replaced only with ``force``)."""
    kept = ""
    if failure.partial is not None and out is not None:
        kept = _keep_partial(failure.partial, out, force)
    return fail(f"evaluation failed at --methods {failure.method}: {error_message(failure.error, EVAL_HINTS)}{kept}")


def tasks_failed(error: Exception):
    """The one-line error for a task run that failed."""
    return fail(f"evaluation failed: {error_message(error, EVAL_HINTS)}")


def _keep_partial(result, out: Path, force: bool) -> str:
    """Write the methods measured before a failure to ``out`` (the staged writer); what to add to the error."""
    from ropekit._output import staged_output

    try:
        with staged_output(out, force=force) as staged:
            result.write(staged)
    except OSError as error:
        return f"; the methods measured before it were not kept ({error})"
    return f"; the methods measured before it are in {str(out / 'results.json')!r}"
