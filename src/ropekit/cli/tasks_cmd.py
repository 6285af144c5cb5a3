"""``ropekit eval tasks``: RULER-style synthetic tasks per scaling method and length, and the effective length.

Registered on the ``eval`` group (``ropekit eval tasks``) by :mod:`ropekit.cli.eval_cmd`. Every option is checked before the model loads; every
sample is generated (and every length checked against every task) before the first forward pass. The run itself is
:func:`ropekit.eval.run.run_task_suite`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ropekit.cli.common import fail, json_option, prepare_output_dir, refuse_overwrite, write_and_print
from ropekit.cli.engine_options import CONCURRENCY, ENGINE, SERVED_MODEL, TIMEOUT, URL, EngineChoice
from ropekit.cli.eval_options import DEFAULT_TASK_MULTIPLES, DEVICE_MAP, DTYPE, FACTOR, MODEL, TEXT, build_task_settings
from ropekit.cli.eval_processes import launch_aware, processes_for
from ropekit.cli.eval_setup import open_eval_model, task_samples
from ropekit.cli.lmeval_cmd import WRITE_LM_EVAL, export_lm_eval
from ropekit.cli.method_options import ATTENTION_PARAM, DEFAULT_METHODS, PARAM, method_params, parse_methods
from ropekit.eval.tasks.limits import RULER_THRESHOLD, SAMPLES

if TYPE_CHECKING:
    from ropekit.eval.protocol import AnswersAll

METHODS = typer.Option(
    DEFAULT_METHODS,
    help="Comma-separated methods, as for eval perplexity: none, native, a rope_type name, an attention method "
    "(self_extend, ...) or scaling+attention.",
)

#: files ``--out`` receives (refused without ``--force`` when present)
TASK_FILES = ("tasks.json",)


@launch_aware
def tasks_command(
    model: str = MODEL,
    methods: str = METHODS,
    tasks: str = typer.Option(
        "ruler",
        help="Comma-separated task names, 'ruler' (RULER's synthetic tasks; no QA) or 'all' (with the latent hops, "
        "path traversal and the ladder).",
    ),
    multiples: str | None = typer.Option(
        None, help=f"Lengths as multiples of the training length [default: {DEFAULT_TASK_MULTIPLES}]."
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
    attention_param: str | None = ATTENTION_PARAM,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write tasks.json here."),
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite results already in --out."),
    json_output: bool = json_option("Print JSON (rows, means, effective lengths)."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
    served_model: str | None = SERVED_MODEL,
    timeout: float = TIMEOUT,
    write_lm_eval: Path | None = WRITE_LM_EVAL,
) -> None:
    """RULER-style tasks (retrieval, tracing, aggregation) per method and length, with the effective length."""
    if lengths is not None and multiples is not None:
        raise fail("--lengths and --multiples are alternatives; give one of them")
    settings = build_task_settings(
        methods=methods,
        tasks=tasks,
        multiples=DEFAULT_TASK_MULTIPLES if multiples is None else multiples,
        lengths=lengths,
        samples=samples,
        seed=seed,
        depth=depth,
        factor=factor,
        threshold=threshold,
        params=method_params(param, attention_param, parse_methods(methods)),
    )
    lengths_option = "--lengths" if lengths is not None else "--multiples"
    if write_lm_eval is not None:  # the samples as an lm-eval task folder; nothing is evaluated
        options = dict(out=out, engine=engine, device_map=device_map, json_output=json_output, force=force)
        return export_lm_eval(
            model, settings, tasks, text, write_lm_eval, dtype=dtype, lengths=lengths_option, **options
        )
    if out is not None:
        refuse_overwrite(out, TASK_FILES, "--out", force=force)
        prepare_output_dir(out, "--out", create=False)
    choice = EngineChoice(name=engine, url=url, concurrency=concurrency, served_model=served_model, timeout=timeout)
    _run(model, settings, tasks, text, lengths_option, out, choice, device_map, dtype, json_output, force)


def _run(model, settings, tasks, text, lengths_option, out, choice, device_map, dtype, json_output, force) -> None:
    """Loads the evaluation model on its engine, makes the samples, runs the suite (across processes where
    launched so) and writes and prints the result: what ``tasks_command`` does once its options are checked."""
    from ropekit.cli.eval_progress import rich_progress, tasks_failed
    from ropekit.cli.eval_show import print_task_summary
    from ropekit.eval.protocol import AnswersAll
    from ropekit.eval.run import run_task_suite
    from ropekit.eval.text import read_text, shipped_text, tokenize

    try:
        source = read_text(text) if text is not None else shipped_text()
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error
    choice.check(device_map=device_map, dtype=dtype)
    processes = processes_for(choice.name)
    eval_model = open_eval_model(model, device_map, dtype=dtype, engine=choice)
    tokens = tokenize(source, eval_model.encode, eval_model.separator)
    prepared = task_samples(eval_model, settings, tasks, tokens, lengths_option)
    if out is not None and processes.is_main:
        prepare_output_dir(out, "--out")
        if isinstance(eval_model, AnswersAll):  # a server's answers so far: a rerun after it died resumes
            resume_answers(eval_model, out / "answers.jsonl", force=force)
    try:
        progress = rich_progress if processes.is_main else None
        result = run_task_suite(eval_model, prepared, tokens, progress=progress, processes=processes)
    except (ValueError, MemoryError, RuntimeError) as error:
        raise tasks_failed(error) from error
    if processes.is_main:
        write_and_print(result, out, json_output, print_task_summary, force=force)


def resume_answers(eval_model: AnswersAll, journal: Path, *, force: bool) -> None:
    """Keep a server's answers in ``journal`` and reuse those it holds from the same server and settings (with
    ``--force``: start it again); a journal from another server is the one-line ``--out`` error naming what changed."""
    try:
        eval_model.resume_from(journal, fresh=force)
    except ValueError as error:
        raise fail(f"--out: {error} (--force starts it again)") from None
