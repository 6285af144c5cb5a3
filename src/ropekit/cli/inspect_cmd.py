"""``ropekit inspect``: wavelengths per pair, periods, critical dimension and per-method frequency ratios."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit._costs import MAX_FACTOR
from ropekit.cli.common import MAX_HEAD_DIM, check_range, fail, json_option, option_errors, parse_length, print_json
from ropekit.cli.layout_view import layout_table, model_layout_of
from ropekit.cli.model_option import MODEL, model_defaults, read_model
from ropekit.cli.params import build_scaling

#: scan B_m(base) up to this many distances for the "feasible up to" line.
BOUND_SCAN_LIMIT = 1 << 22


def inspect_command(
    head_dim: int | None = typer.Option(None, help="Attention head size (default: --model's, else 128)."),
    base: float | None = typer.Option(None, help="RoPE base b (default: --model's, else 10000)."),
    train_length: str | None = typer.Option(
        None, help="Training length T (also YaRN's / Llama 3's L0), e.g. 8k (default: --model's; needed without)."
    ),
    rotary_dim: int | None = typer.Option(None, help="Rotating dims (default: --model's, else head_dim)."),
    scaling: list[str] = typer.Option(
        [], help="Scaling method(s) to compare, repeatable (default with --factor: the methods of `ropekit plan`)."
    ),
    factor: float | None = typer.Option(None, help="Scaling factor s."),
    original_length: str | None = typer.Option(None, help="Original length L0 of the scaling (default: T)."),
    param: list[str] = typer.Option(
        [], "--param", help="Another field of the scaling method(s), repeatable: NAME=VALUE, e.g. base=50000."
    ),
    model: Path | None = MODEL,
    json_output: bool = json_option("Print JSON instead of tables."),
) -> None:
    """Wavelength of every pair, which complete a period within T, d_extra and T_extra, and scaled/plain ratios;
    with --model, first the model's RoPE layout in one table (rope type, base, rotary dim, pairing, per-layer-type
    RoPE, NoPE layers, M-RoPE sections, sliding windows, attention layouts, and what ropekit does with each)."""
    from ropekit.cli.search_view import print_searched, searched_only

    searched = searched_only(model, json_output)
    given = read_model(model)
    layout = model_layout_of(given)
    head_dim, base, rotary_dim, length = model_defaults(
        given, head_dim, base, rotary_dim, train_length, "--train-length"
    )
    check_range("--head-dim", head_dim, minimum=2, maximum=MAX_HEAD_DIM)
    check_range("--rotary-dim", rotary_dim, minimum=2, maximum=MAX_HEAD_DIM)
    check_range("--factor", factor, above=0.0, maximum=MAX_FACTOR)
    train = parse_length(length, "--train-length")
    original = parse_length(original_length, "--original-length") if original_length is not None else train
    if not scaling and factor is not None:
        from ropekit.scaling import ranked_scalings

        scaling = ranked_scalings("plan_order")  # the methods a plan compares
    names = list(scaling)
    if original_length is not None and not names:
        raise fail("--original-length applies to a scaling method; give --scaling or --factor (without, it is unused)")
    rope, plain, methods, supported = _reports(head_dim, base, rotary_dim, train, names, factor, original, param)
    if json_output:
        extra = {} if searched is None else {"searched": searched[1]}
        print_json({**_inspect_json(rope, train, plain, methods, supported, given, layout), **extra})
        return
    _print_tables(rope, train, plain, methods, supported, given, layout)
    if searched is not None:
        print_searched(*searched)


def _reports(head_dim, base, rotary_dim, train, names, factor, original, param):
    """The plain wavelength report, one per scaling method (by rope type) and the B_m(b) bound, with library
    errors named by their flags."""
    from ropekit.config import RopeConfig
    from ropekit.scaling import frequencies
    from ropekit.theory.bound import max_context_length
    from ropekit.theory.wavelengths import wavelength_report

    options = {
        "head_dim": "--head-dim",
        "rotary_dim": "--rotary-dim" if rotary_dim is not None else "--head-dim",
        "base": "--base",
        "factor": "--factor",
    }
    options |= {"train_length": "--train-length", "original_max_position_embeddings": "--original-length"}
    with option_errors(**options):
        rope = RopeConfig(head_dim, base=base, rotary_dim=rotary_dim)
        plain = wavelength_report(rope, train)
        methods = {}
        for name in names:
            spec = build_scaling(name, factor, original, base=base, params=param)
            scaled = rope.replace(scaling=spec)
            pairs = len(frequencies(scaled).inv_freq)
            if pairs != rope.dim // 2:  # e.g. proportional: frequencies over the whole head
                raise fail(
                    f"--scaling {name} gives {pairs} pairs (over --head-dim), which do not line up with --rotary-dim's "
                    f"{rope.dim // 2}; inspect it with --rotary-dim equal to --head-dim, or use frequencies"
                )
            methods[scaled.rope_type] = wavelength_report(scaled, train)
        supported = max_context_length(rope.base, rope.dim, limit=BOUND_SCAN_LIMIT)
    return rope, plain, methods, supported


def _inspect_json(rope, train, plain, methods, supported, given, layout) -> dict:
    """The ``--json`` object of ``ropekit inspect``."""
    periodic = plain.wavelengths <= train
    return {
        "head_dim": rope.head_dim,
        "rotary_dim": rope.dim,
        "base": rope.base,
        "train_length": train,
        "wavelengths": plain.wavelengths,
        "periodic": periodic,
        "periodic_dims": plain.periodic_dims,
        "critical_dimension": plain.critical_dimension,
        "extrapolation_limit": plain.extrapolation_limit,
        "max_context_length": supported,
        "max_context_length_scan_limit": BOUND_SCAN_LIMIT,
        "methods": {
            name: {
                "ratio": report.ratio,
                "wavelengths": report.scaled_wavelengths,
                "periodic_dims": report.scaled_periodic_dims,
                "attention_factor": report.attention_factor,
            }
            for name, report in methods.items()
        },
        **({"model": given.to_dict(), "layout": layout.data} if given else {}),
    }


def _print_tables(rope, train, plain, methods, supported, given, layout) -> None:
    """The layout (with --model), summary and per-pair tables of ``ropekit inspect``."""
    from rich.console import Console
    from rich.table import Table

    periodic = plain.wavelengths <= train
    console = Console()
    if given is not None:
        console.print(layout_table(layout, f"layout of {given.path}"))
    summary = Table(title=f"d = {rope.dim}, base {rope.base:g}, training length {train:,}", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("")
    summary.add_row("dims completing a period within T", f"{plain.periodic_dims} of {rope.dim}")
    summary.add_row("critical dimension d_extra (Liu et al.)", str(plain.critical_dimension))
    summary.add_row("extrapolation limit T_extra", f"{plain.extrapolation_limit:,.0f} tokens")
    summary.add_row(
        "B_m(b) >= 0 up to (Men et al.)",
        f"m = {supported:,}" if supported is not None else f"every m < {BOUND_SCAN_LIMIT:,} (scan limit)",
    )
    for name, report in methods.items():
        summary.add_row(
            f"{name}: periodic dims / attention factor",
            f"{report.scaled_periodic_dims} / {report.attention_factor:.4g}",
        )
    console.print(summary)
    table = Table(title="per pair (ratio = scaled inv_freq / plain inv_freq)")
    for column in ("pair", "wavelength", "period in T", *[f"{name} ratio" for name in methods]):
        table.add_column(column, justify="right")
    for i, wavelength in enumerate(plain.wavelengths):
        ratios = [f"{report.ratio[i]:.4g}" for report in methods.values()]
        table.add_row(str(i), f"{wavelength:,.1f}", "yes" if periodic[i] else "no", *ratios)
    console.print(table)
