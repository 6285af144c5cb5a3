"""``ropekit plot``: theory figures (decay, bound, wavelengths, scaling) as PNG or SVG."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail, parse_length, print_json

KINDS = ("decay", "bound", "wavelengths", "scaling")
SUFFIXES = (".png", ".svg")


def plot_command(
    kind: str = typer.Argument(..., help=f"Which figure: {', '.join(KINDS)}."),
    output: Path = typer.Option(..., "-o", "--output", help="Output file; .png or .svg picks the format."),
    head_dim: int = typer.Option(128, help="Rotary dimension d."),
    base: float = typer.Option(10000.0, help="RoPE base b (decay, wavelengths, scaling)."),
    train_length: str = typer.Option("4k", help="Training length T = L0 (wavelengths, scaling)."),
    factor: float = typer.Option(4.0, help="Scaling factor s (wavelengths, scaling)."),
    max_distance: str = typer.Option("64k", help="Largest distance m (decay)."),
    max_context: str = typer.Option("64k", help="Largest context length computed (bound; 64k takes ~30 s)."),
    robust_up_to: str = typer.Option("4k", help="Compute the robust bound up to this length (bound)."),
    json_output: bool = typer.Option(False, "--json", help="Print the written file as JSON."),
) -> None:
    """Write a figure: B_m and RoFormer's decay bound, the base bound against L, wavelengths, or scaling ratios."""
    if kind not in KINDS:
        raise fail(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if output.suffix.lower() not in SUFFIXES:
        raise fail(f"--output must end in {' or '.join(SUFFIXES)}, got {output.name!r}")
    from ropekit import plots

    try:
        if kind == "decay":
            plots.decay_figure(output, head_dim, base, parse_length(max_distance))
        elif kind == "bound":
            plots.bound_figure(output, head_dim, parse_length(max_context), parse_length(robust_up_to))
        elif kind == "wavelengths":
            plots.wavelengths_figure(output, head_dim, base, parse_length(train_length), factor)
        else:
            plots.scaling_figure(output, head_dim, base, parse_length(train_length), factor)
    except (TypeError, ValueError) as error:
        raise fail(str(error)) from error
    if json_output:
        print_json({"kind": kind, "path": str(output), "bytes": output.stat().st_size})
        return
    typer.echo(f"wrote {output}")
