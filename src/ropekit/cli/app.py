"""The central command table of the ``ropekit`` CLI.

Each command lives in its own module as a typed, documented function; this file only registers them,
importing each module lazily so ``ropekit --help`` stays fast (no torch import for theory commands).
"""

from __future__ import annotations

import importlib

import typer

from ropekit.cli.common import version_callback

app = typer.Typer(
    name="ropekit",
    help="Rotary position embeddings and context-window extension: apply, extend, reason, measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: command name -> (module under ropekit.cli, function name). The one table of commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "frequencies": ("frequencies_cmd", "frequencies_command"),
    "train": ("train_cmd", "train_command"),
    "report": ("report_cmd", "report_command"),
    "bound": ("bound_cmd", "bound_command"),
    "inspect": ("inspect_cmd", "inspect_command"),
    "plan": ("plan_cmd", "plan_command"),
    "extend": ("extend_cmd", "extend_command"),
    "engines": ("engines_cmd", "engines_command"),
    "finetune": ("finetune_cmd", "finetune_command"),
    "plot": ("plot_cmd", "plot_command"),
}
#: command groups (sub-apps): name -> (module, Typer object name)
GROUPS: dict[str, tuple[str, str]] = {
    "eval": ("eval_cmd", "app"),
    "experiment": ("experiment_cmd", "app"),
}


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print ropekit's version and exit."
    ),
) -> None:
    """Rotary position embeddings and context-window extension: apply, extend, reason, measure."""


def _register() -> None:
    for name, (module, function) in COMMANDS.items():
        command = getattr(importlib.import_module(f"ropekit.cli.{module}"), function)
        app.command(name)(command)
    importlib.import_module("ropekit.cli.tasks_cmd")  # adds 'tasks' to the eval group
    for name, (module, attribute) in GROUPS.items():
        app.add_typer(getattr(importlib.import_module(f"ropekit.cli.{module}"), attribute), name=name)


_register()


def main() -> None:
    """Console-script entry point."""
    app()
