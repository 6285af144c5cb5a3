"""``ropekit frequencies``: print the per-pair frequencies of a config with any scaling method."""

from __future__ import annotations

import typer

from ropekit.cli.common import build_scaling, fail, parse_length, print_json


def frequencies_command(
    head_dim: int = typer.Option(128, help="Attention head size."),
    base: float = typer.Option(10000.0, help="RoPE base b."),
    rotary_dim: int | None = typer.Option(None, help="Rotating dims (default: head_dim)."),
    scaling: str = typer.Option("none", help="Scaling method (rope_type name), e.g. yarn, linear, ntk."),
    factor: float | None = typer.Option(None, help="Scaling factor s."),
    original_length: str | None = typer.Option(None, help="Original (training) length L0, e.g. 4k."),
    seq_len: str | None = typer.Option(None, help="Current sequence length (dynamic, longrope)."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Per-pair inv_freq and wavelength, in float64, for a config and scaling method."""
    from rich.console import Console
    from rich.table import Table

    from ropekit.config import RopeConfig
    from ropekit.scaling import frequencies

    original = parse_length(original_length) if original_length else None
    try:
        rope = RopeConfig(head_dim, base=base, rotary_dim=rotary_dim, scaling=build_scaling(scaling, factor, original))
        freqs = frequencies(rope, seq_len=parse_length(seq_len) if seq_len else None)
    except (TypeError, ValueError) as error:
        raise fail(str(error)) from error
    if json_output:
        print_json(
            {
                "inv_freq": freqs.inv_freq,
                "wavelength": freqs.wavelengths,
                "attention_factor": freqs.attention_factor,
            }
        )
        return
    table = Table(title=f"{rope.rope_type}: attention_factor = {freqs.attention_factor:.6g}")
    for column in ("pair", "inv_freq", "wavelength"):
        table.add_column(column, justify="right")
    for i, (f, w) in enumerate(zip(freqs.inv_freq, freqs.wavelengths, strict=True)):
        table.add_row(str(i), f"{f:.6e}", f"{w:.6g}")
    Console().print(table)
