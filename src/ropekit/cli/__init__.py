"""The ``ropekit`` command line: one Typer app, one file per command group, registered in ``app.py``.

:mod:`~ropekit.cli.app` holds the command table; each ``*_cmd`` module parses its options, calls the library and
prints (a table, or JSON with ``--json``); :mod:`~ropekit.cli.common` has the shared parsing and the one-line errors
(exit code 2, naming the option). Importing the CLI pulls in neither torch nor numpy: ``ropekit --help`` stays fast.
"""

__all__ = ["app", "common"]
