"""The options that give a model a RoPE method (``extend``, ``engines``, ``finetune``): each defined once here.

:func:`scaling_options` puts them on a command: its parameter ``method`` becomes these options on the command line
and reaches the command as one :class:`ScalingOptions`, whose :meth:`~ScalingOptions.resolve` turns them into the
method (the one-line errors, before any weights load, are the same on every command).
"""

from __future__ import annotations

import functools
import inspect
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import typer

from ropekit.cli.common import fail, model_error, option_errors, parse_length

MODEL = typer.Option(..., "--model", help="A transformers model folder or a .gguf file.")
SCALING = typer.Option(None, "--scaling", help="Method: linear, ntk, dynamic, yarn, llama3, longrope, ... or none.")
FACTOR = typer.Option(
    None,
    "--factor",
    help="Scaling factor s >= 1 over the original length, also for an already-extended model "
    "(default: target length / original length).",
)
ORIGINAL = typer.Option(None, "--original-length", help="Pre-training length, e.g. 8k (default: from the config).")
BASE = typer.Option(None, "--base", help="Change the RoPE base to B (Men et al.'s recipe); instead of --scaling.")
PLAN = typer.Option(False, "--plan", help="Take the method from `ropekit plan` for --target-length (says which).")
TARGET = typer.Option(None, "--target-length", help="New context length, e.g. 32k (default: original × factor).")
RAMP = typer.Option(None, "--ramp", help="YaRN ramp: transformers (default) or paper (written as longrope).")
BETA_FAST = typer.Option(None, "--beta-fast", help="YaRN beta_fast (default 32).")
BETA_SLOW = typer.Option(None, "--beta-slow", help="YaRN beta_slow (default 1).")
FIXED = typer.Option(None, "--fixed-seq-len", help="Freeze dynamic NTK / LongRoPE at this length, e.g. 32k.")
FACTORS = typer.Option(None, "--factors", help="JSON file with per-pair factors (a list) for --scaling longrope.")
LAYER_TYPES = typer.Option(None, "--layer-types", help="Per-layer-type models: comma-separated types to scale.")
PARAM = typer.Option(None, "--param", help="Another field of the method, NAME=VALUE (repeatable), as `frequencies`.")

#: the library's arguments these options set -> the options (what a library error about them names)
NAMES = {
    "target_length": "--target-length",
    "original_length": "--original-length",
    "factor": "--factor",
    "beta_fast": "--beta-fast",
    "beta_slow": "--beta-slow",
    "fixed_seq_len": "--fixed-seq-len",
    "layer_types": "--layer-types",
    "ramp": "--ramp",
    "base": "--base",
    "model": "--model",
}


@dataclass(frozen=True)
class ScalingOptions:
    """The method options as given on the command line (texts, before :meth:`resolve` reads them).

    The fields' defaults are their options' (:data:`OPTIONS`); ``param`` holds the ``--param`` items.
    """

    model: Path
    scaling: str | None = None
    factor: float | None = None
    original_length: str | None = None
    base: float | None = None
    plan: bool = False
    target_length: str | None = None
    ramp: str | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    fixed_seq_len: str | None = None
    factors: Path | None = None
    param: list[str] | None = None
    layer_types: str | None = None

    @property
    def given(self) -> bool:
        """Whether a method was asked for at all (``--scaling``, ``--base`` or ``--plan``)."""
        return bool(self.scaling) or self.base is not None or self.plan

    def flags(self) -> str:
        """The method flags as given (``--model`` left out; ``None``, ``False`` and ``[]``: not given), for the
        launch lines that write a file first."""
        words: list[str] = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "model" or value is None or value is False or value == []:
                continue
            flag = "--" + name.replace("_", "-")
            if value is True:
                words.append(flag)
                continue
            for item in value if isinstance(value, list) else [value]:
                text = f"{item:g}" if isinstance(item, float) else str(item)
                words += [flag, shlex.quote(text)]
        return " ".join(words)

    def resolve(self, *, training: bool) -> tuple[Any, int, int | None, tuple[str, ...] | None, str | None]:
        """``(scaling, original length, target length or None, layer types, note)`` (:func:`resolve_scaling`)."""
        return resolve_scaling(self, training=training)


#: each field of :class:`ScalingOptions` -> its option, in the order ``--help`` lists them
OPTIONS: dict[str, Any] = {
    "model": MODEL,
    "scaling": SCALING,
    "factor": FACTOR,
    "original_length": ORIGINAL,
    "base": BASE,
    "plan": PLAN,
    "target_length": TARGET,
    "ramp": RAMP,
    "beta_fast": BETA_FAST,
    "beta_slow": BETA_SLOW,
    "fixed_seq_len": FIXED,
    "factors": FACTORS,
    "param": PARAM,
    "layer_types": LAYER_TYPES,
}


def scaling_options(*, target_length: Any = TARGET) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a typer command with a parameter ``method: ScalingOptions``: on the command line that parameter
    is the method options (:data:`OPTIONS`, in its place), and the command receives them as one
    :class:`ScalingOptions`. ``target_length``: the command's own ``--target-length`` option, where it differs
    (``finetune`` requires it)."""
    options = {**OPTIONS, "target_length": target_length}
    types = get_type_hints(ScalingOptions)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name != "method":
                parameters.append(parameter)
                continue
            parameters += [
                inspect.Parameter(name, parameter.kind, default=option, annotation=types[name])
                for name, option in options.items()
            ]

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            method = ScalingOptions(**{name: values.pop(name) for name in options})
            return command(method=method, **values)

        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
        return wrapper

    return decorate


def _alias_texts(
    ramp: str | None, beta_fast: float | None, beta_slow: float | None, fixed_seq_len: str | None
) -> dict[str, str | None]:
    """The texts of ``--ramp``, ``--beta-fast``, ``--beta-slow`` and ``--fixed-seq-len``: each stands for
    ``--param NAME=VALUE`` of the field of its name and is read the same way (errors name the option typed)."""
    length = parse_length(fixed_seq_len, "--fixed-seq-len") if fixed_seq_len else None
    texts = {"ramp": ramp, "beta_fast": beta_fast, "beta_slow": beta_slow, "fixed_seq_len": length}
    return {field: None if value is None else str(value) for field, value in texts.items()}


def _read_factors(path: Path) -> tuple[float, ...]:
    """``--factors FILE``: a JSON list of per-pair factors (exits 2 naming the option otherwise)."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise fail(f"--factors {str(path)!r}: cannot read a JSON list ({error})") from None
    if not isinstance(values, list):
        raise fail(f"--factors {str(path)!r} must hold a JSON list of per-pair factors")
    return tuple(values)


def _model_rope(model: Path, layer_types: tuple[str, ...] | None, original_length: str | None) -> tuple[Any, int]:
    """``(rope of the layers a method goes to, original length)`` of ``model``; the one-line error naming
    ``--model`` (the model's own config is at fault) or the option that asked for what it lacks."""
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of

    if model.suffix.lower() == ".gguf":  # llama.cpp's RoPE from the header, for any architecture llama.cpp runs
        from ropekit.integrations.gguf.read_rope import gguf_model_rope

        try:
            rope, original = gguf_model_rope(model)
        except (FileNotFoundError, ValueError) as error:
            raise fail(model_error(error, model)) from None
        if original_length:
            original = parse_length(original_length, "--original-length")
        return rope, original
    try:
        config = load_config(model)
        rope_of(config)  # refuses a model without RoPE
    except (FileNotFoundError, ValueError) as error:  # the model's own config is at fault, not an option
        raise fail(model_error(error, model)) from None
    with option_errors(**NAMES):
        rope = rope_of(config, first_scaled_type(config, layer_types))  # the layers the method goes to
        original = (
            parse_length(original_length, "--original-length") if original_length else original_length_of(config, rope)
        )
    return rope, original


def resolve_scaling(
    options: ScalingOptions, *, training: bool
) -> tuple[Any, int, int | None, tuple[str, ...] | None, str | None]:
    """``(scaling, original length, target length or None, layer types, note)`` from the method options: the texts
    read here, the method resolved by :func:`ropekit.integrations.resolve.resolve_scaling` (what ``ropekit.extend``
    runs), each refusal the one-line error naming the option, before any weights load."""
    from ropekit.cli.params import scaling_errors, scaling_params
    from ropekit.integrations.resolve import resolve_scaling as resolve

    o = options
    types = tuple(t.strip() for t in o.layer_types.split(",") if t.strip()) if o.layer_types else None
    rope, original = _model_rope(o.model, types, o.original_length)
    target = parse_length(o.target_length, "--target-length") if o.target_length else None
    parsed = None
    if o.scaling and not (o.scaling == "base" and o.base is not None) and o.base is None and not o.plan:
        typed: dict[str, Any] = {}
        if o.factors is not None:
            values = _read_factors(o.factors)
            typed.update(short_factor=values, long_factor=values)
        aliases = _alias_texts(o.ramp, o.beta_fast, o.beta_slow, o.fixed_seq_len)
        fields_ = ("beta_fast", "beta_slow", "ramp", "fixed_seq_len", "short_factor", "long_factor")
        parsed = scaling_params(o.scaling, params=o.param, aliases=aliases, options=fields_, **typed)
    names = {**NAMES, "method": "--scaling", "plan": "--plan", "train_length": "--original-length"}
    request = {"factor": o.factor, "target_length": target, "base": o.base, "plan": o.plan, "training": training}
    if parsed is None:
        with option_errors(**names):
            resolved = resolve(o.scaling, rope=rope, original_length=original, **request)
    else:
        with scaling_errors(parsed, names):
            resolved = resolve(o.scaling, rope=rope, original_length=original, params=parsed.values, **request)
    if resolved.scaling is not None and resolved.scaling.stated_original_length() and not o.original_length:
        _refuse_unknown_original(
            o.model, given=parsed is not None and "original_max_position_embeddings" in parsed.values
        )
    return resolved.scaling, original, resolved.target_length, types, resolved.note


def _refuse_unknown_original(model: Path, *, given: bool) -> None:
    """The one-line error when a method relative to the original length is asked of a GGUF file that does not say
    that length (:func:`~ropekit.integrations.gguf.read_rope.unrecorded_original_length`), and no option gave it."""
    if given or model.suffix.lower() != ".gguf":
        return
    from ropekit.integrations.gguf.read_rope import unrecorded_original_length

    why = unrecorded_original_length(model)
    if why is not None:
        raise fail(
            f"--original-length is needed: {why}; give the model's pre-training length (its transformers config's "
            "rope_parameters original_max_position_embeddings, 8192 for Llama 3.1)"
        )
