"""The one table from the library's argument names to the options a user types, and the option an error is about.

The library raises :class:`ropekit.errors.InvalidArgument` (and its :class:`~ropekit.errors.UnknownParameters`)
carrying the argument; the CLI names the option from :data:`FLAGS` (or, for a command whose options differ, e.g.
``bound``'s ``context_length``, from the command's own table), never from the message text.
"""

from __future__ import annotations

from collections.abc import Mapping

#: library argument -> the option that sets it, shared by every command that has the option
FLAGS: dict[str, str] = {
    "factor": "--factor",
    "original_max_position_embeddings": "--original-length",
    "original_length": "--original-length",
    "train_length": "--original-length",
    "base": "--base",
    "target_length": "--target-length",
    "rotary_dim": "--rotary-dim",
    "layer_types": "--layer-types",
    "beta_fast": "--beta-fast",
    "beta_slow": "--beta-slow",
    "ramp": "--ramp",
    "fixed_seq_len": "--fixed-seq-len",
    "short_factor": "--factors",
    "long_factor": "--factors",
    "params": "--param",
    "text": "--text",
    "model": "--model",
    "out": "--out",
    "force": "--force",
}

#: the library's arguments that hold what ``--model`` names (a path, or a model or config read from it): what an error
#: loading ``--model`` may be about
MODEL_ARGUMENTS: dict[str, str] = {
    "model": "--model",
    "spec": "--model",
    "path": "--model",
    "model_or_config": "--model",
}

#: the fields of a scaling method that options other than ``--param`` fill on every command that takes ``--scaling``
SCALING_FIELDS = ("factor", "original_max_position_embeddings", "base")


def flag_of(error: BaseException, names: Mapping[str, str] = FLAGS) -> str | None:
    """The option ``error`` is about: its ``argument`` looked up in ``names`` (a command passes the options it has,
    :data:`FLAGS` by default); ``None`` for an error that carries no argument or one no option there sets."""
    argument = getattr(error, "argument", None)
    return names.get(argument) if isinstance(argument, str) else None
