"""``ropekit plot``: theory figures (decay, bound, wavelengths, scaling) as PNG or SVG."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit._costs import MAX_CONTEXT, MAX_FACTOR, MAX_ROTARY_DIM, ROBUST_AUTO_LIMIT, ROBUST_DEFAULT, robust_by_default
from ropekit.cli.common import (
    check_bound_work,
    check_output_file,
    check_range,
    fail,
    json_option,
    option_errors,
    parse_length,
    print_json,
    writing,
)

KINDS = ("decay", "bound", "wavelengths", "scaling", "searched")
SUFFIXES = (".png", ".svg")
#: the bound figure starts at this context length (figures.bound_figure's min_context)
BOUND_MIN_CONTEXT = 1024


def plot_command(
    kind: str = typer.Argument(..., help=f"Which figure: {', '.join(KINDS)}."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file; .png or .svg picks the format."),
    rotary_dim: int = typer.Option(128, "--rotary-dim", help=f"Rotary dimension d (even, at most {MAX_ROTARY_DIM})."),
    base: float = typer.Option(10000.0, help="RoPE base b (decay, wavelengths, scaling)."),
    original_length: str = typer.Option("4k", help="Original (training) length L0 (wavelengths, scaling)."),
    factor: float = typer.Option(4.0, help="Scaling factor s (wavelengths, scaling)."),
    max_distance: str = typer.Option("64k", help="Largest distance m (decay; at most 1M)."),
    max_context: str = typer.Option("64k", help="Largest context length computed (bound; 1k to 1M)."),
    robust_up_to: str = typer.Option(
        "4k",
        help=f"Compute the robust bound up to this length (bound; only where {ROBUST_DEFAULT}).",
    ),
    search: Path | None = typer.Option(
        None, "--search", help="searched: the search.json of `ropekit search` (or its --out folder)."
    ),
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite the file if it exists."),
    json_output: bool = json_option("Print the written file as JSON."),
) -> None:
    """Write a figure: B_m and RoFormer's decay bound, the base bound against L, wavelengths, scaling ratios, or the
    factors a search found per pair beside NTK, YaRN and the critical pairs (searched, with --search)."""
    if kind not in KINDS:
        raise fail(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if out is None:
        raise fail("--out (-o) is required: the file to write, ending in .png or .svg")
    path = out
    if kind == "searched":
        _searched(search, path, force=force, json_output=json_output)
        return
    dim = rotary_dim
    check_range("--rotary-dim", dim, minimum=2, maximum=MAX_ROTARY_DIM)
    check_range("--base", base, above=1.0)
    check_range("--factor", factor, minimum=1.0, maximum=MAX_FACTOR)
    lengths = {}
    if kind == "decay":
        lengths["max_distance"] = parse_length(max_distance, "--max-distance", maximum=MAX_CONTEXT)
    elif kind == "bound":
        lengths["max_context"] = parse_length(
            max_context, "--max-context", minimum=BOUND_MIN_CONTEXT, maximum=MAX_CONTEXT
        )
        lengths["robust_up_to"] = parse_length(robust_up_to, "--robust-up-to", maximum=ROBUST_AUTO_LIMIT)
        check_bound_work(lengths["max_context"], dim, "--max-context", "--rotary-dim")
        if not robust_by_default(lengths["robust_up_to"], dim):  # the islands take minutes to hours there
            lengths["robust_up_to"] = 0
    else:
        lengths["original_length"] = parse_length(original_length, "--original-length")
    check_output_file(path, "--out", suffixes=SUFFIXES, force=force)
    from ropekit.theory import figures

    names = {"head_dim": "--rotary-dim", "rotary_dim": "--rotary-dim", "base": "--base", "factor": "--factor"}
    names |= {name: "--" + name.replace("_", "-") for name in lengths}
    names |= {"original_max_position_embeddings": "--original-length", "train_length": "--original-length"}
    with option_errors(**names), writing(path, force=force, file=True) as staged:
        if kind == "decay":
            figures.decay_figure(staged, dim, base, lengths["max_distance"])
        elif kind == "bound":
            figures.bound_figure(staged, dim, lengths["max_context"], lengths["robust_up_to"])
        elif kind == "wavelengths":
            figures.wavelengths_figure(staged, dim, base, lengths["original_length"], factor)
        else:
            figures.scaling_figure(staged, dim, base, lengths["original_length"], factor)
    if json_output:
        print_json({"kind": kind, "path": str(path), "bytes": path.stat().st_size})
        return
    typer.echo(f"wrote {path}")


def _searched(search: Path | None, path: Path, *, force: bool, json_output: bool) -> None:
    """``plot searched``: the factors of ``--search`` per pair (:func:`ropekit.search.compare.factors_figure`)."""
    from ropekit.search.compare import factors_figure, find_search, read_search

    found = find_search(search)
    if found is None:
        raise fail(f"--search must name a search.json or the --out folder of `ropekit search`, got {search}")
    try:
        data = read_search(found)
    except ValueError as error:
        raise fail(f"--search: {error}") from None
    check_output_file(path, "--out", suffixes=SUFFIXES, force=force)
    with writing(path, force=force, file=True) as staged:
        factors_figure(data, staged)
    if json_output:
        print_json({"kind": "searched", "path": str(path), "bytes": path.stat().st_size})
        return
    typer.echo(f"wrote {path}")
