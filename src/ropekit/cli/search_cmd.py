"""``ropekit search``: find per-pair RoPE factors for a model by a needle-driven evolutionary search
(:mod:`ropekit.search`), and write them as ``search.json`` (and, for a transformers model, a folder as ``extend``
writes one)."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import fail, json_option, option_errors, output_error, parse_length, print_json
from ropekit.cli.eval_options import DEVICE_MAP
from ropekit.cli.eval_processes import launch_aware
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
    "device_map": "--device-map",
    "space": "--space",
    "short_tolerance": "--short-tolerance",
    "out": "--out",
    "force": "--force",
}
_UNITS = {"s": 1, "m": 60, "h": 3600}
#: the result file in ``--out``
RESULT = "search.json"


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


@launch_aware
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
    batch_size: int | None = typer.Option(None, help="Samples per forward (default: as many as fit in memory)."),
    population: int = typer.Option(16, help="Children per generation."),
    parents: int = typer.Option(6, help="Best candidates so far that breed."),
    switch: bool = typer.Option(
        False, "--switch", help="Write short_factor as ones (plain RoPE up to L0; engines switch by their own rule)."
    ),
    dtype: str = typer.Option("auto", help="auto, bfloat16, float16, float32."),
    device_map: str | None = DEVICE_MAP,
    space: str = typer.Option(
        "free", help="free (every pair searched) or longrope2 (pairs below the critical pair on a searched NTK curve)."
    ),
    short_tolerance: float = typer.Option(
        0.02,
        help="Total 1x perplexity rise against the unscaled model (the attention factor's included) the objective "
        "allows before it counts.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Load, time one candidate, print the plan and exit."),
    force: bool = typer.Option(
        False, "--force", help="Replace search.json and the model files in OUT (a journal of this same search resumes)."
    ),
    json_output: bool = json_option("Print what search.json holds as JSON."),
) -> None:
    """Search per-pair RoPE factors (longrope form) for a model at a target length, scored by needle-driven
    perplexity: the loss on the answer tokens of passkey samples at the target length.

    The first population is the formulas (PI, NTK, YaRN, Llama 3, and NTK below theory's critical pair with s
    above it); children are mutants and crossovers in log-factor space, factors >= 1, non-decreasing, and >= s from
    each candidate's critical pair on. A stopped search resumes from OUT/journal.jsonl to the same result. OUT gets
    search.json (use it in `ropekit eval ... --methods yarn,searched --param factors=OUT/search.json`) and, for a
    transformers model or a GGUF, the model folder as `ropekit extend` writes one (native longrope). Under `accelerate
    launch -m ropekit.cli search` each process scores a share of every generation. docs/search.md.
    """
    import ropekit
    from ropekit.eval.parallel import ProcessFailed

    if budget is not None and evaluations is not None:
        raise fail("give --budget or --evaluations, not both")
    request = {
        "model": model,
        **_target(target_length),
        "evaluations": evaluations,
        "budget_seconds": None if budget is None else parse_budget(budget),
        "samples": samples,
        "heldout_samples": heldout_samples,
        "seed": seed,
        "text": None if text is None else str(text),
        "batch_size": batch_size,
        "population": population,
        "parents": parents,
        "switch": switch,
        "dtype": dtype,
        "device_map": device_map,
        "space": space,
        "short_tolerance": short_tolerance,
    }
    try:
        with option_errors(**_NAMES), search_progress() as progress:
            result = ropekit.search(
                out=out, force=force, dry_run=dry_run, progress=progress, log=_note, on_plan=_print_plan, **request
            )
    except OSError as error:
        raise output_error(error, out) from None
    except ProcessFailed as error:  # another process of the launch failed; its error, naming it
        raise fail(f"search failed: {error}") from error
    if dry_run:
        return
    if json_output:
        print_json(result)
        return
    _print_result(result, out)


#: without a terminal, a progress line at most this often (seconds), and at the first and last candidate
PLAIN_EVERY = 30.0


@contextlib.contextmanager
def search_progress() -> Iterator[Callable[[int, int, float], None]]:
    """The search's progress on stderr: ropekit's bar on a terminal; elsewhere (a log file, a pipe, a job runner)
    a plain line ``search: done/total candidates, best ...`` every :data:`PLAIN_EVERY` seconds."""
    if not sys.stderr.isatty():
        start, last = time.monotonic(), [-PLAIN_EVERY]

        def plain(done: int, total: int, best: float) -> None:
            now = time.monotonic() - start
            if done in (1, total) or now - last[0] >= PLAIN_EVERY:
                last[0] = now
                typer.echo(f"search: {done}/{total} candidates, best {best:.4g} ({now:.0f} s)", err=True)

        yield plain
        return
    from ropekit._progress import progress_bar

    with contextlib.ExitStack() as stack:
        shown: list[Any] = []

        def update(done: int, total: int, best: float) -> None:
            if not shown:  # drawn from the first candidate on, after the plan's lines
                bar = stack.enter_context(progress_bar("search", steps=True))
                shown.extend([bar, bar.add_task("", total=total)])
            shown[0].update(shown[1], completed=done, total=total, description=f"best {best:.4g}")

        yield update


def _note(message: str) -> None:
    typer.echo(message, err=True)


def _print_plan(planned: dict[str, Any]) -> None:
    memory = planned["peak_memory_bytes"] / 2**20
    rows = f"; {planned['batch_size']} samples per forward" if planned["batch_size"] else ""
    typer.echo(f"plan: {_where(planned)}", err=True)
    typer.echo(
        f"plan: {planned['evaluations']} candidates × {planned['seconds_per_candidate']:.2f} s "
        f"(+ formulas and held-out scores) ≈ {planned['estimated_seconds'] / 60:.1f} min; "
        f"{planned['samples']} search + {planned['heldout_samples']} held-out samples at {planned['target_length']:,} "
        f"tokens (s = {planned['factor']:g}); peak memory {memory:,.0f} MiB; at 1x the attention factor alone "
        f"costs {planned['short_floor']:+.1%}, and a candidate may cost {planned['short_tolerance']:.1%} in all{rows}",
        err=True,
    )
    if planned["short_floor_exceeds"]:
        typer.echo(
            f"plan: no longrope factor list of s = {planned['factor']:g} keeps 1x within {planned['short_tolerance']:.1%}"
            f" (the attention factor alone costs {planned['short_floor']:+.1%}); the search minimises the excess",
            err=True,
        )


def _where(planned: dict[str, Any]) -> str:
    """Where the candidates are scored: the processes (each a share of every generation) and the device map."""
    count = planned["processes"]
    shares = "1 process" if count == 1 else f"{count} processes, each scoring a share of every generation"
    placed = f"device map {planned['device_map']!r}" if planned["device_map"] else "no device map"
    return f"{shares}; {placed}"


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
