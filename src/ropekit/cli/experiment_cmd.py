"""``ropekit experiment base-bound``: the superficial-long-context experiment (Men et al., arXiv 2405.14591)."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import (
    fail,
    json_option,
    option_errors,
    parse_length,
    prepare_output_dir,
    print_json,
)

DEFAULT_OUT = Path("runs/base-bound")
#: ExperimentSettings fields set from options (an error about one names its option)
_FIELDS = ("context", "steps", "trials", "lr", "seed", "device", "models", "batch_size", "init")

app = typer.Typer(help="Experiments that test published claims at tiny scale.", no_args_is_help=True)


@app.command("base-bound")
def base_bound_command(
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="Output folder (models, results.json, index.html)."),
    quick: bool = typer.Option(False, "--quick", metavar="", help="Fewer steps and trials (< 10 min on 2 cores)."),
    context: str | None = typer.Option(None, help="Training context, e.g. 512 or 1k (default 512)."),
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
    force: bool = typer.Option(
        False,
        "--force",
        metavar="",
        help="Replace results.json, index.html and the figure in --out, and checkpoint files of no run to resume "
        "under models/; other files there are left alone (finished or interrupted runs under models/ are resumed).",
    ),
    json_output: bool = json_option("Print results.json's content as JSON (progress goes to stderr)."),
) -> None:
    """Train models that differ only in RoPE base (around the bound) plus NoPE; compare perplexity and retrieval."""
    import dataclasses

    from rich.console import Console
    from rich.table import Table

    from ropekit.experiments.base_bound import MODEL_KEYS, ExperimentSettings, run_experiment

    settings = ExperimentSettings.quick() if quick else ExperimentSettings()
    length = None if context is None else parse_length(context, "--context")
    changes = {
        k: v
        for k, v in {"context": length, "steps": steps, "trials": trials, "lr": lr, "batch_size": batch_size}.items()
        if v is not None
    }
    if models is not None:
        items = [k.strip() for k in models.split(",")]
        if not all(items):
            raise fail(f"--models has an empty item in {models!r}; models must be keys from {', '.join(MODEL_KEYS)}")
        changes["models"] = tuple(items)
    with option_errors(**{name: "--" + name.replace("_", "-") for name in _FIELDS}):
        settings = dataclasses.replace(settings, seed=seed, device=device, **changes)
        try:
            use_init = init.lower() != "none"
            settings = settings.with_shape_of(init) if use_init else dataclasses.replace(settings, init=None)
        except (OSError, KeyError) as error:
            raise fail(f"--init {init!r}: {error}") from error
    if settings.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise fail(f"--device {device!r}: CUDA is not available here (use --device cpu)")
    prepare_output_dir(out, "--out", default=DEFAULT_OUT)
    console = Console(stderr=json_output)
    names = {name: "--" + name.replace("_", "-") for name in (*_FIELDS, "out", "force")}
    with option_errors(**names):
        payload = run_experiment(
            settings, out, on_model=lambda label: console.print(f"[green]✓[/] {label}"), force=force
        )
    if json_output:
        print_json(payload)
        return
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
