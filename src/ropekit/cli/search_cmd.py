"""``ropekit search``: find per-pair RoPE factors for a model by a needle-driven evolutionary search
(:mod:`ropekit.search`), and write them as ``search.json`` (and, for a transformers model, a folder as ``extend``
writes one)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import error_message, fail, option_errors, parse_length
from ropekit.cli.search_table_view import print_table

_NAMES = {
    "model": "--model",
    "target_length": "--target-length",
    "target_multiple": "--target-length",
    "evaluations": "--evaluations",
    "budget_seconds": "--budget",
    "samples": "--samples",
    "heldout_samples": "--heldout-samples",
    "seed": "--seed",
    "text": "--text",
    "batch_size": "--batch-size",
    "population": "--population",
    "parents": "--parents",
    "dtype": "--dtype",
    "space": "--space",
    "short_tolerance": "--short-tolerance",
    "out": "--out",
    "force": "--force",
}
_UNITS = {"s": 1, "m": 60, "h": 3600}
#: what ``--out`` receives
JOURNAL, RESULT = "journal.jsonl", "search.json"


def parse_budget(text: str) -> float:
    """``30m`` → 1800 seconds (``s``, ``m``, ``h``; a bare number is minutes); the one-line error otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if match is None:
        raise fail(f"--budget must be a time such as 30m, 90s or 1.5h, got {text!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "m"]
    if seconds <= 0:
        raise fail(f"--budget must be above 0, got {text!r}")
    return seconds


def _target(text: str) -> dict[str, Any]:
    if text.strip().lower().endswith("x"):
        try:
            return {"target_multiple": float(text.strip()[:-1])}
        except ValueError:
            message = f"--target-length must be tokens (16k) or a multiple of the training length (4x), got {text!r}"
            raise fail(message) from None
    return {"target_length": parse_length(text, "--target-length", minimum=2)}


def search_command(
    model: str = typer.Option("tiny", help="'tiny' (bundled), a tiny checkpoint, a transformers folder or a .gguf."),
    target_length: str = typer.Option(..., help="The length to search for: tokens (16k) or a multiple of L0 (4x)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for search.json and the journal (and the model)."),
    budget: str | None = typer.Option(None, help="Time budget (30m, 90s, 1h), turned into a count of candidates."),
    evaluations: int | None = typer.Option(None, help="Budget as candidates scored (default 96 without --budget)."),
    samples: int = typer.Option(16, help="Needle samples each candidate is scored on."),
    heldout_samples: int = typer.Option(32, help="Disjoint needle samples of the final scores."),
    seed: int = typer.Option(0, help="Seeds the samples and the search."),
    text: Path | None = typer.Option(None, help="Filler text (default: the shipped held-out text)."),
    batch_size: int | None = typer.Option(None, help="Samples per forward (default: all in one)."),
    population: int = typer.Option(16, help="Children per generation."),
    parents: int = typer.Option(6, help="Best candidates so far that breed."),
    switch: bool = typer.Option(
        False, "--switch", help="Write short_factor as ones (plain RoPE up to L0; engines switch by their own rule)."
    ),
    dtype: str = typer.Option("auto", help="auto, bfloat16, float16, float32."),
    space: str = typer.Option(
        "free", help="free (every pair searched) or longrope2 (pairs below the critical pair on a searched NTK curve)."
    ),
    short_tolerance: float = typer.Option(
        0.02, help="1x perplexity rise the factors may add to the attention factor's before the objective counts it."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Load, time one candidate, print the plan and exit."),
    force: bool = typer.Option(False, "--force", help="Start over, replacing search.json, the journal and the model."),
) -> None:
    """Search per-pair RoPE factors (longrope form) for a model at a target length, scored by needle-driven
    perplexity: the loss on the answer tokens of passkey samples at the target length.

    The first population is the formulas (PI, NTK, YaRN, Llama 3, and NTK below theory's critical pair with s
    above it); children are mutants and crossovers in log-factor space, factors >= 1, non-decreasing, and >= s from
    each candidate's critical pair on. A stopped search resumes from OUT/journal.jsonl to the same result. OUT gets
    search.json (use it in `ropekit eval ... --methods yarn,searched --param factors=OUT/search.json`) and, for a
    transformers model or a GGUF, the model folder as `ropekit extend` writes one (native longrope). docs/search.md.
    """
    from ropekit.search.request import SearchRequest

    if budget is not None and evaluations is not None:
        raise fail("give --budget or --evaluations, not both")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise fail(f"--out {str(out)!r} is a file; give a folder")
    if (out / RESULT).exists() and not force and not dry_run:
        raise fail(f"--out {str(out)!r} holds a finished search ({RESULT}); give --force to search again")
    if not out.parent.is_dir():
        raise fail(f"--out {str(out)!r}: its parent folder does not exist")
    with option_errors(**_NAMES):
        request = SearchRequest(
            model=model,
            **_target(target_length),
            evaluations=evaluations,
            budget_seconds=None if budget is None else parse_budget(budget),
            samples=samples,
            heldout_samples=heldout_samples,
            seed=seed,
            text=None if text is None else str(text),
            batch_size=batch_size,
            population=population,
            parents=parents,
            switch=switch,
            dtype=dtype,
            space=space,
            short_tolerance=short_tolerance,
        )
    _run(request, out, dry_run=dry_run, force=force)


def _run(request: Any, out: Path, *, dry_run: bool, force: bool) -> None:
    from ropekit._progress import progress_bar
    from ropekit.search.journal import JournalMismatch
    from ropekit.search.result import describe
    from ropekit.search.run import execute, formula_scores, plan, prepare

    with option_errors(**_NAMES):
        prepared = prepare(request)
        planned = plan(prepared)
    _print_plan(planned)
    if dry_run:
        return
    out.mkdir(exist_ok=True)
    if force:
        (out / JOURNAL).unlink(missing_ok=True)
    start = time.perf_counter()
    with progress_bar("search", steps=True) as bar:
        task = bar.add_task("", total=planned["evaluations"])

        def progress(done: int, best: float) -> None:
            bar.update(task, completed=done, description=f"best {best:.4g}")

        try:
            trace, journal = execute(prepared, planned["evaluations"], journal_path=out / JOURNAL, progress=progress)
        except JournalMismatch as error:
            raise fail(f"--out: {error}; give --force to start over") from None
    formulas = formula_scores(prepared)
    result = describe(prepared, trace, formulas, time.perf_counter() - start)
    result["journal"] = {"file": JOURNAL, "resumed_from": journal.resumed}
    result["command"] = "ropekit search " + " ".join(_flags(request, out))
    _write_model(prepared, result, out, force=force)
    (out / RESULT).write_text(json.dumps(result, indent=2) + "\n")
    _print_result(result, out)


def _flags(request: Any, out: Path) -> list[str]:
    target = f"{request.target_multiple:g}x" if request.target_multiple else str(request.target_length)
    flags = ["--model", str(request.model), "--target-length", target, "--out", str(out)]
    if request.evaluations is not None:
        flags += ["--evaluations", str(request.evaluations)]
    if request.budget_seconds is not None:
        flags += ["--budget", f"{request.budget_seconds:g}s"]
    flags += ["--samples", str(request.samples), "--heldout-samples", str(request.heldout_samples)]
    flags += ["--space", request.space, "--short-tolerance", f"{request.short_tolerance:g}"]
    return [*flags, "--seed", str(request.seed), *(["--switch"] if request.switch else [])]


def _write_model(prepared: Any, result: dict[str, Any], out: Path, *, force: bool) -> None:
    """For a transformers folder or a GGUF: the model with the searched factors in its config.json, as ``extend``
    writes it, and each engine's launch line in ``result``."""
    from ropekit.eval.models import TinyEvalModel

    if isinstance(prepared.model, TinyEvalModel):
        result["launch"] = None
        result["folder"] = None
        return
    from ropekit.cli.launch_view import launch_json
    from ropekit.engines.launch import launch_lines
    from ropekit.integrations.hf.extend import extend
    from ropekit.search.objective import longrope_of

    spec = longrope_of(
        result["long_factor"],
        original_length=prepared.original_length,
        factor=prepared.factor,
        switch=prepared.request.switch,
    )
    try:
        with option_errors(**_NAMES):
            written = extend(prepared.request.model, spec, out, target_length=prepared.target_length, force=force)
    except OSError as error:
        raise fail(error_message(error, _NAMES)) from None
    lines = launch_lines(
        written.config, prepared.target_length, folder=out, model=prepared.request.model, method="search"
    )
    result["folder"] = str(out)
    result["launch"] = launch_json(lines)


def _print_plan(planned: dict[str, Any]) -> None:
    memory = planned["peak_memory_bytes"] / 2**20
    typer.echo(
        f"plan: {planned['evaluations']} candidates × {planned['seconds_per_candidate']:.2f} s "
        f"(+ formulas and held-out scores) ≈ {planned['estimated_seconds'] / 60:.1f} min; "
        f"{planned['samples']} search + {planned['heldout_samples']} held-out samples at {planned['target_length']:,} "
        f"tokens (s = {planned['factor']:g}); peak memory {memory:,.0f} MiB; at 1x the attention factor alone "
        f"costs {planned['short_floor']:+.1%} and the factors may add {planned['short_tolerance']:.1%}",
        err=True,
    )


def _print_result(result: dict[str, Any], out: Path) -> None:
    typer.echo(f"wrote {out / RESULT}" + (f" and the model in {out}" if result["folder"] else ""))
    critical = result["critical_pair"]
    typer.echo(f"  critical pair: found {critical['found']}, theory {critical['theory']}")
    typer.echo("  needle loss (nats/answer token)   search    held-out")
    typer.echo(f"    {'searched':<30}{result['scores']['search']:>8.4f}  {result['scores']['heldout']:>8.4f}")
    for name, row in result["formulas"].items():
        if "skipped" not in row:
            typer.echo(f"    {name:<30}{row['search']:>8.4f}  {row['heldout']:>8.4f}")
    for name, row in result["seeds"].items():
        label = f"{name} (as longrope factors)"
        typer.echo(f"    {label:<30}{row['search']:>8.4f}  {row['heldout']:>8.4f}")
    print_table(result["table"])
    if result["launch"]:
        typer.echo(f"  launch it at {result['target_length']:,} tokens:")
        for engine, line in result["launch"].items():
            typer.echo(f"    {engine:<12}{line.get('command') or 'no launch line'}")
