"""``ropekit finetune --sequence-parallel N`` over CPU processes: what ``accelerate launch --config_file
configs/sequence_parallel.yaml`` starts on GPUs, run with gloo.

Usage: ``python tests/finetune/sharded_worker.py --processes 2 -- finetune ARGS...``; exits with ropekit's exit code.

Each worker sets the variables a launcher sets (rank, world size, rendezvous) and runs the unchanged command, whose
``Accelerator`` (:func:`ropekit.finetune.sharded.sequence_parallel_accelerator`) starts DeepSpeed on its CPU
accelerator over gloo. One thing differs from a launch on a fresh machine: DeepSpeed's CPU backend would first
compile its shared-memory all-reduce (a C++ extension, minutes on two cores); it is marked unavailable here, and
DeepSpeed then runs every collective on gloo, as its CPU accelerator does wherever the extension cannot build.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys


def _worker(rank: int, processes: int, port: int, args: list[str]) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(processes),
        LOCAL_WORLD_SIZE=str(processes),
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    import deepspeed.ops
    import torch

    torch.set_num_threads(1)
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # gloo for every collective (module docstring)
    from ropekit.cli.app import app

    try:
        app(args, prog_name="ropekit")
    finally:  # gloo's threads must not outlive the interpreter's exit
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- finetune ARGS...")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    import torch.multiprocessing as mp

    try:
        mp.spawn(_worker, args=(options.processes, _free_port(), args), nprocs=options.processes)
    except mp.ProcessExitedException as failed:
        return failed.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
