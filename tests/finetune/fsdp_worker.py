"""``ropekit finetune`` sharded with FSDP over CPU processes (gloo): what ``accelerate launch --config_file
configs/fsdp.yaml`` does on GPUs, run where accelerate 1.15 will not.

Usage: ``python tests/finetune/fsdp_worker.py --processes 2 --config configs/fsdp.yaml -- finetune ARGS...``; exits
with ropekit's exit code (130 when Ctrl-C, sent to the process group, stopped the run with a checkpoint).

accelerate 1.15 picks FSDP only when it sees GPUs (or other accelerators): on CPU its ``MULTI_CPU`` branch never looks
at the FSDP plugin, so the launch trains as plain data parallelism (``test_distributed.py`` pins that). torch itself
shards on CPU: FSDP2's ``fully_shard`` runs over a gloo process group. So each worker here

1. exports the FSDP settings of the accelerate config file as ``accelerate launch`` does (``FSDP_*`` variables),
2. initialises accelerate's state as it would on GPUs (``distributed_type`` FSDP, the plugin read from those
   variables), and
3. runs the unchanged ``ropekit finetune`` command, whose own ``Accelerator`` joins that state.

Everything FSDP-specific in ropekit's training path then runs for real: accelerate's FSDP2 ``prepare``
(``fully_shard`` per decoder layer), FSDP's sharded gradient clipping, sharded checkpoints (``.distcp`` files) and
the full state dict gathered for export. FSDP1 (``fsdp_version: 1``) does not get this far on CPU: accelerate hands
it ``device_id=cpu:0`` and torch refuses ("Inconsistent compute device and `device_id`").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for helpers (this file runs as a script)

from helpers.launched import as_launched, free_port, run_command, spawn

#: FSDP keys that need an accelerator device: FSDP1's ``sync_module_states`` broadcasts from a GPU (every worker
#: here builds the same weights from the same files, so there is nothing to broadcast)
_DEVICE_ONLY = ("fsdp_sync_module_states",)


def fsdp_environment(config: Path) -> dict[str, str]:
    """The variables ``accelerate launch --config_file CONFIG`` exports for the config's ``fsdp_config``."""
    from accelerate.commands.config.config_args import load_config_from_file

    settings = load_config_from_file(str(config))
    if settings.distributed_type.value != "FSDP":
        raise ValueError(f"config must be an FSDP accelerate config, got {settings.distributed_type.value}: {config}")
    env = {"ACCELERATE_USE_FSDP": "true"}
    for key, value in settings.fsdp_config.items():
        if key not in _DEVICE_ONLY:
            env["FSDP_" + key.removeprefix("fsdp_").upper()] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
    return env


def _as_on_gpus() -> str:
    """Initialise accelerate's shared state as an FSDP launch on GPUs would; returns the type accelerate chose."""
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin()  # from the FSDP_* variables
    state = Accelerator(cpu=True, mixed_precision="no", fsdp_plugin=plugin).state
    chosen = state.distributed_type.value
    # AcceleratorState() copies PartialState's type on every construction, so both must say FSDP
    PartialState().distributed_type = DistributedType.FSDP
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = plugin
    return chosen


def _worker(rank: int, processes: int, port: int, config: str, args: list[str]) -> None:
    environment = fsdp_environment(Path(config))
    as_launched(rank, processes, port, ACCELERATE_USE_CPU="true", TOKENIZERS_PARALLELISM="false", **environment)
    chosen = _as_on_gpus()
    if rank == 0:
        print(f"accelerate chose {chosen} for this FSDP config on CPU; running it as FSDP", flush=True)
    run_command(args)  # its exit code (130 after Ctrl-C) becomes the worker's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--config", required=True, help="an accelerate config with distributed_type: FSDP")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- finetune ARGS...")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    import signal

    # Ctrl-C is for the workers (ropekit stops them all after a step, with a checkpoint); the spawning parent would
    # kill them instead. SIG_IGN survives exec, and ropekit's training loop installs its own handler in each worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return spawn(_worker, (options.processes, free_port(), options.config, args), options.processes)


if __name__ == "__main__":
    sys.exit(main())
