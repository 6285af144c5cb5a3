"""Helpers shared by CLI commands: length parsing, scaling options, JSON output, errors."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import typer

_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_length(text: str | int) -> int:
    """'128k' -> 131072, '1M' -> 1048576, '131072' -> 131072 (k and M are powers of two, as context sizes are)."""
    if isinstance(text, int):
        return text
    match = _LENGTH.match(str(text))
    if not match:
        raise typer.BadParameter(f"length must look like 4096, 128k or 1M, got {text!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    value = number * {"": 1, "k": 1024, "m": 1024**2}[unit]
    if value != int(value) or value < 1:
        raise typer.BadParameter(f"length must be a positive whole number of tokens, got {text!r}")
    return int(value)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def fail(message: str) -> typer.Exit:
    """Print ``message`` as an error and return the exit to raise."""
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}")
    return typer.Exit(code=2)


def build_scaling(name: str, factor: float | None, original_length: int | None, **extra: Any):
    """A scaling config from CLI options (``none``/``default`` give ``None``)."""
    from ropekit.scaling import get_scaling, make_scaling

    if name in ("none", "default"):
        return None
    method = get_scaling(name)
    params: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    fields = method.config_class.__dataclass_fields__
    if "factor" in fields and factor is not None:
        params["factor"] = factor
    if "original_max_position_embeddings" in fields and original_length is not None:
        params["original_max_position_embeddings"] = original_length
    import dataclasses

    missing = [
        f.name
        for f in dataclasses.fields(method.config_class)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in params
    ]
    if missing:
        options = ", ".join(
            "--" + ("original-length" if n == "original_max_position_embeddings" else n.replace("_", "-"))
            for n in missing
        )
        raise fail(f"--scaling {name} needs {options} (required fields of {method.config_class.__name__}: {missing})")
    try:
        return make_scaling(method.name, **params)
    except (TypeError, ValueError) as error:
        raise fail(str(error)) from error
