"""A search among the processes of ``accelerate launch``: what the main process alone decides, and what every process
shares.

Every process loads the model and builds the same samples; each generation's candidates are scored by the processes
in shares (:func:`ropekit.search.evolve.run_search` with
:meth:`~ropekit.eval.parallel.Launched.map`, which deals them and gathers the scores in candidate
order), so every process holds the same trace and makes the same next generation; the final scores (the formulas,
the final table's rows) are shared the same way. The main process alone checks and
writes the output folder and the journal, and times the plan; what it decides (the journal's scores, the plan, the
result) reaches the others through :func:`from_main`, and an error there reaches them too, so no process waits for
one that has stopped. Without a launcher this is the plain call (:data:`~ropekit.eval.parallel.ONE_PROCESS`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def from_main(processes: Any, make: Callable[[], T]) -> T:
    """``make()`` run on the main process; its result on every process.

    Raises:
        ProcessFailed: (:class:`~ropekit.eval.parallel.ProcessFailed`, on every process) ``make`` raised.
    """
    # one unit: the main process's share (the dealt order's first chunk), the others' empty
    return processes.map([1], lambda indices: [make() for _ in indices])[0]


def gathered(processes: Any, value: T) -> list[T]:
    """Every process's ``value``, in rank order, on every process (``[value]`` in one process)."""
    # one unit per process: with equal costs, the dealt order gives unit r to rank r
    return processes.map([1] * processes.processes, lambda indices: [value for _ in indices])


@contextlib.contextmanager
def own_errors(processes: Any) -> Iterator[None]:
    """A failure that started in the main process raised there as its own error (an error about an argument stays
    one, for the front end to name); everywhere else a failure stays a
    :class:`~ropekit.eval.parallel.ProcessFailed` naming the process it started in (the other processes' front ends
    end with it quietly: the main process reports)."""
    from ropekit.eval.parallel import ProcessFailed

    try:
        yield
    except ProcessFailed as failed:
        if processes.is_main and failed.rank == processes.rank and failed.__cause__ is not None:
            raise failed.__cause__ from None
        raise


#: transformers' device maps that spread one model over every device there is
SPREADING = ("auto", "balanced", "balanced_low_0", "sequential")


def refuse_device_map(processes: Any, device_map: str | None) -> None:
    """A device map that spreads one model over the devices (:data:`SPREADING`) is for one process: on several,
    each would load its own copy over the same devices. A single device (``cuda``: each process's own, as
    accelerate sets it) serves several.

    Raises:
        InvalidArgument: about ``device_map``, when a spreading one is given on several processes.
    """
    from ropekit.errors import InvalidArgument

    if device_map in SPREADING and processes.processes > 1:
        count = processes.processes
        raise InvalidArgument(
            "device_map",
            device_map,
            message=lambda n: (
                f"{n('device_map')} {device_map!r} spreads one model over the devices; on {count} processes each would "
                f"load its own copy onto the same devices: run one process with {n('device_map')} {device_map} (a "
                f"model larger than one device), or give {n('device_map')} cuda (each process on its own device)"
            ),
            leads=True,
        )
