"""Warnings during a command, each as one ``warning: ...`` line on stderr: ropekit's own (a config whose keys
disagree, and which one is used) and a library's alike, instead of Python's two-line ``path:line: UserWarning``
form with a line of source code. Scoped to the command's call: the filters and the printer are restored after it."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def warning_lines() -> Iterator[None]:
    """Within the block, every warning shown is printed once as ``warning: <message>`` (whitespace collapsed)."""
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = " ".join(str(message).split())
        if text and text not in shown:
            shown.add(text)
            print(f"warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
