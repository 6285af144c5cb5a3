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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for helpers (this file runs as a script)

from helpers.launched import as_launched, free_port, run_command, spawn


def _worker(rank: int, processes: int, port: int, args: list[str]) -> None:
    as_launched(rank, processes, port, TOKENIZERS_PARALLELISM="false")
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # gloo for every collective (module docstring)
    run_command(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- finetune ARGS...")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    return spawn(_worker, (options.processes, free_port(), args), options.processes)


if __name__ == "__main__":
    sys.exit(main())
