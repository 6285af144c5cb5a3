"""The ``ropekit`` command line: one Typer app, one file per command group, registered in ``app.py``."""
