"""``eval perplexity|passkey|tasks`` and ``search`` under ``accelerate launch`` with several processes: one output, one
voice.

:func:`launch_aware` wraps each command. Without a launcher (or with one process) it changes nothing and accelerate
is not imported. With several, every process checks the options, loads the model and measures its share of the
units (:mod:`ropekit.eval.parallel`); the main process alone prepares ``--out``, shows the progress, writes the
results (through :mod:`ropekit._output`, once) and prints them or the error. The other processes print nothing (their
``stdout`` and ``stderr`` go nowhere), and exit with the main process's code: an error in any process's share ends
every process with that error, which the main process prints.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

from ropekit.cli.common import fail


@contextlib.contextmanager
def _launched() -> Iterator[None]:
    """accelerate's processes joined for the command (when launched on several), the others silenced; after a
    failure every process saw, each waits for the others before exiting, so that the main process has printed it."""
    from ropekit.eval.parallel import LaunchError, launched, launched_processes

    try:
        processes = None if launched_processes() == 1 else launched()
    except LaunchError as error:  # a WORLD_SIZE left in the shell, or processes that did not join
        raise fail(str(error)) from None
    if processes is None:
        yield
        return
    try:
        if processes.is_main:
            yield
        else:
            with (
                open(os.devnull, "w") as sink,
                contextlib.redirect_stdout(sink),
                contextlib.redirect_stderr(sink),
            ):
                yield
    finally:
        processes.settle()


def launch_aware(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` run among the processes of a launch (see the module docstring); its options unchanged."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _launched():
            return command(*args, **kwargs)

    return run


def processes_for(engine: str) -> Any:
    """The processes this command runs on (:func:`ropekit.eval.parallel.launched`); a server engine refuses
    several (the server already answers concurrently, and its journal in ``--out`` has one writer)."""
    from ropekit.eval.parallel import launched

    processes = launched()
    if processes.processes > 1 and engine == "openai":
        raise fail(
            f"--engine openai runs in one process (the server answers --concurrency requests at once); run it "
            f"without accelerate launch, not on {processes.processes} processes"
        )
    return processes
