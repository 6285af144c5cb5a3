"""The central command table of the ``ropekit`` CLI.

Each command lives in its own module as a typed, documented function; this file only registers them,
importing each module lazily so ``ropekit --help`` stays fast (no torch import for theory commands).
"""

from __future__ import annotations

import importlib
import inspect
import re

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
    "search": ("search_cmd", "search_command"),
}
#: command groups (sub-apps): name -> (module, Typer object name)
GROUPS: dict[str, tuple[str, str]] = {
    "eval": ("eval_cmd", "app"),
    "experiment": ("experiment_cmd", "app"),
}


@app.callback()
def _root(
    context: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print ropekit's version and exit."
    ),
) -> None:
    """Rotary position embeddings and context-window extension: apply, extend, reason, measure."""
    from ropekit.cli.warning_lines import warning_lines

    context.with_resource(warning_lines())  # for the command's call only


#: a line of a docstring that starts a list item (kept on its own line in the help)
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def prose(doc: str | None) -> str | None:
    """A command's docstring as help text: each paragraph one line, which the terminal wraps at its width (the
    docstring's own line breaks would otherwise reach the terminal and cut sentences mid-line); list items keep
    their own lines."""
    if doc is None:
        return None
    paragraphs = []
    for paragraph in inspect.cleandoc(doc).split("\n\n"):
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not _ITEM.match(line):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _register() -> None:
    for name, (module, function) in COMMANDS.items():
        command = getattr(importlib.import_module(f"ropekit.cli.{module}"), function)
        app.command(name, help=prose(command.__doc__))(command)
    for name, (module, attribute) in GROUPS.items():
        group = getattr(importlib.import_module(f"ropekit.cli.{module}"), attribute)
        for info in group.registered_commands:
            info.help = prose(info.help if info.help is not None else info.callback.__doc__)
        app.add_typer(group, name=name)


_register()


def main() -> None:
    """Console-script entry point."""
    app()
