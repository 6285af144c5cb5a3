"""``ropekit report``: the main job — theory view, perplexity curves, passkey heatmaps and a summary.

The evaluation is :func:`ropekit.eval.run.evaluate` and the folder :func:`ropekit.eval.run.write_report`; this
command checks the options, the model and the lengths first, and shows the progress and the summary.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit import _defaults as defaults
from ropekit.cli.common import check_range, fail, json_option, prepare_output_dir, print_json, refuse_overwrite, writing
from ropekit.cli.eval_options import (
    DEVICE_MAP,
    DTYPE,
    FACTOR,
    MODEL,
    RESULT_FILES,
    STRIDE_HELP,
    TEXT,
    build_settings,
    build_task_settings,
)
from ropekit.cli.eval_setup import named, open_eval_model, read_sweep_text
from ropekit.cli.method_options import ATTENTION_PARAM, METHODS, PARAM

DEFAULT_OUT = Path("report")


def report_task_settings(settings, samples: int, tasks: str, multiples: str, threshold: float, factor: str):
    """The task section's settings (``None`` with ``--task-samples 0``): the sweep's methods (attention methods
    included), its parameters, seed and factor."""
    check_range("--task-samples", samples, minimum=0)
    if samples == 0:
        return None
    return build_task_settings(
        methods=",".join(settings.methods),
        tasks=tasks,
        multiples=multiples,
        lengths=None,
        samples=samples,
        seed=settings.seed,
        depth=None,
        factor=factor,
        threshold=threshold,
        params=dict(settings.params),
        options={"samples": "--task-samples", "multiples": "--task-multiples"},
    )


#: files a report writes (refused without --force when --out already holds one; checked before the sweep, and again
#: with the files it did write before any is renamed into place)
REPORT_FILES = (
    "index.html",
    "summary.json",
    "tasks.json",
    *RESULT_FILES,
    "wavelengths.png",
    "perplexity.png",
    "passkey.png",
    "tasks.png",
)


def report_command(
    model: str = MODEL,
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="Output folder (index.html, PNGs, JSON, CSV)."),
    methods: str = METHODS,
    perplexity_multiples: str = typer.Option(
        defaults.as_text(defaults.PERPLEXITY_MULTIPLES),
        "--perplexity-multiples",
        help="Perplexity lengths as multiples of the training length.",
    ),
    passkey_multiples: str = typer.Option(
        defaults.as_text(defaults.PASSKEY_MULTIPLES), help="Passkey lengths as multiples of the training length."
    ),
    depths: str = typer.Option(defaults.as_text(defaults.PASSKEY_DEPTHS), help="Passkey needle depths."),
    trials: int = typer.Option(defaults.PASSKEY_TRIALS, help="Passkey trials per cell."),
    factor: str = FACTOR,
    mode: str = typer.Option(defaults.PERPLEXITY_MODE, help="Perplexity mode: nonoverlap or sliding."),
    stride: int | None = typer.Option(None, help=STRIDE_HELP),
    max_tokens: int = typer.Option(defaults.PERPLEXITY_MAX_TOKENS, help="Tokens scored per (method, length)."),
    seed: int = typer.Option(0, help="Seed of the passkey episodes."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    attention_param: str | None = ATTENTION_PARAM,
    task_samples: int = typer.Option(5, help="RULER-style task samples per (method, length, task); 0: no tasks."),
    tasks: str = typer.Option(
        "ruler", help="Task names for the task section, 'ruler' or 'all' (see ropekit eval tasks)."
    ),
    task_multiples: str = typer.Option(
        defaults.as_text(defaults.TASK_MULTIPLES), help="Task lengths as multiples of the training length."
    ),
    threshold: float = typer.Option(
        defaults.RULER_THRESHOLD, help=f"Effective-length threshold in percent (RULER's {defaults.RULER_THRESHOLD})."
    ),
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite a report already in --out."),
    json_output: bool = json_option("Print the summary (findings, paths) as JSON instead of tables."),
) -> None:
    """Evaluate every method on a model and write a self-contained HTML report."""
    import time

    from ropekit.eval.parallel import LaunchError, launched_processes

    try:
        processes = launched_processes()
    except LaunchError as error:
        raise fail(str(error)) from None
    if processes > 1:  # each process would run the whole report into the same folder
        raise fail(
            f"report runs in one process, not on {processes}; for data-parallel evaluation launch "
            "eval tasks, eval perplexity or eval passkey"
        )
    started = time.perf_counter()
    names = {"multiples": "--perplexity-multiples"}
    settings = build_settings(
        methods=methods,
        multiples=perplexity_multiples,
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
        attention=attention_param,
    )
    task_settings = report_task_settings(settings, task_samples, tasks, task_multiples, threshold, factor)
    refuse_overwrite(out, REPORT_FILES, "--out", force=force)  # fail before the sweep, not after minutes of it
    prepare_output_dir(out, "--out", default=DEFAULT_OUT, create=False)
    sweep_text = read_sweep_text(text, settings, perplexity=True, passkey=True)
    eval_model = open_eval_model(model, device_map, dtype=dtype, before_weights=sweep_text.check)
    tokens = sweep_text.tokenized(eval_model)
    _write(eval_model, settings, task_settings, tokens, out, force, json_output, started)


#: the options of the settings the evaluation checks (:mod:`ropekit.eval.checks`)
OPTIONS = {
    "multiples": "--perplexity-multiples",
    "passkey_multiples": "--passkey-multiples",
    "methods": "--methods",
    "text": "--text",
    "tasks.multiples": "--task-multiples",
}


def _write(eval_model, settings, task_settings, tokens, out: Path, force: bool, json_output: bool, started):
    """Run the evaluation (checked before its first forward pass) under the progress bar, write the report into
    ``out`` and print its summary."""
    import json
    import time

    from ropekit.cli.eval_progress import rich_progress, sweep_failed, tasks_failed
    from ropekit.cli.eval_show import print_report_summary, print_tables
    from ropekit.eval.run import EvaluationFailed, evaluate, write_report_files

    try:
        with named(OPTIONS):
            evaluation = evaluate(
                eval_model, settings, tasks=task_settings, text=tokens, progress=rich_progress, started=started
            )
    except EvaluationFailed as failure:
        raise sweep_failed(failure, out, force) from failure.error
    except (ValueError, MemoryError, RuntimeError) as error:  # the task section
        raise tasks_failed(error) from error
    prepare_output_dir(out, "--out", default=DEFAULT_OUT)
    with writing(out, force=force) as staged:
        write_report_files(evaluation, staged)
    index = out / "index.html"
    summary = json.loads((out / "summary.json").read_text())
    if json_output:
        print_json({"index": str(index), "out": str(out), **summary})
        return
    print_tables(evaluation.sweep)
    print_report_summary(summary, index, time.perf_counter() - started)
