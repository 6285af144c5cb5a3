"""``ropekit experiment base-bound``: the superficial-long-context experiment (Men et al., arXiv 2405.14591)."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail

app = typer.Typer(help="Experiments that test published claims at tiny scale.", no_args_is_help=True)


@app.command("base-bound")
def base_bound_command(
    out: Path = typer.Option(Path("runs/base-bound"), help="Output folder (models, results.json, index.html)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer steps and trials (< 10 min on 2 cores)."),
    context: int | None = typer.Option(None, help="Training context (default 512)."),
    steps: int | None = typer.Option(None, help="Training steps per model."),
    trials: int | None = typer.Option(None, help="Retrieval episodes per model."),
    lr: float | None = typer.Option(None, help="Peak learning rate (default 1e-3)."),
    seed: int = typer.Option(0, help="Seed shared by every model (weights and data order)."),
    device: str = typer.Option("cpu", help="Where the models train: cpu or cuda (evaluation runs on the CPU)."),
    init: str = typer.Option(
        "tiny",
        help="Start every model from this checkpoint ('tiny' = bundled) and continue training with its own base, "
        "as Men et al. fine-tune with a changed base; the architecture follows the checkpoint. 'none' trains "
        "from random weights.",
    ),
    models: str | None = typer.Option(
        None, help="Comma-separated subset: 10, 100, quarter, half, init, smallest, robust, robust10, nope."
    ),
    batch_size: int | None = typer.Option(None, help="Sequences per step (default 16)."),
) -> None:
    """Train models that differ only in RoPE base (around the bound) plus NoPE; compare perplexity and retrieval."""
    import dataclasses

    from rich.console import Console
    from rich.table import Table

    from ropekit.eval.base_bound_experiment import ExperimentSettings, run_experiment

    settings = ExperimentSettings.quick() if quick else ExperimentSettings()
    changes = {
        k: v
        for k, v in {"context": context, "steps": steps, "trials": trials, "lr": lr, "batch_size": batch_size}.items()
        if v is not None
    }
    if models is not None:
        changes["models"] = tuple(k.strip() for k in models.split(",") if k.strip())
    try:
        settings = dataclasses.replace(settings, seed=seed, device=device, **changes)
        settings = dataclasses.replace(settings, init=None) if init.lower() == "none" else settings.with_shape_of(init)
    except (FileNotFoundError, TypeError, ValueError) as error:
        raise fail(str(error)) from error
    console = Console()
    payload = run_experiment(settings, out, on_model=lambda label: console.print(f"[green]✓[/] {label}"))
    table = Table(title=f"base-bound experiment (context {settings.context})")
    for column in ("model", "base", "perplexity [95% CI]", "retrieval [95% CI]"):
        table.add_column(column, justify="right")
    for r in payload["models"]:
        h, a = r["heldout"], r["retrieval_overall"]
        table.add_row(
            r["label"],
            "—" if r["base"] is None else f"{r['base']:.4g}",
            f"{h['perplexity']:.3f} [{h['low']:.3f}, {h['high']:.3f}]",
            f"{a['accuracy']:.1%} [{a['low']:.1%}, {a['high']:.1%}]",
        )
    console.print(table)
    for line in payload["conclusion"]:
        console.print(f"• {line}")
    console.print(f"[bold]report[/]: {out / 'index.html'}")
