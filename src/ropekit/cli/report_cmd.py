"""``ropekit report``: the main job — theory view, perplexity curves, passkey heatmaps and a summary."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail
from ropekit.cli.eval_cmd import (
    DEVICE_MAP,
    FACTOR,
    METHODS,
    MODEL,
    build_settings,
    load_model,
    print_tables,
    run_with_progress,
)


def report_command(
    model: str = MODEL,
    out: Path = typer.Option(Path("report"), help="Output folder (index.html, PNGs, JSON, CSV)."),
    methods: str = METHODS,
    multiples: str = typer.Option("1,2,4,8,16", help="Perplexity lengths as multiples of the training length."),
    passkey_multiples: str = typer.Option("1,2,4,8", help="Passkey lengths as multiples of the training length."),
    depths: str = typer.Option("0,0.25,0.5,0.75,1", help="Passkey needle depths."),
    trials: int = typer.Option(10, help="Passkey trials per cell."),
    factor: str = FACTOR,
    mode: str = typer.Option("nonoverlap", help="Perplexity mode: nonoverlap or sliding."),
    stride: int = typer.Option(256, help="Sliding-window stride."),
    max_tokens: int = typer.Option(16384, help="Tokens scored per (method, length)."),
    seed: int = typer.Option(0, help="Seed of the passkey episodes."),
    device_map: str | None = DEVICE_MAP,
) -> None:
    """Evaluate every method on a model and write a self-contained HTML report."""
    import time

    from rich.console import Console

    from ropekit.eval.report import write_report

    started = time.perf_counter()
    settings = build_settings(
        methods, multiples, passkey_multiples, depths, factor, mode, stride, max_tokens, trials, seed
    )
    if out.exists() and not out.is_dir():  # fail before the sweep, not after minutes of evaluation
        raise fail(f"--out {str(out)!r} exists and is not a folder")
    eval_model = load_model(model, device_map)
    result = run_with_progress(eval_model, settings, perplexity=True, passkey=True)
    try:
        index = write_report(eval_model, settings, result, out, time.perf_counter() - started)
    except OSError as error:  # e.g. --out names a file, or a folder we may not write to
        raise fail(f"cannot write the report to {str(out)!r}: {error}") from error
    print_tables(result)
    console = Console()
    for line in __import__("json").loads((out / "summary.json").read_text())["findings"]:
        console.print(f"• {line}")
    console.print(f"[bold]report[/]: {index} ({time.perf_counter() - started:.0f} s)")
