"""Helpers shared by CLI commands: length and list parsing, output paths, JSON output, one-line errors.

Every error a command reports goes through :func:`fail`: one line on stderr, ``error: <option> ...`` naming the
option the user typed, exit code 2, before any expensive work.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import typer

from ropekit._costs import MAX_BOUND_WORK as MAX_BOUND_WORK  # the cost policy, shared with the library
from ropekit._costs import MAX_FACTOR as MAX_FACTOR  # the one bound, shared with the library
from ropekit._costs import MAX_LENGTH as MAX_LENGTH  # the longest length, shared with the library

_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2}
#: the largest rotary dim / head size accepted on the command line.
MAX_HEAD_DIM = 4096


def parse_length(text: str | int, option: str = "length", *, minimum: int = 1, maximum: int = MAX_LENGTH) -> int:
    """'128k' -> 131072, '1M' -> 1048576, '131072' -> 131072 (k and M are powers of two, as context sizes are).

    Raises the one-line CLI error (exit 2) naming ``option`` for anything else, including lengths outside
    ``[minimum, maximum]``; the arithmetic is exact (no float overflow for 300-digit input).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _LENGTH.match(str(text))
        if not match:
            raise fail(f"{option}: length must look like 4096, 128k or 1M (k = 1024), got {str(text)!r}")
        exact = Decimal(match.group(1)) * _UNITS[match.group(2).lower()]
        if exact != exact.to_integral_value():
            raise fail(f"{option} must be a whole number of tokens, got {str(text)!r} (= {exact} tokens)")
        value = int(exact)
    if not minimum <= value <= maximum:
        raise fail(f"{option} must be between {minimum:,} and {maximum:,} tokens, got {str(text)!r}")
    return value


def parse_list(text: str, option: str, *, kind: type = float) -> tuple:
    """'1,2,4' -> (1.0, 2.0, 4.0); an empty list, an empty item or a non-finite number is an error naming ``option``."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise fail(f"{option} must be a comma-separated list such as 1,2,4, got {text!r} (empty)")
    if not all(items):
        raise fail(f"{option} has an empty item in {text!r} (two commas or a trailing comma)")
    values = []
    for item in items:
        try:
            value = kind(item)
        except (ValueError, InvalidOperation):
            raise fail(f"{option} must be a comma-separated list of numbers, got {text!r} ({item!r})") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise fail(f"{option} must hold finite numbers, got {item!r}")
        values.append(value)
    return tuple(values)


def check_range(
    option: str,
    value: float | int | None,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> None:
    """A numeric option inside its range (and finite), else the one-line error naming ``option``."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise fail(f"{option} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise fail(f"{option} must be >= {minimum:g}, got {value!r}")
    if above is not None and not value > above:
        raise fail(f"{option} must be > {above:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise fail(f"{option} must be <= {maximum:g}, got {value!r}")


def check_bound_work(length: int, dim: int, length_option: str, dim_option: str) -> None:
    """Refuse an exact-bound computation that would run for many minutes (L × d above :data:`MAX_BOUND_WORK`)."""
    if length * dim > MAX_BOUND_WORK:
        raise fail(
            f"{length_option} {length:,} with {dim_option} {dim} is beyond what the exact bound computes in minutes "
            f"(length × dim must be <= {MAX_BOUND_WORK:,}, e.g. 1M tokens at d = 128)"
        )


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def prepare_output_dir(path: Path, option: str = "--out", *, default: Path | None = None, create: bool = True) -> Path:
    """Check, and with ``create`` make, the output folder ``path`` (once the options are checked, before the work).

    It may exist as a folder; its parent must exist, except for the command's ``default`` (e.g. ``runs/tiny``),
    so a typo does not silently create a whole tree. Errors name ``option``. ``create=False`` checks only
    (the nearest existing folder must be writable), so a run that fails later leaves nothing behind.
    """
    if path.exists() and not path.is_dir():
        raise fail(f"{option} {str(path)!r} exists and is not a folder")
    if not path.exists():
        parent = path.absolute().parent
        if not parent.is_dir() and path != default:
            what = "is not a folder" if parent.exists() else "does not exist"
            raise fail(f"{option} {str(path)!r}: the folder {str(parent)!r} {what} (create it first)")
    if not create:
        if not os.access(_nearest_existing(path), os.W_OK | os.X_OK):
            raise fail(f"{option} {str(path)!r} cannot be written (no write permission)")
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as error:
        raise fail(f"{option} {str(path)!r} cannot be written: {error.strerror or error}") from error
    return path


def check_output_file(
    path: Path, option: str = "--out", *, suffixes: tuple[str, ...] = (), force: bool = False
) -> Path:
    """Check that the output file ``path`` can be written (nothing is created): suffix, folder, no overwrite."""
    from ropekit._output import check_output

    if suffixes and path.suffix.lower() not in suffixes:
        raise fail(f"{option} must end in {' or '.join(suffixes)}, got {path.name!r}")
    try:
        check_output(path, kind="file", force=force, option="out")
    except (OSError, ValueError) as error:
        raise fail(error_message(error, {"out": option, "force": "--force"})) from None
    if not os.access(path.absolute().parent, os.W_OK | os.X_OK):
        raise fail(f"{option} {str(path)!r} cannot be written: the folder is not writable")
    return path


def refuse_overwrite(directory: Path, names: tuple[str, ...], option: str = "--out", *, force: bool = False) -> None:
    """Fail if ``directory`` already holds any of ``names`` and ``--force`` was not given (the check before the
    work; :func:`writing` checks again, with every name the command wrote, before anything is replaced)."""
    from ropekit._output import OutputExists, refuse_existing

    try:
        refuse_existing(directory, names, force=force)
    except OutputExists as error:
        raise fail(error_message(error, {"out": option, "force": "--force"})) from None


@contextmanager
def writing(out: Path, option: str = "--out", *, force: bool = False, file: bool = False) -> Iterator[Path]:
    """Where the command writes its output for ``out``: a staging folder (or, with ``file``, a staging path) that is
    published at ``out`` when the block ends (:mod:`ropekit._output`), replacing existing files only with
    ``--force``; a collision or a write error is the one-line error naming ``option``."""
    from ropekit._output import staged_file, staged_output

    stage = staged_file if file else staged_output
    try:
        with stage(out, force=force) as staged:
            yield staged
    except OSError as error:
        raise output_error(error, out, option) from None


def output_error(error: OSError, out: Path, option: str = "--out") -> typer.Exit:
    """The one-line error of a failed write of the output ``out`` (its ``option``): files already there without
    ``--force`` (or another refusal about ``out``), or why it cannot be written."""
    from ropekit._output import OutputExists
    from ropekit.errors import InvalidArgument

    if isinstance(error, (OutputExists, InvalidArgument)):
        return fail(error_message(error, {"out": option, "force": "--force"}))
    return fail(f"{option} {str(out)!r} cannot be written: {error.strerror or error}")


def print_json(data: Any) -> None:
    """Write ``data`` as indented, strict JSON to stdout (non-finite numbers become ``null``)."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, allow_nan=False) + "\n")


def write_and_print(result: Any, out: Path | None, json_output: bool, print_text: Any, *, force: bool = False) -> None:
    """Write ``result`` into ``out`` (if given; its ``write(folder)``, through :func:`writing` with ``force``), then
    print it as JSON or with ``print_text``."""
    if out is not None:
        with writing(out, force=force) as staged:
            result.write(staged)
    if json_output:
        print_json(result.to_dict())
    else:
        print_text(result)


def _finite(value: Any) -> Any:
    """``value`` with arrays and dataclasses turned into lists and dicts, and inf/NaN into ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return _finite(value.tolist())
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return _finite(dataclasses.asdict(value))
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def fail(message: str) -> typer.Exit:
    """Print ``message`` as a one-line error on stderr and return the exit (code 2) to raise."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True).print(Text.assemble(("error:", "bold red"), " ", message))
    return typer.Exit(code=2)


@contextmanager
def option_errors(**names: str) -> Iterator[None]:
    """Turn the library's ``ValueError``/``TypeError`` (and a missing or existing path) into the one-line CLI error
    naming the option."""
    try:
        yield
    except (TypeError, ValueError, OverflowError, FileNotFoundError, FileExistsError) as error:
        raise fail(error_message(error, names)) from error


def error_message(error: BaseException, names: Mapping[str, str]) -> str:
    """The one-line message of a library ``error``: an :class:`~ropekit.errors.InvalidArgument` whose argument one
    of ``names`` sets is written with that option (:func:`ropekit.cli.flags.flag_of`), and so is every other
    argument of ``names`` its message mentions (:func:`option_namer`); other errors carry no argument and keep
    their message. An :class:`~ropekit._output.OutputExists` is described with the options of its output and of
    ``force``."""
    from ropekit._output import OutputExists
    from ropekit.cli.flags import flag_of
    from ropekit.errors import InvalidArgument

    if isinstance(error, OutputExists) and error.option in names and "force" in names:
        return error.describe(names[error.option], names["force"])
    if not isinstance(error, InvalidArgument):
        return str(error)
    text = error.describe(option_namer(names))
    option = flag_of(error, names)
    return f"{option}: {text}" if option and not error.leads else text


def option_namer(names: Mapping[str, str]) -> Callable[..., str]:
    """The :data:`ropekit.errors.Namer` that writes an argument of ``names`` as its option (``rotary_dim`` ->
    ``--rotary-dim``; with a value, ``force=True`` -> ``--force`` and ``window=2048`` -> ``--window 2048``) and any
    other as the library does."""
    from ropekit.errors import argument_name

    def name(argument: str, *value: Any) -> str:
        option = names.get(argument)
        if option is None:
            return argument_name(argument, *value)
        if not value or value[0] is True:
            return option
        return f"{option} {_as_typed(value[0])}"

    return name


def _as_typed(value: Any) -> str:
    """``value`` as a user types it after an option: a plain word bare, anything else as its ``repr``."""
    text = str(value)
    plain = isinstance(value, str) and text and all(c.isalnum() or c in "_." for c in text)
    return text if plain else repr(value)


def model_error(error: BaseException, model: Any) -> str:
    """The one-line message of an error loading ``--model`` (``model``: its value): an
    :class:`~ropekit.errors.InvalidArgument` about the model (:data:`ropekit.cli.flags.MODEL_ARGUMENTS`) is written with
    ``--model``; any other (the config's own content, transformers') after ``--model 'PATH':``."""
    from ropekit.cli.flags import MODEL_ARGUMENTS, flag_of
    from ropekit.errors import InvalidArgument

    if isinstance(error, InvalidArgument) and flag_of(error, MODEL_ARGUMENTS):
        return error_message(error, MODEL_ARGUMENTS)
    return f"--model {str(model)!r}: {error}"


def json_option(help: str = "Print JSON instead of tables.") -> Any:
    """The ``--json`` flag (shown without a value in the help)."""
    return typer.Option(False, "--json", metavar="", help=help)


def version_callback(value: bool) -> None:
    """``ropekit --version``."""
    if value:
        from ropekit import __version__

        typer.echo(f"ropekit {__version__}")
        raise typer.Exit()


def scaling_choices() -> list[str]:
    """What ``--scaling`` accepts: ``none`` (plain RoPE) and every registered method."""
    from ropekit.scaling import list_scalings

    return ["none", *list_scalings()]
