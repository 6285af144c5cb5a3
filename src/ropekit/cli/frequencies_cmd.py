"""``ropekit frequencies``: print the per-pair frequencies of a config with any scaling method."""

from __future__ import annotations

import typer

from ropekit._costs import MAX_FACTOR
from ropekit.cli.common import MAX_HEAD_DIM, check_range, fail, json_option, option_errors, parse_length, print_json
from ropekit.cli.params import build_scaling

#: library argument -> the option that sets it (errors name the option)
OPTIONS = {
    "head_dim": "--head-dim",
    "rotary_dim": "--rotary-dim",
    "base": "--base",
    "factor": "--factor",
    "original_max_position_embeddings": "--original-length",
    "seq_len": "--seq-len",
}


def frequencies_command(
    head_dim: int = typer.Option(128, help="Attention head size."),
    base: float = typer.Option(10000.0, help="RoPE base b."),
    rotary_dim: int | None = typer.Option(None, help="Rotating dims (default: head_dim)."),
    scaling: str = typer.Option("none", help="Scaling method (rope_type name), e.g. yarn, linear, ntk."),
    factor: float | None = typer.Option(None, help="Scaling factor s."),
    original_length: str | None = typer.Option(None, help="Original (training) length L0, e.g. 4k."),
    seq_len: str | None = typer.Option(None, help="Current sequence length (dynamic, longrope)."),
    param: list[str] = typer.Option(
        [], "--param", help="Another field of the scaling method, repeatable: NAME=VALUE, e.g. short_factor=1,1.5."
    ),
    json_output: bool = json_option(
        "Print JSON instead of a table (infinite wavelengths, of pairs that do not rotate, as null)."
    ),
) -> None:
    """Per-pair inv_freq and wavelength, in float64, for a config and scaling method."""
    from rich.console import Console
    from rich.table import Table

    from ropekit.config import RopeConfig
    from ropekit.scaling import frequencies

    check_range("--head-dim", head_dim, minimum=2, maximum=MAX_HEAD_DIM)
    check_range("--rotary-dim", rotary_dim, minimum=2, maximum=MAX_HEAD_DIM)
    check_range("--factor", factor, above=0.0, maximum=MAX_FACTOR)
    original = parse_length(original_length, "--original-length") if original_length is not None else None
    current = parse_length(seq_len, "--seq-len") if seq_len is not None else None
    if scaling in ("none", "default"):
        given = [
            name for name, value in (("--factor", factor), ("--original-length", original_length)) if value is not None
        ]
        if given:
            raise fail(f"{' and '.join(given)} need(s) --scaling (e.g. --scaling linear); plain RoPE has no factor")
    rotary_option = "--rotary-dim" if rotary_dim is not None else "--head-dim"  # rotary_dim defaults to head_dim
    with option_errors(**(OPTIONS | {"rotary_dim": rotary_option})):
        rope = RopeConfig(
            head_dim,
            base=base,
            rotary_dim=rotary_dim,
            scaling=build_scaling(scaling, factor, original, base=base, params=param),
        )
        freqs = frequencies(rope, seq_len=current)
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
