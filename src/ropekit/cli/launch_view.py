"""The launch lines in ``extend`` and ``plan`` (:func:`ropekit.engines.launch.launch_lines`): printed and as JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: the width of the engine column
_WIDTH = 13


def launch_json(lines: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{engine: {command, alternative, note}}``."""
    return {name: line.as_dict() for name, line in lines.items()}


def print_launch(lines: Mapping[str, Any], echo: Callable[[str], None], *, indent: str = "  ") -> None:
    """One line per engine (the command), with its alternative and note on indented lines below."""
    pad = indent + " " * _WIDTH
    for name, line in lines.items():
        echo(f"{indent}{name:<{_WIDTH}}{line.command or 'no launch line'}")
        if line.alternative:
            echo(f"{pad}or: {line.alternative}")
        if line.note:
            echo(f"{pad}({line.note})")


def plan_launch(
    names: list[str],
    *,
    head_dim: int,
    base: float,
    rotary_dim: int | None,
    factor: float,
    train_length: int,
    target_length: int,
    model: str | None,
) -> dict[str, dict[str, Any]]:
    """The launch lines of each planned method (built as the plan builds it) at ``target_length``; ``model``: the
    ``--model`` given to ``plan`` (a folder, its config.json or a GGUF file), else ``None``."""
    from ropekit.config import RopeConfig
    from ropekit.engines.launch import launch_lines, native_config
    from ropekit.scaling.registry import SCALINGS

    if model is not None and Path(model).name == "config.json":
        model = str(Path(model).parent)
    result = {}
    for name in names:
        spec = SCALINGS[name].config_class.from_options(factor=factor, original_length=train_length)
        rope = RopeConfig(head_dim, base=base, rotary_dim=rotary_dim, scaling=spec)
        flags = f"--scaling {name} --original-length {train_length} --target-length {target_length}"
        try:
            config, why = native_config(rope, original_length=train_length, target_length=target_length), None
        except ValueError as error:
            config, why = None, f"no transformers form: {error}"
        result[name] = launch_lines(config, target_length, model=model, method=flags, why_no_config=why)
    return result
