"""lm-evaluation-harness, both ways: ``eval tasks --write-lm-eval DIR`` (the samples as an lm-eval task folder) and
``eval effective-length RESULTS`` (lm-eval's per-sample output as ropekit's task table).

The library side is :mod:`ropekit.eval.lmeval`; neither command imports lm-eval.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail, json_option, output_error, prepare_output_dir, refuse_overwrite, writing
from ropekit.cli.eval_setup import named, print_left_out
from ropekit.eval.tasks.limits import RULER_THRESHOLD

WRITE_LM_EVAL = typer.Option(
    None,
    "--write-lm-eval",
    help="Write the samples as an lm-evaluation-harness task folder here instead of evaluating (run it with "
    "lm_eval --include_path DIR --tasks ropekit); the model's tokenizer only is loaded.",
)
#: files ``effective-length --out`` writes
RESULT_FILES = ("tasks.json", "tasks.png")


def export_lm_eval(
    model: str,
    settings,
    tasks: str,
    text: Path | None,
    folder: Path,
    *,
    dtype: str,
    lengths: str,
    out,
    engine,
    device_map,
    json_output: bool,
    force: bool,
) -> None:
    """``eval tasks --write-lm-eval``: make every sample, check that its text re-tokenises to its ids, write the
    folder (staged; existing files replaced only with ``--force``) and print what was written."""
    from ropekit.cli.common import print_json
    from ropekit.cli.eval_setup import open_eval_model
    from ropekit.eval.text import read_text, shipped_text, tokenize

    if out is not None:
        raise fail(
            "--write-lm-eval writes the samples and evaluates nothing; leave out --out (run eval tasks without "
            "--write-lm-eval for ropekit's own scores)"
        )
    if engine != "torch" or device_map is not None:
        raise fail(
            "--write-lm-eval writes the samples in the model's transformers tokenizer; leave --engine and "
            "--device-map at their defaults"
        )
    prepare_output_dir(folder, "--write-lm-eval", create=False)
    from ropekit.eval.lmeval.export import written_names

    refuse_overwrite(folder, tuple(written_names(settings.tasks)), "--write-lm-eval", force=force)
    try:
        source = read_text(text) if text is not None else shipped_text()
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error
    loaded = open_eval_model(model, None, dtype=dtype, tokenizer_only=True)
    manifest = _export(
        loaded, settings, tasks, tokenize(source, loaded.encode, loaded.separator), folder, force, lengths
    )
    if json_output:
        print_json(manifest)
    else:
        print_export(manifest, folder)


def _export(loaded, settings, tasks: str, tokens, folder: Path, force: bool, lengths_option: str) -> dict:
    """:func:`ropekit.eval.lmeval.export.export_lm_eval`, its refusals naming the options; the tasks left out are
    printed on stderr."""
    from ropekit.errors import InvalidArgument
    from ropekit.eval.lmeval.export import PromptMismatch, export_lm_eval
    from ropekit.synthetic.suite import TASK_SETS

    names = {"lengths": lengths_option, "multiples": lengths_option, "methods": "--methods", "text": "--text"}
    try:
        with named(names):
            manifest = export_lm_eval(
                loaded, settings, folder, text=tokens, leave_out=tasks.strip() in TASK_SETS, force=force
            )
    except PromptMismatch as error:
        raise fail(f"--write-lm-eval: {error}; nothing was written") from None
    except InvalidArgument as error:  # about the model: byte-level
        raise fail(
            f"--write-lm-eval needs a model with a transformers tokenizer (lm-eval tokenizes the prompt text with it); "
            f"--model {loaded.name!r} is byte-level"
        ) from error
    except OSError as error:
        raise output_error(error, folder, "--write-lm-eval") from None
    print_left_out(manifest["dropped"])
    return manifest


def print_export(manifest: dict, folder: Path) -> None:
    """What the export wrote, and the command that runs it."""
    from rich.console import Console

    console = Console()
    lengths = ", ".join(f"{n:,}" for n in manifest["lengths"])
    console.print(
        f"wrote {manifest['questions']:,} questions ({len(manifest['tasks'])} tasks at {lengths} tokens) to "
        f"{folder} as the lm-eval group {manifest['group']!r}",
        highlight=False,
    )
    if manifest["tokenizer_adds_special_tokens"]:
        console.print("the tokenizer adds a BOS by default: lm-eval needs add_bos_token=False", highlight=False)
    console.print(f"run: {manifest['run']}", highlight=False, soft_wrap=True)


def effective_length_command(
    results: list[str] = typer.Argument(
        ...,
        help="lm-eval --log_samples output: a samples_<task>_<date>.jsonl file or a folder of them, of the tasks "
        "--write-lm-eval writes or of lm-eval's ruler tasks; several runs as METHOD=PATH (none=... is the reference).",
    ),
    train_length: int | None = typer.Option(
        None, help="The model's training length (default: the one ropekit wrote into its samples, else the shortest)."
    ),
    threshold: float = typer.Option(
        RULER_THRESHOLD, help=f"Effective-length threshold in percent (RULER's {RULER_THRESHOLD:g})."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write tasks.json and the heatmap tasks.png here."),
    force: bool = typer.Option(False, "--force", metavar="", help="Overwrite files already in --out."),
    json_output: bool = json_option("Print JSON (rows, means, effective lengths)."),
) -> None:
    """Effective length from lm-eval's per-sample output: per task x length with Wilson intervals, the effective
    length at the threshold and relative to the model's own score, the heatmap."""
    from ropekit.cli.common import check_range, print_json
    from ropekit.cli.eval_show import print_task_cells, print_task_summary
    from ropekit.eval.lmeval.results import ResultsError, parse_runs, read_runs

    check_range("--threshold", threshold, above=0.0, maximum=100.0)
    if train_length is not None:
        check_range("--train-length", train_length, minimum=1)
    if out is not None:
        refuse_overwrite(out, RESULT_FILES, "--out", force=force)
        prepare_output_dir(out, "--out", create=False)
    try:
        result = read_runs(parse_runs(results), train_length=train_length, threshold=threshold)
    except (ResultsError, OSError, UnicodeDecodeError) as error:
        raise fail(f"RESULTS: {error}") from None
    if out is not None:
        from ropekit.eval.tasks.section import task_figure

        prepare_output_dir(out, "--out")
        with writing(out, "--out", force=force) as staged:
            result.write(staged)
            task_figure(result.rows, result.summary()["not_learned"] or [], staged / "tasks.png")
    if json_output:
        print_json(result.to_dict())
        return
    from rich.console import Console

    from ropekit.eval.tasks.section import effective_length_findings

    print_task_cells(result)
    print_task_summary(result)  # the tasks not learned among them
    console = Console()
    for line in effective_length_findings(result):
        console.print(line, highlight=False)
