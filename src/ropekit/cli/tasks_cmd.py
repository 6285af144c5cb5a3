"""``ropekit eval tasks``: RULER-style synthetic tasks per scaling method and length, and the effective length.

Registered on the ``eval`` group (``ropekit eval tasks``). Every option is checked before the model loads; every
sample is generated (and every length checked against every task) before the first forward pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ropekit._defaults import as_text
from ropekit.cli.common import (
    MAX_LENGTH,
    check_range,
    fail,
    json_option,
    name_option,
    option_errors,
    parse_length,
    parse_list,
    prepare_output_dir,
    refuse_overwrite,
    write_and_print,
)
from ropekit.cli.engine_options import CONCURRENCY, ENGINE, URL, check_engine
from ropekit.cli.eval_cmd import (
    DEVICE_MAP,
    DTYPE,
    EVAL_HINTS,
    FACTOR,
    MODEL,
    TEXT,
    app,
    check_methods_run,
    load_model,
    parse_factor,
)
from ropekit.cli.method_options import DEFAULT_METHODS, PARAM, attention_params, parse_methods
from ropekit.eval.tasks.limits import LEARNED, MAX_SAMPLES, MULTIPLES, RULER_THRESHOLD, SAMPLES

METHODS = typer.Option(
    DEFAULT_METHODS,
    help="Comma-separated methods, as for eval perplexity: none, native, a rope_type name, an attention method "
    "(self_extend, ...) or scaling+attention.",
)

#: files ``--out`` receives (refused without ``--force`` when present)
TASK_FILES = ("tasks.json",)
#: ``--multiples``' default, as typed
DEFAULT_MULTIPLES = as_text(MULTIPLES)


def build_task_settings(
    *,
    methods: str,
    tasks: str,
    multiples: str,
    lengths: str | None,
    samples: int,
    seed: int,
    depth: float | None,
    factor: str,
    threshold: float,
    params: dict[str, Any] | None = None,
    options: dict[str, str] | None = None,
):
    """TaskSettings from CLI strings; every error names its option (``options``: setting -> the option's name)."""
    names = {"samples": "--samples", "multiples": "--multiples", **(options or {})}
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.eval.tasks.suite import parse_tasks

    try:
        task_names = parse_tasks(tasks)
    except ValueError as error:
        raise fail(f"--tasks: {error}") from None
    token_lengths = None
    if lengths is not None:
        items = [item.strip() for item in lengths.split(",")]
        if not all(items):
            raise fail(f"--lengths must be a comma-separated list such as 4k,8k, got {lengths!r}")
        token_lengths = tuple(parse_length(item, "--lengths", minimum=2) for item in items)
    factors = parse_list(multiples, names["multiples"])
    for value in factors:
        check_range(names["multiples"], value, above=0.0)
    check_range(names["samples"], samples, minimum=1, maximum=MAX_SAMPLES)
    check_range("--seed", seed, minimum=0)
    if depth is not None:
        check_range("--depth", depth, minimum=0.0, maximum=1.0)
    check_range("--threshold", threshold, above=0.0, maximum=100.0)
    chosen = parse_methods(methods)
    with option_errors(params="--param"):  # TaskSettings checks --param against every listed method
        return TaskSettings(
            methods=chosen,
            tasks=task_names,
            multiples=factors,
            lengths=token_lengths,
            samples=samples,
            seed=seed,
            depth=depth,
            factor=parse_factor(factor),
            threshold=threshold,
            params=dict(params or {}),
        )


def check_lengths(model, settings, *, lengths_option: str) -> list[int]:
    """The run's lengths, checked before any sample is built: at least 2 and at most ``MAX_LENGTH`` tokens (as
    ``--lengths`` takes them), within the model's positions, and every sample within memory; else the one-line error
    of ``lengths_option``."""
    from ropekit.eval.tasks.run import check_plan

    train = f"training length {model.train_length:,}"
    try:
        lengths = settings.token_lengths(model.train_length)
    except ValueError as error:
        raise fail(f"{lengths_option}: {error}") from None
    if min(lengths) < 2 or max(lengths) > MAX_LENGTH:
        wrong = min(lengths) if min(lengths) < 2 else max(lengths)
        raise fail(f"{lengths_option} gives length {wrong:,} ({train}); lengths must be 2 to {MAX_LENGTH:,} tokens")
    try:
        return check_plan(model, settings)
    except ValueError as error:
        raise fail(f"{lengths_option}: {error} ({train})") from None


def fit_tasks(model, task_settings, tokens, *, lengths_option: str = "--multiples"):
    """The task settings without the tasks that do not fit the shortest length (``None`` if none fits), and those
    left out with the reason (the report's task section, and ``eval tasks --tasks all``); the lengths are checked
    first (:func:`check_lengths`)."""
    import dataclasses

    from ropekit.eval.tasks.run import fitting_tasks

    check_lengths(model, task_settings, lengths_option=lengths_option)
    dropped = fitting_tasks(model, task_settings, tokens)
    kept = tuple(t for t in task_settings.tasks if t not in dropped)
    return (dataclasses.replace(task_settings, tasks=kept) if kept else None), dropped


def prepare_samples(model, settings, tokens, *, lengths_option: str):
    """Every sample, before any forward pass; a length too short for a task is the one-line error of its option."""
    from ropekit.cli.flags import flag_of
    from ropekit.eval.tasks.run import make_samples

    lengths = check_lengths(model, settings, lengths_option=lengths_option)
    check_methods_run(model, settings.methods, settings.factor, max(lengths))
    try:
        return make_samples(model, settings, tokens)
    except ValueError as error:
        option = flag_of(error, {"text": "--text"}) or lengths_option
        raise fail(f"{option}: {error} (training length {model.train_length})") from error


def run_with_progress(model, settings, tokens, samples):
    """run_tasks under a rich progress bar in forward tokens (on stderr, so ``--json`` stays valid), cost first."""
    from rich.console import Console

    from ropekit._progress import progress_bar
    from ropekit.eval.tasks.run import forward_tokens, run_tasks

    console = Console(stderr=True)
    total = forward_tokens(samples, len(settings.methods))
    count = sum(len(group) for group in samples.values())
    budget = sum(q.budget for group in samples.values() for s in group for q in s.questions)
    console.print(
        f"forward tokens: {total:,} over {len(settings.methods)} method(s) × {count:,} samples (each prefilled "
        f"once; a wrong answer adds up to its budget: at most {budget * len(settings.methods):,} more)",
        highlight=False,
    )
    with progress_bar("tasks") as bar:
        task = bar.add_task("", total=max(1, total))
        try:
            return run_tasks(
                model,
                settings,
                text=tokens,
                samples=samples,
                on_tokens=lambda n: bar.update(task, advance=n),
                on_step=lambda label: bar.update(task, description=label),
            )
        except (ValueError, MemoryError, RuntimeError) as error:
            raise fail(f"evaluation failed: {name_option(str(error), EVAL_HINTS)}") from error


def print_summary(result) -> None:
    """Mean score per method × length (all tasks) and the effective lengths."""
    from rich.console import Console
    from rich.table import Table

    summary = result.summary()
    console = Console()
    lengths = sorted({m["length"] for m in summary["means"]})
    table = Table(title="mean score over tasks (%, string_match_all)")
    table.add_column("method")
    for n in lengths:
        table.add_column(str(n), justify="right")
    table.add_column("effective length", justify="right")
    effective = {(e["method"], e["subset"]): e for e in summary["effective"]}
    methods = list(dict.fromkeys(m["method"] for m in summary["means"]))
    for method in methods:
        cells = {m["length"]: m for m in summary["means"] if m["method"] == method and m["subset"] == "all"}
        e = effective[method, "all"]
        table.add_row(
            method,
            *[f"{100 * cells[n]['score']:.1f}" if n in cells else "" for n in lengths],
            f"{e['effective_length'] or '—'} [{e['interval'][0] or '—'}, {e['interval'][1] or '—'}]",
        )
    console.print(table)
    if "note" in summary:
        console.print(f"not judged: {summary['note']}", highlight=False)
    if summary["not_learned"]:
        console.print(
            f"below {LEARNED:.0%} at the training length (not learned by this model): {', '.join(summary['not_learned'])}",
            highlight=False,
        )
    for row in result.skipped:
        console.print(f"skipped {row['method']}: {row['reason']}", highlight=False)


@app.command("tasks")
def tasks_command(
    model: str = MODEL,
    methods: str = METHODS,
    tasks: str = typer.Option("all", help="Comma-separated task names, or 'all' (RULER's synthetic tasks; no QA)."),
    multiples: str | None = typer.Option(
        None, help=f"Lengths as multiples of the training length [default: {DEFAULT_MULTIPLES}]."
    ),
    lengths: str | None = typer.Option(None, help="Lengths in tokens (e.g. 4k,8k); replaces --multiples."),
    samples: int = typer.Option(SAMPLES, help="Samples per (length, task)."),
    seed: int = typer.Option(0, help="Seed of the samples."),
    depth: float | None = typer.Option(None, help="Needle depth for every sample (0 = start); default: random."),
    factor: str = FACTOR,
    threshold: float = typer.Option(
        RULER_THRESHOLD, help=f"Effective-length threshold in percent (RULER's {RULER_THRESHOLD:g})."
    ),
    param: str | None = PARAM,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write tasks.json here."),
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite results already in --out."),
    json_output: bool = json_option("Print JSON (rows, means, effective lengths)."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
) -> None:
    """RULER-style tasks (retrieval, tracing, aggregation) per method and length, with the effective length."""
    from rich.console import Console

    from ropekit.eval.text import read_text, shipped_text, tokenize

    if lengths is not None and multiples is not None:
        raise fail("--lengths and --multiples are alternatives; give one of them")
    settings = build_task_settings(
        methods=methods,
        tasks=tasks,
        multiples=DEFAULT_MULTIPLES if multiples is None else multiples,
        lengths=lengths,
        samples=samples,
        seed=seed,
        depth=depth,
        factor=factor,
        threshold=threshold,
        params=attention_params(param),
    )
    if out is not None:
        refuse_overwrite(out, TASK_FILES, "--out", force=force)
        prepare_output_dir(out, "--out", create=False)
    try:
        source = read_text(text) if text is not None else shipped_text()
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error
    check_engine(engine, url, concurrency, device_map=device_map, dtype=dtype)
    eval_model = load_model(model, device_map, dtype=dtype, engine=(engine, url, concurrency))
    tokens = tokenize(source, eval_model.encode, eval_model.separator)
    lengths_option = "--lengths" if lengths is not None else "--multiples"
    dropped = {}
    if tasks.strip() == "all":  # every task that fits; a task named explicitly that does not fit is an error
        fitted, left_out = fit_tasks(eval_model, settings, tokens, lengths_option=lengths_option)
        if fitted is not None:  # none fits: prepare_samples below gives the first task's error
            settings, dropped = fitted, left_out
            console = Console(stderr=True)
            for task, reason in dropped.items():
                console.print(f"left out {task}: {reason}", highlight=False)
    prepared = prepare_samples(eval_model, settings, tokens, lengths_option=lengths_option)
    if out is not None:
        prepare_output_dir(out, "--out")
        if hasattr(eval_model, "resume_from"):  # a server's answers so far: a rerun after it died resumes
            eval_model.resume_from(out / "answers.jsonl", fresh=force)
    result = run_with_progress(eval_model, settings, tokens, prepared)
    result.context["dropped"] = dropped
    write_and_print(result, out, json_output, print_summary, force=force)
