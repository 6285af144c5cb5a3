"""``ropekit eval {perplexity,passkey,sweep}``: measurements on the bundled model or any local model."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail, print_json

app = typer.Typer(help="Perplexity against length and passkey retrieval, per scaling method.", no_args_is_help=True)

MODEL = typer.Option("tiny", help="'tiny' (bundled), a tiny checkpoint directory, or a transformers model directory.")
METHODS = typer.Option("none,linear,ntk,dynamic,yarn,llama3,longrope", help="Comma-separated methods.")
FACTOR = typer.Option("auto", help="'auto' (s = length / training length) or a number.")
DEVICE_MAP = typer.Option(None, help="transformers device_map, e.g. 'auto' (needs accelerate) for big models.")


def parse_factor(text: str) -> float | str:
    """'auto' or a number >= 1."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise fail(f"--factor must be 'auto' or a number >= 1, got {text!r}") from None
    if value < 1:
        raise fail(f"--factor must be >= 1, got {value}")
    return value


def parse_list(text: str, kind=float, name: str = "value") -> tuple:
    """'1,2,4' → (1.0, 2.0, 4.0) with a clear error."""
    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise fail(f"--{name} must be a comma-separated list of numbers, got {text!r}") from None


def build_settings(
    methods: str,
    multiples: str,
    passkey_multiples: str,
    depths: str,
    factor: str,
    mode: str,
    stride: int,
    max_tokens: int,
    trials: int,
    seed: int,
):
    """SweepSettings from CLI strings, with method names checked against the registry."""
    from ropekit.eval.perplexity import MODES
    from ropekit.eval.sweep import SweepSettings
    from ropekit.scaling import get_scaling

    names = tuple(m.strip() for m in methods.split(",") if m.strip())
    for name in names:
        if name not in ("none", "native"):
            try:
                get_scaling(name)
            except ValueError as error:
                raise fail(f"--methods: {error}") from error
    if mode not in MODES:
        raise fail(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    try:
        return SweepSettings(
            methods=names,
            multiples=parse_list(multiples, name="multiples"),
            passkey_multiples=parse_list(passkey_multiples, name="passkey-multiples"),
            depths=parse_list(depths, name="depths"),
            factor=parse_factor(factor),
            mode=mode,
            stride=stride,
            max_tokens=max_tokens,
            trials=trials,
            seed=seed,
        )
    except (TypeError, ValueError) as error:
        raise fail(str(error)) from error


def load_model(model: str, device_map: str | None):
    """The evaluation model, with clear errors for missing paths and unsupported architectures."""
    from ropekit.eval.models import load_eval_model

    try:
        return load_eval_model(model, device_map=device_map) if device_map else load_eval_model(model)
    except (OSError, ValueError, TypeError) as error:  # OSError: transformers' "no weights in this directory"
        raise fail(str(error)) from error


def run_with_progress(model, settings, *, perplexity: bool, passkey: bool):
    """run_sweep under a rich progress bar (on stderr, so ``--json`` output on stdout stays valid JSON)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ropekit.eval.sweep import count_steps, run_sweep

    columns = [
        TextColumn("[bold]eval"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} {task.description}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, transient=False, console=Console(stderr=True)) as bar:
        total = count_steps(settings, model.train_length, perplexity=perplexity, passkey=passkey)
        task = bar.add_task("", total=total)
        try:
            return run_sweep(
                model,
                settings,
                perplexity=perplexity,
                passkey=passkey,
                on_step=lambda label: bar.update(task, advance=1, description=label),
            )
        except (ValueError, MemoryError, RuntimeError) as error:
            raise fail(f"evaluation failed: {error}") from error


def print_tables(result) -> None:
    """Rich tables of perplexity and passkey accuracy, methods × lengths."""
    from rich.console import Console
    from rich.table import Table

    from ropekit.eval.report import perplexity_matrix

    console = Console()
    if result.perplexity:
        cols, rows = perplexity_matrix(result.perplexity)
        table = Table(title="perplexity by length")
        for c in cols:
            table.add_column(c, justify="right")
        for r in rows:
            table.add_row(*[f"{r.get(c):.3g}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols])
        console.print(table)
    if result.passkey:
        acc = {}
        for r in result.passkey:
            acc.setdefault(r["method"], {}).setdefault(r["length"], []).append(r["accuracy"])
        lengths = sorted({r["length"] for r in result.passkey})
        table = Table(title="passkey accuracy (mean over depths)")
        table.add_column("method")
        for n in lengths:
            table.add_column(str(n), justify="right")
        for method, by_length in acc.items():
            table.add_row(
                method, *[f"{sum(by_length[n]) / len(by_length[n]):.0%}" if n in by_length else "" for n in lengths]
            )
        console.print(table)


def _evaluate(
    model,
    methods,
    multiples,
    passkey_multiples,
    depths,
    factor,
    mode,
    stride,
    max_tokens,
    trials,
    seed,
    out,
    json_output,
    device_map,
    *,
    perplexity: bool,
    passkey: bool,
) -> None:
    settings = build_settings(
        methods, multiples, passkey_multiples, depths, factor, mode, stride, max_tokens, trials, seed
    )
    eval_model = load_model(model, device_map)
    result = run_with_progress(eval_model, settings, perplexity=perplexity, passkey=passkey)
    if out is not None:
        result.write(out)
    if json_output:
        print_json(result.to_dict())
    else:
        print_tables(result)


@app.command("perplexity")
def perplexity_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option("1,2,4,8,16", help="Lengths as multiples of the training length."),
    factor: str = FACTOR,
    mode: str = typer.Option("nonoverlap", help="nonoverlap (PI paper) or sliding (YaRN paper)."),
    stride: int = typer.Option(256, help="Sliding-window stride."),
    max_tokens: int = typer.Option(16384, help="Tokens scored per length."),
    out: Path | None = typer.Option(None, help="Write results.json and perplexity.csv here."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON."),
    device_map: str | None = DEVICE_MAP,
) -> None:
    """Perplexity against length per method, split inside/beyond the training length."""
    _evaluate(
        model,
        methods,
        multiples,
        "1",
        "0.5",
        factor,
        mode,
        stride,
        max_tokens,
        1,
        0,
        out,
        json_output,
        device_map,
        perplexity=True,
        passkey=False,
    )


@app.command("passkey")
def passkey_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option("1,2,4,8", help="Lengths as multiples of the training length."),
    depths: str = typer.Option("0,0.25,0.5,0.75,1", help="Needle depths (0 = start)."),
    trials: int = typer.Option(10, help="Trials per (length, depth) cell."),
    seed: int = typer.Option(0, help="Seed of the episodes."),
    factor: str = FACTOR,
    out: Path | None = typer.Option(None, help="Write results.json and passkey.csv here."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON."),
    device_map: str | None = DEVICE_MAP,
) -> None:
    """Passkey retrieval accuracy over lengths × needle depths per method."""
    _evaluate(
        model,
        methods,
        "1",
        multiples,
        depths,
        factor,
        "nonoverlap",
        256,
        1,
        trials,
        seed,
        out,
        json_output,
        device_map,
        perplexity=False,
        passkey=True,
    )
