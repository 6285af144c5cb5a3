"""Data-parallel evaluation: the units of an evaluation (samples, windows, passkey cells) split over the processes
of ``accelerate launch``, and gathered back in the order one process runs them.

:data:`ONE_PROCESS` is the default of every evaluation: its :meth:`~OneProcess.map` is the plain loop, and nothing
here imports accelerate. :func:`launched` gives :class:`Launched` instead when a launcher started several processes
(``WORLD_SIZE`` > 1): accelerate's ``PartialState`` joins them (gloo on CPUs, NCCL on GPUs).

How :class:`Launched` splits and gathers (every process runs the same code on the same units):

- **Split.** Units are dealt by cost, largest first, round-robin (``split_between_processes`` of that dealt order:
  its contiguous chunks are exactly the round-robin hands), so the shares hold equal counts and near-equal forward
  tokens. The split depends only on the units' costs and the number of processes. Each process runs its share in
  the units' own order, so that one model setup serves every unit of a (method, length).
- **Gather.** ``gather_object`` brings every share to every process; the results are put back by unit index, in
  exactly the order one process would have made them, so the output is byte-identical.
- **Failure.** A process catches the error of its share and takes it into the gather, instead of leaving the others
  waiting there for it; every process then raises :class:`ProcessFailed` with the error of the lowest failing rank.
  A process that fails does not stop the others: the run ends when they have finished their shares. A process that
  dies outright (killed, out of host memory) is the launcher's to end: torchrun stops the others.
"""

from __future__ import annotations

import atexit
import os
import pickle
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

#: how long a process waits in the gather for the others: a process that finishes early (or fails) waits there for
#: the slowest share, which on a long evaluation is hours; a dead process breaks its connections at once instead
GATHER_TIMEOUT = timedelta(days=7)

#: ``run(indices) -> results``: the results of the units at ``indices`` (ascending), one per index
Runner = Callable[[list[int]], list[Any]]


class ProcessFailed(RuntimeError):
    """A unit failed in process ``rank``; raised on every process. ``error`` is that process's own error (a
    ``RuntimeError`` with its message where it could not be pickled)."""

    def __init__(self, rank: int, processes: int, error: BaseException) -> None:
        super().__init__(f"rank {rank} of {processes}: {error}")
        self.rank, self.processes, self.error = rank, processes, error


class OneProcess:
    """Everything in this process (no launcher, or a launcher of one)."""

    processes = 1
    rank = 0
    is_main = True

    def share(self, costs: Sequence[int]) -> list[int]:
        """The indices of the units this process runs: all of them."""
        return list(range(len(costs)))

    def map(self, costs: Sequence[int], run: Runner) -> list[Any]:
        """``run`` over every unit, in order."""
        return run(self.share(costs))


#: the default of every evaluation
ONE_PROCESS = OneProcess()


def dealt(costs: Sequence[int], processes: int) -> list[int]:
    """Unit indices largest cost first (ties in unit order), dealt round-robin: hand ``r`` is ``order[r::processes]``,
    and the hands follow each other, so that contiguous chunks of equal count (what ``split_between_processes``
    makes) are the hands."""
    order = sorted(range(len(costs)), key=lambda i: -costs[i])
    return [i for rank in range(processes) for i in order[rank::processes]]


def _portable(error: BaseException) -> BaseException:
    """``error`` if it pickles (to travel through the gather), else a ``RuntimeError`` with its message."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any error that does not pickle travels as its message
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


class Launched:
    """The processes of a launch, joined by accelerate's ``PartialState``."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.processes = state.num_processes
        self.rank = state.process_index
        self.is_main = state.is_main_process
        #: a gather has shown a failure (every process knows it at the same time)
        self.failed = False

    def share(self, costs: Sequence[int]) -> list[int]:
        """The indices of the units this process runs, ascending."""
        with self.state.split_between_processes(dealt(costs, self.processes)) as mine:
            return sorted(mine)

    def map(self, costs: Sequence[int], run: Runner) -> list[Any]:
        """``run`` over this process's share, every share gathered: the results of all units in unit order, on every
        process.

        Raises:
            ProcessFailed: ``run`` raised in some process (the lowest failing rank's error).
        """
        from accelerate.utils import gather_object

        mine = self.share(costs)
        failure: BaseException | None = None
        try:
            part: tuple[Any, ...] = ("done", list(zip(mine, run(mine), strict=True)))
        except Exception as error:  # whatever failed is reported by every process, after the gather
            part = ("failed", self.rank, _portable(error))
            failure = error
        parts = gather_object([part])
        failed = [p for p in parts if p[0] == "failed"]
        if failed:
            self.failed = True
            _, rank, error = min(failed, key=lambda p: p[1])
            raise ProcessFailed(rank, self.processes, error) from (failure if rank == self.rank else error)
        results: list[Any] = [None] * len(costs)
        for _, pairs in parts:
            for index, result in pairs:
                results[index] = result
        return results

    def settle(self) -> None:
        """After a failure that every process saw: wait until every process gets here, so that none exits (and has
        the launcher stop the others) before the main process has reported the failure."""
        if self.failed:
            self.failed = False
            self.state.wait_for_everyone()

    def close(self) -> None:
        """End the process group (gloo's threads must not outlive the interpreter)."""
        self.state.destroy_process_group()


def launched_processes() -> int:
    """How many processes the launcher started (``WORLD_SIZE``; 1 without a launcher), read without accelerate."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


_launched: Launched | None = None


def launched() -> Launched | OneProcess:
    """:class:`Launched` when a launcher started several processes (accelerate's state joined on the first call, on
    CPUs over gloo, and its process group ended when the interpreter exits), else :data:`ONE_PROCESS` (accelerate not
    imported)."""
    global _launched
    if launched_processes() == 1:
        return ONE_PROCESS
    if _launched is None:
        import torch
        from accelerate import PartialState

        use_cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
        state = PartialState(cpu=use_cpu or not torch.cuda.is_available(), timeout=GATHER_TIMEOUT)
        _launched = Launched(state)
        atexit.register(_launched.close)
    return _launched
