"""Several ``ropekit`` commands in one interpreter (torch, transformers and ropekit imported once), as a script:
``python run_commands.py COMMANDS``, or under a launcher (``accelerate launch ... run_commands.py COMMANDS``), where
every process runs each command in turn. ``COMMANDS`` is one argument, a JSON list of argument lists (a launcher
may take a ``--`` for itself). Exits with the first failing command's code."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit('usage: run_commands.py \'[["eval", "tasks", ...], ...]\'')
    from ropekit.cli.app import app

    for args in json.loads(argv[0]):
        try:
            app(args, prog_name="ropekit")
        except SystemExit as done:  # typer ends every command with its exit code
            if done.code not in (0, None):
                return int(done.code) if isinstance(done.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
