"""What ``accelerate launch`` (or ``torchrun``) does for its workers, done by the test workers that start ropekit on
several CPU processes joined by gloo (tests/eval/dp_worker.py, tests/finetune/fsdp_worker.py,
tests/finetune/sharded_worker.py): a free rendezvous port, the variables each worker gets, one thread a worker, the
spawn and the exit code of the first worker that fails. Standard library at import; torch inside the functions."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_launched(rank: int, processes: int, port: int, **extra: str) -> None:
    """Give this process the variables a launcher gives worker ``rank`` of ``processes`` (rank, world size,
    rendezvous), ``extra`` beside them, and one thread (``OMP_NUM_THREADS`` and torch's own)."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(processes),
        LOCAL_WORLD_SIZE=str(processes),
        OMP_NUM_THREADS="1",
        **extra,
    )
    import torch

    torch.set_num_threads(1)


def spawn(worker: Callable[..., None], args: tuple, processes: int) -> int:
    """Run ``worker(rank, *args)`` in ``processes`` processes; 0, or the exit code of the first that failed (e.g.
    ropekit's 130 after Ctrl-C)."""
    import torch.multiprocessing as mp

    try:
        mp.spawn(worker, args=args, nprocs=processes)
    except mp.ProcessExitedException as failed:
        return failed.exit_code
    return 0


def run_command(args: list[str]) -> None:
    """Run ``ropekit ARGS`` in this worker (its exit code becomes the worker's), then end the process group: gloo's
    threads must not outlive the interpreter's exit ("terminate called without an active exception")."""
    import torch

    from ropekit.cli.app import app

    try:
        app(args, prog_name="ropekit")
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
