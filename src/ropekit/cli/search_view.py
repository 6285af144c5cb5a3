"""The searched factors of a ``search.json`` beside the critical pair and NTK/YaRN, per pair: the table that
``ropekit inspect`` and ``ropekit plan`` print for a searched folder (:mod:`ropekit.search.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import fail


def searched_rows(model: Path | None) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The search and its per-pair rows when ``model`` is (or holds) a ``search.json``; else ``None``."""
    from ropekit.search.compare import factor_rows, find_search, read_search

    found = find_search(model)
    if found is None:
        return None
    try:
        data = read_search(found)
    except ValueError as error:
        raise fail(f"--model: {error}") from None
    return data, factor_rows(data)


def print_searched(data: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The table: pair, plain wavelength, searched factor, NTK's and YaRN's at the same s, the critical pairs."""
    critical = data["critical_pair"]
    typer.echo(
        f"\nsearched factors (ropekit search, s = {float(data['factor']):g}, L0 = {int(data['original_length']):,}): "
        f"critical pair found {critical['found']}, theory {critical['theory']}"
    )
    typer.echo(f"  {'pair':>4}  {'wavelength':>11}  {'searched':>9}  {'ntk':>9}  {'yarn':>9}")
    for row in rows:
        typer.echo(
            f"  {row['pair']:>4}  {row['wavelength']:>11,.1f}  {row['searched']:>9.4f}  {row['ntk']:>9.4f}  "
            f"{row['yarn']:>9.4f}  {row['mark']}"
        )


def searched_only(model: Path | None, json_output: bool) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The search of ``model`` (:func:`searched_rows`); when ``model`` holds a search but no transformers config (the
    tiny model's search folder, or the search.json itself), print it alone and raise ``typer.Exit`` (done)."""
    found = searched_rows(model)
    if found is None or (Path(str(model)) / "config.json").is_file():
        return found
    if json_output:
        from ropekit.cli.common import print_json

        print_json({"searched": found[1], "critical_pair": found[0]["critical_pair"]})
    else:
        print_searched(*found)
    raise typer.Exit(0)
