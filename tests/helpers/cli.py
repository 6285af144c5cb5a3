"""Running the ``ropekit`` CLI in-process and checking its one-line errors: shared by the CLI test files."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ropekit.cli.app import app

runner = CliRunner()


def run(*args, **kwargs):
    """``ropekit ARGS`` in-process at 200 columns (each argument as text)."""
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"}, **kwargs)


def assert_error(result, *fragments: str) -> str:
    """Exit 2, no traceback, one ``error:`` line on stderr holding every fragment; returns that line."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr  # one line: a progress bar or a cost estimate may come before it
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def strict_json(text: str):
    """``text`` parsed as standard JSON (``NaN`` and ``Infinity`` are refused)."""

    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)
