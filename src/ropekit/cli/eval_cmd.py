"""``ropekit eval {perplexity,passkey,tasks}``: measurements on the bundled model or any local model.

Every option is checked before the model loads; the lengths, the methods that can run on the model and the output
folder are checked once it has loaded and before the sweep. A sweep that fails part-way keeps what it measured:
the methods finished before the failure are written to ``--out``. The measuring itself is
:func:`ropekit.eval.run.run_methods`; the shared options are in :mod:`ropekit.cli.eval_options`, and ``tasks`` in
:mod:`ropekit.cli.tasks_cmd`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit import _defaults as defaults
from ropekit.cli.common import json_option, prepare_output_dir, refuse_overwrite, write_and_print
from ropekit.cli.engine_options import CONCURRENCY, ENGINE, SERVED_MODEL, TIMEOUT, URL, EngineChoice
from ropekit.cli.eval_options import (
    DEVICE_MAP,
    DTYPE,
    FACTOR,
    FORCE,
    MODEL,
    MULTIPLES_HELP,
    STRIDE_HELP,
    TEXT,
    build_settings,
)
from ropekit.cli.eval_processes import launch_aware, processes_for
from ropekit.cli.eval_setup import named, open_eval_model, read_sweep_text
from ropekit.cli.lmeval_cmd import effective_length_command
from ropekit.cli.method_options import ATTENTION_PARAM, METHODS, PARAM
from ropekit.cli.tasks_cmd import tasks_command

app = typer.Typer(help="Perplexity against length and passkey retrieval, per scaling method.", no_args_is_help=True)


def _evaluate(
    *,
    model: str,
    settings,
    out: Path | None,
    force: bool,
    json_output: bool,
    device_map: str | None,
    perplexity: bool,
    passkey: bool,
    names: dict[str, str],
    dtype: str = "auto",
    text: Path | None = None,
    engine: EngineChoice | None = None,
) -> None:
    from ropekit.cli.eval_progress import rich_progress, sweep_failed
    from ropekit.cli.eval_show import print_tables
    from ropekit.eval.run import EvaluationFailed, run_methods

    if engine is not None:
        engine.check(device_map=device_map, dtype=dtype)
    processes = processes_for(engine.name if engine is not None else "torch")
    if out is not None:  # before loading: a bad folder fails in a second, not after the sweep
        written = ("results.json", *(("perplexity.csv",) if perplexity else ()), *(("passkey.csv",) if passkey else ()))
        refuse_overwrite(out, written, "--out", force=force)
        prepare_output_dir(out, "--out", create=False)
    sweep_text = read_sweep_text(text, settings, perplexity=perplexity, passkey=passkey)
    eval_model = open_eval_model(model, device_map, dtype=dtype, before_weights=sweep_text.check, engine=engine)
    tokens = sweep_text.tokenized(eval_model)
    progress = rich_progress if processes.is_main else None
    try:
        with named({**names, "methods": "--methods"}):  # checked before the first forward pass
            result = run_methods(
                eval_model,
                settings,
                perplexity=perplexity,
                passkey=passkey,
                text=tokens,
                progress=progress,
                processes=processes,
            )
    except EvaluationFailed as failure:
        raise sweep_failed(failure, out if processes.is_main else None, force) from failure.error
    if out is not None and processes.is_main:
        prepare_output_dir(out, "--out")
    if processes.is_main:
        write_and_print(result, out, json_output, print_tables, force=force)


@app.command("perplexity")
@launch_aware
def perplexity_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option(defaults.as_text(defaults.PERPLEXITY_MULTIPLES), help=MULTIPLES_HELP),
    factor: str = FACTOR,
    mode: str = typer.Option(defaults.PERPLEXITY_MODE, help="nonoverlap (PI paper) or sliding (YaRN paper)."),
    stride: int | None = typer.Option(None, help=STRIDE_HELP),
    max_tokens: int = typer.Option(defaults.PERPLEXITY_MAX_TOKENS, help="Tokens scored per length."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write results.json and perplexity.csv here."),
    force: bool = FORCE,
    json_output: bool = json_option("Print JSON (rows carry inside/beyond-training-length perplexity)."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    attention_param: str | None = ATTENTION_PARAM,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
    served_model: str | None = SERVED_MODEL,
    timeout: float = TIMEOUT,
) -> None:
    """Perplexity against length per method: over all scored tokens and over those beyond the training length."""
    settings = build_settings(
        methods=methods,
        multiples=multiples,
        factor=factor,
        mode=mode,
        stride=stride,
        max_tokens=max_tokens,
        params=param,
        attention=attention_param,
    )
    _evaluate(
        model=model,
        settings=settings,
        out=out,
        force=force,
        json_output=json_output,
        device_map=device_map,
        perplexity=True,
        passkey=False,
        dtype=dtype,
        text=text,
        engine=EngineChoice(name=engine, url=url, concurrency=concurrency, served_model=served_model, timeout=timeout),
        names={"multiples": "--multiples"},
    )


@app.command("passkey")
@launch_aware
def passkey_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option(defaults.as_text(defaults.PASSKEY_MULTIPLES), help=MULTIPLES_HELP),
    depths: str = typer.Option(defaults.as_text(defaults.PASSKEY_DEPTHS), help="Needle depths (0 = start)."),
    trials: int = typer.Option(defaults.PASSKEY_TRIALS, help="Trials per (length, depth) cell."),
    seed: int = typer.Option(0, help="Seed of the episodes."),
    factor: str = FACTOR,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write results.json and passkey.csv here."),
    force: bool = FORCE,
    json_output: bool = json_option("Print JSON."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    attention_param: str | None = ATTENTION_PARAM,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
    served_model: str | None = SERVED_MODEL,
    timeout: float = TIMEOUT,
) -> None:
    """Passkey retrieval accuracy over lengths × needle depths per method."""
    settings = build_settings(
        params=param,
        attention=attention_param,
        methods=methods,
        passkey_multiples=multiples,
        depths=depths,
        factor=factor,
        trials=trials,
        seed=seed,
        names={"passkey_multiples": "--multiples"},
    )
    _evaluate(
        model=model,
        settings=settings,
        out=out,
        force=force,
        json_output=json_output,
        device_map=device_map,
        perplexity=False,
        passkey=True,
        dtype=dtype,
        text=text,
        engine=EngineChoice(name=engine, url=url, concurrency=concurrency, served_model=served_model, timeout=timeout),
        names={"passkey_multiples": "--multiples"},
    )


app.command("tasks")(tasks_command)
app.command("effective-length")(effective_length_command)
