"""The library entry point of evaluation: perplexity, passkey and the RULER-style tasks of one model, and the report.

``ropekit eval perplexity|passkey|tasks`` and ``ropekit report`` all run through here; a script does the same::

    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.run import evaluate, write_report
    from ropekit.eval.sweep import SweepSettings

    model = load_eval_model("tiny")
    evaluation = evaluate(model, SweepSettings(methods=("none", "yarn"), multiples=(1.0, 2.0)))
    write_report(evaluation, "report")

Progress is a callback (:data:`Progress`): the CLI passes its rich progress bar, a script passes nothing (quiet).
Under ``accelerate launch``, ``processes=launched()`` (:mod:`ropekit.eval.parallel`) splits :func:`run_methods`' and
:func:`run_task_suite`'s units over the processes; every process gets the whole result, the one one process makes.
Settings the model cannot run are refused before the first forward pass, as :class:`~ropekit.errors.InvalidArgument`
naming the settings field (:mod:`ropekit.eval.checks`); later errors are the library's own (``ValueError``,
``MemoryError``, ``RuntimeError``), and a sweep that fails part-way raises :class:`EvaluationFailed`, which carries
the methods measured before the failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ropekit.eval.checks import PreparedTasks
    from ropekit.eval.parallel import Launched, OneProcess
    from ropekit.eval.protocol import EvalModel
    from ropekit.eval.sweep import SweepResult, SweepSettings
    from ropekit.eval.tasks.run import TaskResult, TaskSettings
    from ropekit.eval.text import TokenizedText

#: ``progress(name, total, notes)``: a context manager for one stage (``"eval"``: the sweep, ``"tasks"``: the task
#: suite) of ``total`` forward tokens, after ``notes`` (what it will cost) are shown; it yields
#: ``(on_step, on_tokens)``: ``on_step(label)`` after each step, ``on_tokens(n)`` for each ``n`` tokens done.
Progress = Callable[
    [str, int, list[str]], contextlib.AbstractContextManager[tuple[Callable[[str], None], Callable[[int], None]]]
]

#: SweepSettings fields that only one kind of evaluation uses (left out of the other's recorded settings)
PERPLEXITY_ONLY = ("multiples", "mode", "stride", "max_tokens")
PASSKEY_ONLY = ("passkey_multiples", "depths", "trials", "seed")


@contextlib.contextmanager
def quiet(name: str, total: int, notes: list[str]) -> Iterator[tuple[Callable[[str], None], Callable[[int], None]]]:
    """The progress that shows nothing (the default)."""
    yield (lambda label: None), (lambda tokens: None)


class EvaluationFailed(Exception):
    """A sweep failed at ``method``; ``partial`` holds the methods measured before it (``None``: none), with
    ``context["partial"]`` set. The original error is ``__cause__``."""

    def __init__(self, method: str, error: BaseException, partial: SweepResult | None) -> None:
        super().__init__(str(error))
        self.method = method
        self.error = error
        self.partial = partial


@dataclasses.dataclass
class Evaluation:
    """One model's evaluation: the sweep (perplexity and passkey), the task section (``None`` without one) and the
    seconds it took from :func:`evaluate`'s start (or the caller's ``started``)."""

    model: EvalModel
    settings: SweepSettings
    sweep: SweepResult
    tasks: TaskResult | None = None
    elapsed_s: float = 0.0


def run_methods(
    model: EvalModel,
    settings: SweepSettings,
    *,
    perplexity: bool = True,
    passkey: bool = True,
    text: TokenizedText | None = None,
    progress: Progress | None = None,
    processes: OneProcess | Launched | None = None,
) -> SweepResult:
    """:func:`ropekit.eval.sweep.run_sweep` method by method, merged, with progress in forward tokens (so that the
    ETA weighs a 32k window 4x an 8k one, and more for attention). A failure raises :class:`EvaluationFailed`.

    ``processes``: where the units are measured (:mod:`ropekit.eval.parallel`; default: all here); each method's
    units are split over them and gathered, and the progress counts this process's share.

    The lengths and methods are checked first (:func:`ropekit.eval.checks.check_sweep`: an ``InvalidArgument``
    before any forward pass)."""
    from ropekit.eval.checks import check_sweep
    from ropekit.eval.methods import params_of
    from ropekit.eval.parallel import ONE_PROCESS
    from ropekit.eval.sweep import cost_lines, evaluation_text, run_sweep
    from ropekit.eval.sweep_grid import sweep_units

    check_sweep(model, settings, perplexity=perplexity, passkey=passkey, text=text)
    processes = processes or ONE_PROCESS
    text_tokens = len(evaluation_text(model, text)[0])
    notes = cost_lines(model, settings, text_tokens, perplexity=perplexity, passkey=passkey)
    total = 0
    for method in settings.methods:
        one = dataclasses.replace(settings, methods=(method,), params=params_of(method, settings.params))
        _, costs = sweep_units(one, model.train_length, text_tokens, perplexity=perplexity, passkey=passkey)
        total += sum(costs[i] for i in processes.share(costs))
    if processes.processes > 1:
        notes.append(share_note(processes, "units"))
    merged: SweepResult | None = None
    with (progress or quiet)("eval", max(1, total), notes) as (on_step, on_tokens):
        for method in settings.methods:
            try:
                part = run_sweep(
                    model,
                    dataclasses.replace(settings, methods=(method,), params=params_of(method, settings.params)),
                    perplexity=perplexity,
                    passkey=passkey,
                    text=text,
                    on_step=on_step,
                    on_tokens=on_tokens,
                    processes=processes,
                )
            except (ValueError, MemoryError, RuntimeError) as error:
                if merged is not None:
                    merged.context["partial"] = True
                raise EvaluationFailed(method, error, merged) from error
            if merged is None:
                merged = part
            else:
                merged.perplexity += part.perplexity
                merged.passkey += part.passkey
                merged.skipped += part.skipped
    unused = PASSKEY_ONLY if not passkey else PERPLEXITY_ONLY if not perplexity else ()
    merged.context["settings"] = {k: v for k, v in settings.to_dict().items() if k not in unused}
    return merged


def share_note(processes: OneProcess | Launched, what: str) -> str:
    """What the progress of a split run counts: this process's share of the ``what``."""
    return (
        f"{processes.processes} processes: each measures a share of the {what}, dealt by cost; this progress counts "
        f"process {processes.rank}'s share, and the results are gathered when every share is done"
    )


def run_task_suite(
    model: EvalModel,
    prepared: PreparedTasks,
    text: TokenizedText,
    *,
    progress: Progress | None = None,
    processes: OneProcess | Launched | None = None,
) -> TaskResult:
    """:func:`ropekit.eval.tasks.run.run_tasks` on the samples of :func:`ropekit.eval.checks.prepare_tasks`, with
    progress in forward tokens; the cost is the progress's note, and the tasks left out are the result's
    ``context["dropped"]``.

    ``processes``: where the samples are answered (:mod:`ropekit.eval.parallel`; default: all here); the progress
    counts this process's share."""
    from ropekit.eval.parallel import ONE_PROCESS
    from ropekit.eval.tasks.grid import sample_cost, task_units
    from ropekit.eval.tasks.run import run_tasks, task_forward_tokens

    processes = processes or ONE_PROCESS
    settings, samples = prepared.settings, prepared.samples
    total = task_forward_tokens(samples, len(settings.methods))
    count = sum(len(group) for group in samples.values())
    budget = sum(q.budget for group in samples.values() for s in group for q in s.questions)
    notes = [
        f"forward tokens: {total:,} over {len(settings.methods)} method(s) × {count:,} samples (each prefilled "
        f"once; a wrong answer adds up to its budget: at most {budget * len(settings.methods):,} more)"
    ]
    if processes.processes > 1:
        units = task_units(settings, settings.token_lengths(model.train_length), samples)
        costs = [sample_cost(samples[n, t][i]) for _, n, t, i in units]
        total = sum(costs[i] for i in processes.share(costs))
        notes.append(share_note(processes, "samples"))
    with (progress or quiet)("tasks", max(1, total), notes) as (on_step, on_tokens):
        result = run_tasks(
            model, settings, text=text, samples=samples, on_tokens=on_tokens, on_step=on_step, processes=processes
        )
    result.context["dropped"] = prepared.dropped
    return result


def evaluate(
    model: EvalModel,
    settings: SweepSettings,
    *,
    tasks: TaskSettings | None = None,
    text: TokenizedText | None = None,
    progress: Progress | None = None,
    started: float | None = None,
) -> Evaluation:
    """Perplexity and passkey for every method of ``settings``, then the ``tasks`` section (when given), on
    ``model``.

    Everything is checked, and every task sample made, before the first forward pass
    (:func:`ropekit.eval.checks.check_sweep`, :func:`ropekit.eval.checks.prepare_tasks`); a task that does not fit
    the shortest task length is left out (the task result's ``context["dropped"]``), and no task section is run
    when none fits.

    Args:
        text: the evaluation text, tokenized (default: the shipped held-out text).
        progress: shows each stage (default: nothing shown).
        started: a ``time.perf_counter()`` reading to count the run time from (default: now).

    Raises:
        InvalidArgument: before any forward pass, about ``multiples``, ``passkey_multiples``, ``methods`` or
            ``text``, or about the task section's ``tasks.lengths`` or ``tasks.multiples``.
        EvaluationFailed: the sweep failed part-way (it carries the methods measured before).
        ValueError, MemoryError, RuntimeError: the task section failed.
    """
    from ropekit.eval.checks import check_sweep
    from ropekit.eval.text import shipped_text, tokenize

    started = time.perf_counter() if started is None else started
    if text is None:
        text = tokenize(shipped_text(), model.encode, model.separator)
    check_sweep(model, settings, text=text)
    prepared = None if tasks is None else _prepare_section(model, tasks, text)
    sweep = run_methods(model, settings, text=text, progress=progress)
    task_result = None if prepared is None else run_task_suite(model, prepared, text, progress=progress)
    return Evaluation(model, settings, sweep, task_result, time.perf_counter() - started)


def _prepare_section(model: EvalModel, tasks: TaskSettings, text: TokenizedText) -> PreparedTasks | None:
    """The task section's samples (``None``: no task fits); a refusal about the task settings' lengths is about
    ``tasks.lengths`` or ``tasks.multiples``, apart from the sweep's own ``multiples``."""
    from ropekit.errors import InvalidArgument, renamed
    from ropekit.eval.checks import NoTaskFits, prepare_tasks

    try:
        return prepare_tasks(model, tasks, text, leave_out=True)
    except NoTaskFits:
        return None
    except InvalidArgument as error:
        if error.argument not in ("lengths", "multiples"):
            raise
        argument = f"tasks.{error.argument}"
        raise InvalidArgument(argument, error.value, message=renamed(error, argument), leads=error.leads) from error


def write_report_files(evaluation: Evaluation, folder: Path) -> Path:
    """Write the report of ``evaluation`` (``index.html``, figures, JSON, CSV) straight into ``folder``; return the
    HTML path. :func:`write_report` stages it instead."""
    from ropekit.eval import report

    return report.write_sweep_report(
        evaluation.model, evaluation.settings, evaluation.sweep, folder, evaluation.elapsed_s, tasks=evaluation.tasks
    )


def write_report(evaluation: Evaluation, out: str | Path, *, force: bool = False) -> Path:
    """Write the report of ``evaluation`` into the folder ``out``, staged and published whole (files already there
    replaced only with ``force``; an ``OSError`` otherwise); return the HTML path."""
    from ropekit._output import staged_output

    out = Path(out)
    with staged_output(out, force=force) as staged:
        write_report_files(evaluation, staged)
    return out / "index.html"
