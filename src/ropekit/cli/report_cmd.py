"""``ropekit report``: the main job — theory view, perplexity curves, passkey heatmaps and a summary."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail, json_option, prepare_output_dir, print_json, refuse_overwrite, resolve_alias
from ropekit.cli.eval_cmd import (
    DEVICE_MAP,
    DTYPE,
    FACTOR,
    METHODS,
    MODEL,
    RESULT_FILES,
    TEXT,
    build_settings,
    check_runnable,
    load_model,
    print_tables,
    read_sweep_text,
    run_with_progress,
)
from ropekit.cli.method_options import PARAM

DEFAULT_OUT = Path("report")
#: files a report writes (refused without --force when --out already holds one)
REPORT_FILES = ("index.html", "summary.json", *RESULT_FILES)


def report_command(
    model: str = MODEL,
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="Output folder (index.html, PNGs, JSON, CSV)."),
    methods: str = METHODS,
    perplexity_multiples: str = typer.Option(
        "1,2,4,8,16", "--perplexity-multiples", help="Perplexity lengths as multiples of the training length."
    ),
    multiples: str | None = typer.Option(None, "--multiples", hidden=True, help="Old name of --perplexity-multiples."),
    passkey_multiples: str = typer.Option("1,2,4,8", help="Passkey lengths as multiples of the training length."),
    depths: str = typer.Option("0,0.25,0.5,0.75,1", help="Passkey needle depths."),
    trials: int = typer.Option(10, help="Passkey trials per cell."),
    factor: str = FACTOR,
    mode: str = typer.Option("nonoverlap", help="Perplexity mode: nonoverlap or sliding."),
    stride: int | None = typer.Option(None, help="Sliding-window stride (--mode sliding only) [default: 256]."),
    max_tokens: int = typer.Option(16384, help="Tokens scored per (method, length)."),
    seed: int = typer.Option(0, help="Seed of the passkey episodes."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite a report already in --out."),
    json_output: bool = json_option("Print the summary (findings, paths) as JSON instead of tables."),
) -> None:
    """Evaluate every method on a model and write a self-contained HTML report."""
    import json
    import time

    from rich.console import Console

    from ropekit.eval.report import write_report

    started = time.perf_counter()
    lengths, lengths_option = resolve_alias(
        perplexity_multiples, multiples, "--perplexity-multiples", "--multiples", default="1,2,4,8,16"
    )
    names = {"multiples": lengths_option}
    settings = build_settings(
        methods=methods,
        multiples=lengths,
        passkey_multiples=passkey_multiples,
        depths=depths,
        factor=factor,
        mode=mode,
        stride=stride,
        max_tokens=max_tokens,
        trials=trials,
        seed=seed,
        names=names,
        params=param,
    )
    refuse_overwrite(out, REPORT_FILES, "--out", force=force)  # fail before the sweep, not after minutes of it
    prepare_output_dir(out, "--out", default=DEFAULT_OUT, create=False)
    sweep_text = read_sweep_text(text, settings, perplexity=True, passkey=True)
    eval_model = load_model(model, device_map, dtype=dtype, before_weights=sweep_text.check)
    tokens = sweep_text.tokenized(eval_model)
    check_runnable(
        eval_model,
        settings,
        perplexity=True,
        passkey=True,
        names={**names, "passkey_multiples": "--passkey-multiples"},
        text=tokens,
    )
    prepare_output_dir(out, "--out", default=DEFAULT_OUT)
    result = run_with_progress(eval_model, settings, perplexity=True, passkey=True, out=out, text=tokens)
    try:
        index = write_report(eval_model, settings, result, out, time.perf_counter() - started)
    except OSError as error:  # e.g. a folder we may not write to
        raise fail(f"--out {str(out)!r}: cannot write the report: {error}") from error
    summary = json.loads((out / "summary.json").read_text())
    if json_output:
        print_json({"index": str(index), "out": str(out), **summary})
        return
    print_tables(result)
    console = Console()
    for line in summary["findings"]:
        console.print(f"• {line}")
    console.print(f"[bold]report[/]: {index} ({time.perf_counter() - started:.0f} s)")
