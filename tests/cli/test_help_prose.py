"""Every command's ``--help`` reads as prose wrapped at the terminal's width (80 and 120 columns), never broken where
the docstring's source lines end.

Oracle: a line of a paragraph may end only where the next word would not fit on it (the terminal's width less
rich's one-column margins); a break anywhere else is a docstring line break that reached the terminal. Option help
texts hold no line breaks at all (the options table wraps them).
"""

from __future__ import annotations

import itertools

import pytest
import typer
from typer.testing import CliRunner

from ropekit.cli.app import app, prose

runner = CliRunner()


def _commands() -> list[tuple[tuple[str, ...], object]]:
    found = []

    def walk(command, path: tuple[str, ...]) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def _description(text: str) -> list[list[str]]:
    """The paragraphs (lists of lines) between the usage line and the first box of options."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    paragraphs, current = [], []
    for line in lines[start:]:
        if line.strip().startswith(("╭", "│", "╰")):
            break
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(current)
            current = []
    return [*paragraphs, current] if current else paragraphs


def _broken_lines(paragraphs: list[list[str]], width: int) -> list[str]:
    """Lines that end although the next line's first word would have fit on them."""
    broken = []
    for paragraph in paragraphs:
        for line, following in itertools.pairwise(paragraph):
            if len(line) + 1 + len(following.split()[0]) <= width:
                broken.append(f"{line!r} / {following!r}")
    return broken


@pytest.mark.parametrize("columns", [80, 120])
def test_every_help_is_wrapped_prose(columns):
    checked = 0
    for path, _ in _commands():
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
        assert result.exit_code == 0, (path, result.output)
        assert max(len(line) for line in result.output.splitlines()) <= columns, path
        paragraphs = _description(result.output)
        assert paragraphs, (path, result.output)
        assert _broken_lines(paragraphs, columns - 2) == [], path  # rich keeps one column free on each side
        checked += 1
    assert checked >= 14  # the root, two groups and every command


def test_option_help_has_no_line_breaks():
    for path, command in _commands():
        for param in getattr(command, "params", ()):
            assert "\n" not in (getattr(param, "help", None) or ""), (path, param.opts)


def test_prose_joins_lines_and_keeps_paragraphs_and_items():
    doc = """First line
    goes on.

    Second paragraph
    over two lines:
    - an item
      continued
    - another
    """
    assert prose(doc) == "First line goes on.\n\nSecond paragraph over two lines:\n- an item continued\n- another"


def test_the_check_sees_a_broken_line():
    """The oracle itself: the break this test exists for ("give, without ropekit, / the / logits") is caught."""
    paragraph = [["OUT) give, without ropekit,", "the", "logits of ropekit's patched model"]]
    assert len(_broken_lines(paragraph, 78)) == 2
    assert _broken_lines([["a" * 70, "b" * 10]], 78) == []
