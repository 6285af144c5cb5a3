"""The checks an evaluation makes before its first forward pass, and the task samples it makes then.

Each refusal is an :class:`~ropekit.errors.InvalidArgument` carrying the settings field it is about
(``multiples``, ``passkey_multiples``, ``methods``, ``lengths``, ``text``), so a front end names its own option
for it (:mod:`ropekit.cli.eval_setup`). :func:`ropekit.eval.run.evaluate` runs them itself; a caller that runs
:func:`ropekit.eval.run.run_methods` or :func:`ropekit.eval.run.run_task_suite` gets them from there too.

Example:
    >>> from ropekit.errors import InvalidArgument
    >>> from ropekit.eval.models import load_eval_model
    >>> from ropekit.eval.sweep import SweepSettings
    >>> try:
    ...     check_sweep(load_eval_model("tiny"), SweepSettings(methods=("none",), multiples=(0.001,)))
    ... except InvalidArgument as error:
    ...     print(error.argument, "|", error)
    multiples | multiples 0.001 gives length 0 (training length 256)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ropekit._costs import MAX_LENGTH
from ropekit.errors import InvalidArgument

if TYPE_CHECKING:
    from ropekit.eval.protocol import EvalModel
    from ropekit.eval.sweep import SweepSettings
    from ropekit.eval.tasks.base import Sample
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.eval.text import TokenizedText


@dataclasses.dataclass(frozen=True)
class PreparedTasks:
    """Every sample of a task run, made before its first forward pass (:func:`prepare_tasks`).

    Attributes:
        settings: the settings run (without the tasks left out).
        samples: the samples per ``(length, task)``.
        dropped: the tasks left out because they do not fit the shortest length, with why.
    """

    settings: TaskSettings
    samples: dict[tuple[int, str], list[Sample]]
    dropped: dict[str, str] = dataclasses.field(default_factory=dict)


def check_sweep(
    model: EvalModel,
    settings: SweepSettings,
    *,
    perplexity: bool = True,
    passkey: bool = True,
    text: TokenizedText | None = None,
) -> None:
    """Before a sweep: every length fits the evaluation ``text`` (default: the shipped one) and at least one method
    of ``settings`` can run on ``model``, none out of range at the longest length.

    Raises:
        InvalidArgument: about ``multiples``, ``passkey_multiples`` or ``methods``.
    """
    from ropekit.eval.sweep import evaluation_text

    train = model.train_length
    if perplexity:
        tokens = len(evaluation_text(model, text)[0])
        for multiple in settings.multiples:
            length = int(multiple * train)
            if length < 2:
                message = f"multiples {multiple:g} gives length {length} (training length {train})"
                raise InvalidArgument("multiples", multiple, message=message)
            if length + 1 > tokens:
                message = (
                    f"multiples {multiple:g} gives length {length:,}, but the evaluation text has {tokens:,} tokens "
                    f"(training length {train}; the largest multiple that fits is {(tokens - 1) // train})"
                )
                raise InvalidArgument("multiples", multiple, message=message)
    if passkey:
        for multiple in settings.passkey_multiples:
            if int(multiple * train) < 1:
                message = f"passkey_multiples {multiple:g} gives an empty context"
                raise InvalidArgument("passkey_multiples", multiple, message=message)
    lengths = settings.lengths(train, perplexity=perplexity, passkey=passkey)
    check_methods_run(model, settings.methods, settings.factor, max(lengths), settings.params)


def check_methods_run(
    model: EvalModel, methods: tuple[str, ...], factor: Any, longest: int, params: Mapping | None = None
) -> None:
    """At least one of ``methods`` can run on ``model`` (a model without RoPE runs only ``none``), and none is out
    of range at the ``longest`` length.

    Raises:
        InvalidArgument: about ``methods``.
    """
    from ropekit.eval.methods import factor_for, method_extra, scaling_for

    skipped = {}
    for method in methods:
        try:
            scaling_for(
                method,
                factor=factor_for(longest, model.train_length, factor),
                train_length=model.train_length,
                native=model.native_scaling,
                extra=method_extra(method, params),
                rope=model.rope,
            )
        except LookupError as error:
            skipped[method] = str(error)
        except ValueError as error:
            raise InvalidArgument("methods", method, message=f"methods {method}: {error}") from error
    if len(skipped) == len(methods):
        reasons = "; ".join(f"{m}: {why}" for m, why in skipped.items())
        message = f"methods: none of the methods can run on this model ({reasons})"
        raise InvalidArgument("methods", tuple(methods), message=message, leads=True)


def check_task_lengths(model: EvalModel, settings: TaskSettings) -> list[int]:
    """The lengths of a task run, checked before any sample is built: 2 to :data:`~ropekit._costs.MAX_LENGTH`
    tokens, within the model's positions, and every sample within memory.

    Raises:
        InvalidArgument: about ``lengths`` (when ``settings`` gives lengths) or ``multiples``.
    """
    from ropekit.eval.tasks.run import check_plan

    argument = _lengths_argument(settings)
    train = f"training length {model.train_length:,}"
    try:
        lengths = settings.token_lengths(model.train_length)
    except ValueError as error:
        raise InvalidArgument(argument, getattr(settings, argument), message=str(error), leads=False) from None
    if min(lengths) < 2 or max(lengths) > MAX_LENGTH:
        wrong = min(lengths) if min(lengths) < 2 else max(lengths)
        message = f"{argument} gives length {wrong:,} ({train}); lengths must be 2 to {MAX_LENGTH:,} tokens"
        raise InvalidArgument(argument, wrong, message=message)
    try:
        return check_plan(model, settings)
    except ValueError as error:
        message = f"{error} ({train})"
        raise InvalidArgument(argument, getattr(settings, argument), message=message, leads=False) from None


class NoTaskFits(InvalidArgument):
    """No task of a run that leaves out the tasks that do not fit (:func:`prepare_tasks`'s ``leave_out``) fits its
    shortest length: the first task's own refusal (about ``lengths``, ``multiples`` or ``text``)."""


def prepare_tasks(
    model: EvalModel, settings: TaskSettings, text: TokenizedText | None = None, *, leave_out: bool = False
) -> PreparedTasks:
    """Every sample of ``settings`` for ``model``, made before any forward pass, after the lengths and the methods
    are checked.

    Args:
        text: the haystack text, tokenized for ``model`` (default: the shipped held-out text).
        leave_out: leave out the tasks that do not fit the shortest length (in ``dropped``, with why); when none
            fits, the first task's refusal is a :class:`NoTaskFits` (a report leaves its task section out on it);
            without it such a task is an error.

    Raises:
        InvalidArgument: about ``lengths`` or ``multiples`` (a length the model or memory cannot take, or too short
            for a task), ``methods`` (none can run) or ``text`` (too short for a haystack); a :class:`NoTaskFits`
            where ``leave_out`` leaves no task.
    """
    from ropekit.eval.tasks.run import fitting_tasks, make_samples

    lengths = check_task_lengths(model, settings)
    dropped: dict[str, str] = {}
    none_fits = False
    if leave_out:
        dropped = fitting_tasks(model, settings, text)
        kept = tuple(task for task in settings.tasks if task not in dropped)
        none_fits = not kept
        if none_fits:  # every task kept: making the first one's samples gives its own refusal
            dropped = {}
        else:
            settings = dataclasses.replace(settings, tasks=kept)
    if not none_fits:
        check_methods_run(model, settings.methods, settings.factor, max(lengths), settings.params)
    try:
        samples = make_samples(model, settings, text)
    except ValueError as error:
        argument = "text" if getattr(error, "argument", None) == "text" else _lengths_argument(settings)
        message = f"{error} (training length {model.train_length})"
        raise (NoTaskFits if none_fits else InvalidArgument)(argument, None, message=message, leads=False) from error
    return PreparedTasks(settings, samples, dropped)


def _lengths_argument(settings: TaskSettings) -> str:
    """The field that sets the lengths of ``settings``."""
    return "lengths" if settings.lengths is not None else "multiples"
