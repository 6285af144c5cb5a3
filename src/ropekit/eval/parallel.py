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

How a launch is recognised and joined:

- **A launch, not a leftover.** ``WORLD_SIZE`` > 1 counts as a launch only with the variables torchrun (which
  ``accelerate launch`` runs) sets in every process it starts: :data:`LAUNCH_VARIABLES`. A ``WORLD_SIZE`` left
  exported in a shell, without them, is refused in one line (:class:`LaunchError`) rather than waiting for peers
  that were never started.
- **Rendezvous.** The processes join within :data:`RENDEZVOUS_TIMEOUT` (torchrun starts them together, so they meet
  in seconds), else every one that is waiting stops with :class:`LaunchError`. The gathers then run in a process
  group of their own with :data:`GATHER_TIMEOUT`.
"""

from __future__ import annotations

import atexit
import os
import pickle
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ropekit.errors import InvalidArgument

#: how long a process waits in the gather for the others: a process that finishes early (or fails) waits there for
#: the slowest share, which on a long evaluation is hours; a dead process breaks its connections at once instead
GATHER_TIMEOUT = timedelta(days=7)
#: how long the processes of a launch wait for each other to join (``MASTER_ADDR:MASTER_PORT``): torchrun starts them
#: together, after its own rendezvous of the nodes, so they meet within the time an import and a connection take
RENDEZVOUS_TIMEOUT = timedelta(minutes=5)
#: what torchrun sets in every process it starts, beside ``WORLD_SIZE``
LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(InvalidArgument):
    """``WORLD_SIZE`` names several processes but no launcher started them, or they did not join in time."""

    def __init__(self, value: str, message: str) -> None:
        super().__init__("WORLD_SIZE", value, message=message)


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

    def __init__(self, state: Any, group: Any = None) -> None:
        self.state = state
        #: the process group of the gathers (``None``: the default group)
        self.group = group
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
        import torch

        mine = self.share(costs)
        failure: BaseException | None = None
        try:
            part: tuple[Any, ...] = ("done", list(zip(mine, run(mine), strict=True)))
        except Exception as error:  # whatever failed is reported by every process, after the gather
            part = ("failed", self.rank, _portable(error))
            failure = error
        parts: list[Any] = [None] * self.processes
        torch.distributed.all_gather_object(parts, part, group=self.group)
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
            import torch

            self.failed = False
            torch.distributed.barrier(group=self.group)

    def close(self) -> None:
        """End the process group (gloo's threads must not outlive the interpreter)."""
        self.state.destroy_process_group()


def launched_processes() -> int:
    """How many processes the launcher started (``WORLD_SIZE``; 1 when it is not set), read without accelerate.

    Raises:
        LaunchError: ``WORLD_SIZE`` is not a positive whole number, or is above 1 without the rest of a launch
            (:data:`LAUNCH_VARIABLES`, ``RANK`` below ``WORLD_SIZE``).
    """
    raw = os.environ.get("WORLD_SIZE", "").strip()
    if not raw:
        return 1
    try:
        processes = int(raw)
    except ValueError:
        processes = 0
    if processes < 1:
        raise LaunchError(raw, f"WORLD_SIZE must be a positive whole number of processes, got {raw!r}")
    if processes == 1:
        return 1
    missing = [name for name in LAUNCH_VARIABLES if not os.environ.get(name, "").strip()]
    if missing:
        raise LaunchError(
            raw,
            f"WORLD_SIZE={raw} but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, so no "
            "launcher started this process: unset WORLD_SIZE to run in one process, or start the command with "
            "accelerate launch (or torchrun), which sets them all",
        )
    rank = os.environ["RANK"].strip()
    if not (rank.isdigit() and int(rank) < processes):
        raise LaunchError(raw, f"RANK must be a whole number below WORLD_SIZE={raw}, got {rank!r}")
    return processes


def _join(use_cpu: bool) -> Any:
    """accelerate's state for this launch, its processes joined within :data:`RENDEZVOUS_TIMEOUT`.

    Raises:
        LaunchError: the other processes did not join in time (or the address cannot be reached).
    """
    from accelerate import PartialState

    try:
        return PartialState(cpu=use_cpu, timeout=RENDEZVOUS_TIMEOUT)
    except (RuntimeError, ValueError) as error:  # torch's DistError (a RuntimeError): timed out, refused, unreachable
        raise join_error(error, RENDEZVOUS_TIMEOUT) from None


def join_error(error: BaseException, within: timedelta | None = None) -> LaunchError:
    """The one-line refusal of a launch whose processes did not join at ``MASTER_ADDR:MASTER_PORT`` (``error``:
    torch's; ``within``: the rendezvous timeout where ropekit set one)."""
    where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    limit = f" within {int(within.total_seconds())} s" if within is not None else ""
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return LaunchError(
        os.environ.get("WORLD_SIZE", ""),
        f"the {os.environ.get('WORLD_SIZE', '').strip()} processes of WORLD_SIZE did not join at {where}{limit} "
        f"({detail}); start them together with accelerate launch (or torchrun)",
    )


_launched: Launched | None = None


def launched() -> Launched | OneProcess:
    """:class:`Launched` when a launcher started several processes (accelerate's state joined on the first call, on
    CPUs over gloo, and its process group ended when the interpreter exits), else :data:`ONE_PROCESS` (accelerate not
    imported).

    Raises:
        LaunchError: a ``WORLD_SIZE`` without a launcher (:func:`launched_processes`), or processes that did not
            join within :data:`RENDEZVOUS_TIMEOUT`.
    """
    global _launched
    if launched_processes() == 1:
        return ONE_PROCESS
    if _launched is None:
        import torch

        use_cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
        state = _join(use_cpu or not torch.cuda.is_available())
        # the same processes and backend, with the timeout a gather needs (the slowest share, hours)
        group = torch.distributed.new_group(timeout=GATHER_TIMEOUT)
        _launched = Launched(state, group)
        atexit.register(_launched.close)
    return _launched
