"""The evaluation commands' setup: loading the model, and the library's checks of lengths, methods and text against
it (:mod:`ropekit.eval.checks`) written as errors naming the option the user typed (``eval perplexity|passkey|tasks``
and ``report``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from ropekit.cli.common import error_message, fail, model_error
from ropekit.cli.engine_options import EngineChoice


def open_eval_model(
    model: str, device_map: str | None, *, dtype: str = "auto", before_weights=None, engine=None, tokenizer_only=False
):
    """:func:`ropekit.eval.loader.load_eval_model`, its errors naming the options.

    ``before_weights`` runs once the tokenizer is ready and before a transformers model's weights load.
    ``engine``: the :class:`~ropekit.cli.engine_options.EngineChoice` of ``--engine`` (``None``: torch).
    """
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.model_support import DTYPES

    choice = engine or EngineChoice()
    choice.check(device_map=device_map, dtype=dtype)
    if choice.name != "torch":
        loaded = _engine_model(model, choice)
        if before_weights is not None:
            try:
                before_weights(loaded)
            except ValueError as error:
                raise fail(f"--text: {error}") from error
        return loaded
    if dtype not in DTYPES:
        raise fail(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if device_map is not None and model == "tiny":
        raise fail("--device-map applies to transformers models; the bundled 'tiny' model runs on the CPU")
    try:
        loaded = load_eval_model(
            model, device_map=device_map, dtype=dtype, before_weights=before_weights, tokenizer_only=tokenizer_only
        )
    except (OSError, ValueError, TypeError) as error:  # OSError: transformers' "no weights in this directory"
        raise fail(model_error(error, model)) from error
    if device_map is not None and loaded.describe().get("kind") == "ropekit-tiny":
        raise fail(f"--device-map applies to transformers models; --model {model!r} is a ropekit tiny checkpoint")
    return loaded


def _engine_model(model: str, choice: EngineChoice):
    """The evaluation model of a non-torch engine (its errors name ``--model``, ``--url`` or ``--served-model``)."""
    from ropekit.errors import InvalidArgument
    from ropekit.eval.backends.openai import ServerError
    from ropekit.eval.loader import load_eval_model

    try:
        return load_eval_model(model, engine=choice.name, server=choice.server)
    except ServerError as error:
        flag = "--served-model" if error.argument == "served_model" else f"--url {choice.url}"
        raise fail(f"{flag}: {error}") from error
    except InvalidArgument as error:
        if error.argument != "spec":
            raise
        raise fail(f"--engine {choice.name} needs --model to be a .gguf file, got {model!r}") from error
    except (OSError, ValueError) as error:
        raise fail(f"--model {model!r}: {error}") from error


def read_sweep_text(text: Path | None, settings, *, perplexity: bool, passkey: bool):
    """``--text`` read and checked (missing, empty, binary) before any model loads; its length is checked against
    the lengths asked for once the tokenizer is known, before a transformers model's weights load."""
    from ropekit.eval.sweep import SweepText

    try:
        return SweepText(text, settings, perplexity=perplexity, passkey=passkey)
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error


@contextlib.contextmanager
def named(names: Mapping[str, str]) -> Iterator[None]:
    """The library's refusal of an evaluation's settings (an :class:`~ropekit.errors.InvalidArgument` about a field
    that one of ``names`` sets) as the one-line error naming that option; other errors pass through."""
    from ropekit.cli.flags import flag_of
    from ropekit.errors import InvalidArgument

    try:
        yield
    except InvalidArgument as error:
        if flag_of(error, names) is None:
            raise
        raise fail(error_message(error, names)) from error


def task_samples(model, settings, tasks: str, tokens, lengths_option: str):
    """The :class:`~ropekit.eval.checks.PreparedTasks` of ``eval tasks``: with ``--tasks ruler`` or ``all`` every task that fits
    the shortest length (those left out printed on stderr, with why), a task named explicitly that does not fit an
    error; each refusal names the option of its setting."""
    from ropekit.eval.checks import prepare_tasks
    from ropekit.synthetic.suite import TASK_SETS

    names = {"lengths": lengths_option, "multiples": lengths_option, "methods": "--methods", "text": "--text"}
    with named(names):
        prepared = prepare_tasks(model, settings, tokens, leave_out=tasks.strip() in TASK_SETS)
    print_left_out(prepared.dropped)
    return prepared


def print_left_out(dropped: Mapping[str, str]) -> None:
    """The tasks left out because they do not fit the shortest length, with why, on stderr."""
    from rich.console import Console

    console = Console(stderr=True)
    for task, reason in dropped.items():
        console.print(f"left out {task}: {reason}", highlight=False)
