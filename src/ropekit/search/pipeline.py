"""One search, end to end, as ``ropekit search`` and :func:`ropekit.search` run it: check the output folder, load
and plan, open the journal, search, score, write ``search.json`` (and the model).

Order, so that a refusal costs seconds: the request is checked when it is made; the output folder
(:func:`~ropekit.search.output.check_search_out`) before anything loads; the model, text, target and memory while
preparing (:func:`~ropekit.search.run.prepare`); the journal (another model, text or setting; a file ropekit did not
write) before the first candidate is timed. Nothing is written before the plan is made, and a dry run writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ropekit.search.journal import JOURNAL, Journal
from ropekit.search.output import RESULT, LaunchLines, check_search_out, write_outputs
from ropekit.search.request import PARENTS, POPULATION, SearchRequest

__all__ = ["JOURNAL", "RESULT", "search_model"]


def search_model(
    request: SearchRequest,
    out: str | Path,
    *,
    force: bool = False,
    dry_run: bool = False,
    log: Callable[[str], None] | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    launch: LaunchLines | None = None,
) -> dict[str, Any]:
    """Search ``request`` into the folder ``out``; return what ``search.json`` holds (with ``dry_run``: the plan).

    Args:
        out: the output folder (created; its parent must exist).
        force: replace ``search.json`` and the model files already in ``out``, and start again a journal of another
            search (a journal of this same search is resumed either way; files ropekit did not write stay).
        dry_run: load, time one candidate and return the plan; nothing is written.
        log: called with each note (a resumed journal, skipped journal lines).
        on_plan: called with the plan before the search starts.
        progress: called after each scored candidate with (done, total, best score so far).
        launch: turns the written model's config into engine launch lines (``search.json``'s ``launch``).

    Under ``accelerate launch`` with several processes (:func:`ropekit.eval.parallel.launched`) every process calls
    this: each scores a share of every generation, the main process alone writes, prints through ``log``,
    ``on_plan`` and ``progress``, and every process returns the same result (:mod:`ropekit.search.processes`).

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` naming the argument) a bad model, target, text or
            memory plan; a journal of another search without ``force``, or one ropekit did not write.
        FileExistsError: ``out`` holds files the search writes and ``force`` is false.
        FileNotFoundError: no model, no text, or no parent folder for ``out``.
        ProcessFailed: (:class:`~ropekit.eval.parallel.ProcessFailed`) another process of the launch failed.
    """
    from ropekit.eval.parallel import launched
    from ropekit.search.processes import own_errors, refuse_device_map

    processes = launched()
    refuse_device_map(processes, request.device_map)
    with own_errors(processes):
        return _search(
            request,
            Path(out),
            processes,
            force=force,
            dry_run=dry_run,
            say=log or (lambda message: None),
            on_plan=on_plan,
            progress=progress,
            launch=launch,
        )


def _search(request: SearchRequest, out: Path, processes: Any, *, force: bool, dry_run: bool, **calls: Any) -> Any:
    """:func:`search_model` among ``processes`` (:mod:`ropekit.search.processes`): the main process checks ``out``,
    opens the journal, plans and writes; every process scores its share of each generation."""
    from ropekit.search.processes import from_main, gathered
    from ropekit.search.result import describe
    from ropekit.search.run import execute, formula_scores, plan, prepare

    say, on_plan, progress = calls["say"], calls["on_plan"], calls["progress"]
    real = from_main(
        processes, lambda: out if dry_run else check_search_out(out, request.model, request.text, force=force)
    )
    prepared = prepare(request, sharing=sharing(processes))

    def open_and_plan() -> tuple[Journal, dict[str, Any]]:
        journal = Journal(None if dry_run else real / JOURNAL, prepared.header(), replace=force)
        planned = plan(prepared, journal.recorded_plan, processes=processes.processes)
        if on_plan is not None:
            on_plan(planned)
        if not dry_run:
            _notes(journal, planned, say)
            real.mkdir(exist_ok=True)
            journal.begin({"evaluations": planned["evaluations"], "budget_seconds": request.budget_seconds})
        return journal, planned

    journal, planned = from_main(processes, open_and_plan)
    if dry_run:
        return planned
    if not processes.is_main:
        journal.path = None  # the main process's scores, held here in memory; the main process alone writes
    prepared.batch_size = planned["batch_size"]  # the main process's memory plan, in every process
    start = time.perf_counter()
    total = planned["evaluations"]
    trace = execute(
        prepared,
        total,
        journal,
        progress=None if progress is None else (lambda done, best: progress(done, total, best)),
        processes=processes,
    )
    for parts in gathered(processes, prepared.parts):  # the objective's parts of every candidate, wherever scored
        prepared.parts.update(parts)

    formulas = formula_scores(prepared, processes)
    result = describe(prepared, trace, formulas, time.perf_counter() - start, processes=processes)

    def finish() -> dict[str, Any]:
        result["plan"] = {key: planned[key] for key in ("evaluations", "budget_seconds", "batch_size", "processes")}
        result["plan"]["device_map"] = request.device_map
        result["journal"] = {"file": JOURNAL, "resumed_from": journal.resumed, "skipped_lines": journal.skipped}
        result["command"] = command_line(request, out, total)
        write_outputs(prepared, result, real, force=force, launch=calls["launch"])
        return result

    return from_main(processes, finish)


def sharing(processes: Any) -> int:
    """How many processes share this machine's memory (each plans its forward passes in its share): the launcher's
    ``LOCAL_WORLD_SIZE``, else every process of the launch."""
    import os

    if processes.processes == 1:
        return 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
    return int(local) if local.isdigit() and int(local) >= 1 else processes.processes


def _notes(journal: Journal, planned: dict[str, Any], say: Callable[[str], None]) -> None:
    if journal.replaced:
        say(f"the journal in the output folder was another search's; started again ({JOURNAL})")
    if journal.skipped:
        lines = ", ".join(str(n) for n in journal.skipped[:8]) + (" ..." if len(journal.skipped) > 8 else "")
        say(f"{JOURNAL}: line(s) {lines} are not scored candidates (cut short or foreign); skipped, scored again")
    if journal.resumed:
        recorded = (journal.recorded_plan or {}).get("evaluations")
        change = f" (the journal planned {recorded})" if recorded not in (None, planned["evaluations"]) else ""
        say(f"resuming: {journal.resumed} candidates already scored; searching to {planned['evaluations']}{change}")


def command_line(request: SearchRequest, out: Path, evaluations: int) -> str:
    """The command that gives this result again: the request's settings, with the budget as the count of
    candidates it bought (a time budget is not reproducible)."""
    target = f"{request.target_multiple:g}x" if request.target_multiple else str(request.target_length)
    flags = ["--model", str(request.model), "--target-length", target, "--out", str(out)]
    flags += ["--evaluations", str(evaluations), "--samples", str(request.samples)]
    flags += ["--heldout-samples", str(request.heldout_samples), "--seed", str(request.seed)]
    if request.text is not None:
        flags += ["--text", str(request.text)]
    for name, default in (("population", POPULATION), ("parents", PARENTS)):
        if getattr(request, name) != default:
            flags += [f"--{name}", str(getattr(request, name))]
    if request.dtype != "auto":
        flags += ["--dtype", request.dtype]
    if request.device_map is not None:
        flags += ["--device-map", request.device_map]
    flags += ["--space", request.space, "--short-tolerance", f"{request.short_tolerance:g}"]
    return "ropekit search " + " ".join([*flags, *(["--switch"] if request.switch else [])])
