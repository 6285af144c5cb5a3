"""``ropekit eval ...`` and ``ropekit search`` data-parallel over CPU processes joined by gloo, as ``accelerate launch``
starts them.

Usage: ``python tests/eval/dp_worker.py --processes 2 [--fail-rank R] -- ARGS... [-- ARGS...]``: every process runs
each command (``-- ARGS``) in turn in one interpreter (torch and ropekit load once); exits with the first failing
command's code.

Each worker gets the variables ``accelerate launch --multi_gpu --num_processes N`` gives its workers (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ...) with ``ACCELERATE_USE_CPU=true``, as ``tests/finetune/fsdp_worker.py`` does; ropekit
joins them through accelerate's ``PartialState`` itself. ``--fail-rank R`` is the test's own failure: in process R
the first unit measured (a sample, a perplexity length, a passkey cell or a search candidate) raises
``RuntimeError("injected failure in rank R")``; ``--fail-method M`` makes that the first unit of method M (``search``:
a search candidate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for helpers (this file runs as a script)

from helpers.launched import as_launched, free_port, spawn


def _inject_failure(rank: int, method: str | None) -> None:
    """Make the first unit of ``method`` (any method when ``None``) measured in this process raise."""
    from ropekit.eval import methods, sweep_grid
    from ropekit.eval.tasks import grid
    from ropekit.search import run as search_run

    def failing(original, method_of):
        def run(*args, **kwargs):
            if method is None or method_of(*args) == method:
                raise RuntimeError(f"injected failure in rank {rank}")
            return original(*args, **kwargs)

        return run

    current = {"method": None}
    configure = methods.configure

    def remember(model, name, **kwargs):  # which method the model is set up for (both grids configure through it)
        current["method"] = name
        return configure(model, name, **kwargs)

    methods.configure = remember
    grid._answer_locally = failing(grid._answer_locally, lambda *a: current["method"])
    sweep_grid._measure = failing(sweep_grid._measure, lambda model, settings, tokens, unit: unit[0])
    search_run.objective = failing(search_run.objective, lambda *a: "search")


def _worker(rank: int, processes: int, port: int, fail_rank: int | None, fail_method: str | None, commands) -> None:
    as_launched(rank, processes, port, ACCELERATE_USE_CPU="true")
    if rank == fail_rank:
        _inject_failure(rank, fail_method)
    from ropekit.cli.app import app

    for args in commands:
        try:
            app(args, prog_name="ropekit")
        except SystemExit as done:  # typer ends every command with its exit code
            if done.code not in (0, None):
                raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--fail-method", default=None)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- ARGS... [-- ARGS...]")
    options = parser.parse_args(argv)
    commands: list[list[str]] = []
    for arg in options.args:
        if arg == "--":
            commands.append([])
        else:
            commands[-1].append(arg)
    spawn_args = (options.processes, free_port(), options.fail_rank, options.fail_method, commands)
    return spawn(_worker, spawn_args, options.processes)


if __name__ == "__main__":
    sys.exit(main())
