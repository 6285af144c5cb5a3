"""The evaluation commands' setup: loading the model and checking lengths, methods and text against it before any
forward pass, each error naming the option the user typed (``eval perplexity|passkey|tasks`` and ``report``)."""

from __future__ import annotations

from pathlib import Path

from ropekit.cli.common import MAX_LENGTH, fail, model_error


def open_eval_model(model: str, device_map: str | None, *, dtype: str = "auto", before_weights=None, engine=None):
    """The evaluation model, with clear errors for missing paths and unsupported architectures.

    ``before_weights`` runs once the tokenizer is ready and before a transformers model's weights load.
    ``engine``: the :class:`~ropekit.cli.engine_options.EngineChoice` of ``--engine`` (``None``: torch).
    """
    from ropekit.eval.models import DTYPES, load_eval_model

    if engine is not None and engine.name != "torch":
        from ropekit.cli.engine_options import load_engine_model

        engine.check(device_map=device_map, dtype=dtype)
        loaded = load_engine_model(engine, model)
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
        loaded = load_eval_model(model, device_map=device_map, dtype=dtype, before_weights=before_weights)
    except (OSError, ValueError, TypeError) as error:  # OSError: transformers' "no weights in this directory"
        raise fail(model_error(error, model)) from error
    if device_map is not None and loaded.describe().get("kind") == "ropekit-tiny":
        raise fail(f"--device-map applies to transformers models; --model {model!r} is a ropekit tiny checkpoint")
    return loaded


def check_runnable(model, settings, *, perplexity: bool, passkey: bool, names: dict[str, str], text=None) -> None:
    """Before the sweep: every length fits the evaluation text, and at least one method can run on ``model``."""
    from ropekit.eval.sweep import evaluation_text

    train_length = model.train_length
    if perplexity:
        tokens = len(evaluation_text(model, text)[0])
        for multiple in settings.multiples:
            length = int(multiple * train_length)
            if length < 2:
                raise fail(f"{names['multiples']} {multiple:g} gives length {length} (training length {train_length})")
            if length + 1 > tokens:
                raise fail(
                    f"{names['multiples']} {multiple:g} gives length {length:,}, but the evaluation text has "
                    f"{tokens:,} tokens (training length {train_length}; the largest multiple that fits is "
                    f"{(tokens - 1) // train_length})"
                )
    if passkey:
        for multiple in settings.passkey_multiples:
            if int(multiple * train_length) < 1:
                raise fail(f"{names['passkey_multiples']} {multiple:g} gives an empty context")
    lengths = settings.lengths(train_length, perplexity=perplexity, passkey=passkey)
    check_methods_run(model, settings.methods, settings.factor, max(lengths), settings.params)


def check_methods_run(model, methods, factor, longest: int, params: dict | None = None) -> None:
    """At least one of ``methods`` can run on ``model`` (a model without RoPE runs only ``none``), and none is
    out of range at the ``longest`` length; else the one-line ``--methods`` error."""
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
            )
        except LookupError as error:
            skipped[method] = str(error)
        except ValueError as error:
            raise fail(f"--methods {method}: {error}") from error
    if len(skipped) == len(methods):
        reasons = "; ".join(f"{m}: {why}" for m, why in skipped.items())
        raise fail(f"--methods: none of the methods can run on this model ({reasons})")


def read_sweep_text(text: Path | None, settings, *, perplexity: bool, passkey: bool):
    """``--text`` read and checked (missing, empty, binary) before any model loads; its length is checked against
    the lengths asked for once the tokenizer is known, before a transformers model's weights load."""
    from ropekit.eval.sweep import SweepText

    try:
        return SweepText(text, settings, perplexity=perplexity, passkey=passkey)
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error


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
    check_methods_run(model, settings.methods, settings.factor, max(lengths), settings.params)
    try:
        return make_samples(model, settings, tokens)
    except ValueError as error:
        option = flag_of(error, {"text": "--text"}) or lengths_option
        raise fail(f"{option}: {error} (training length {model.train_length})") from error


def task_samples(model, settings, tasks: str, tokens, lengths_option: str):
    """``(settings, samples, dropped)`` of ``eval tasks``: with ``--tasks all`` every task that fits the shortest
    length (those left out printed on stderr, with why), a task named explicitly that does not fit an error; then
    every sample (:func:`prepare_samples`)."""
    dropped = {}
    if tasks.strip() == "all":  # every task that fits; a task named explicitly that does not fit is an error
        fitted, left_out = fit_tasks(model, settings, tokens, lengths_option=lengths_option)
        if fitted is not None:  # none fits: prepare_samples below gives the first task's error
            from rich.console import Console

            settings, dropped = fitted, left_out
            console = Console(stderr=True)
            for task, reason in dropped.items():
                console.print(f"left out {task}: {reason}", highlight=False)
    return settings, prepare_samples(model, settings, tokens, lengths_option=lengths_option), dropped
