"""``--model`` for the theory commands (``inspect``, ``plan``): a model's RoPE, training length and NoPE layout.

Options the user gives win over the model's values, so ``--model M --base B`` asks "what if M had base B".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import fail, name_option

MODEL = typer.Option(
    None, "--model", help="A transformers model folder or a .gguf file: its RoPE, training length and NoPE layers."
)


@dataclass(frozen=True)
class ModelRope:
    """What ``--model`` says.

    Attributes:
        head_dim, base, rotary_dim: the model's RoPE (of the layers a method scales, on per-layer-type models).
        original_length: its pre-training length.
        layout: which layers rotate q and k (``None``: every layer).
    """

    head_dim: int
    base: float
    rotary_dim: int
    original_length: int
    layout: Any

    def layout_dict(self) -> dict[str, Any] | None:
        return None if self.layout is None else self.layout.to_dict()

    def layout_line(self) -> str:
        return "every layer applies RoPE" if self.layout is None else self.layout.describe()


def read_model(model: Path | None) -> ModelRope | None:
    """The RoPE of ``--model``, or ``None`` without one; a one-line error (exit 2) naming ``--model`` if it cannot
    be read or has no RoPE."""
    if model is None:
        return None
    from ropekit.integrations.hf_config import load_config, original_length_of, rope_of
    from ropekit.integrations.rope_layers import rope_layout

    try:
        config = load_config(model)
        rope = rope_of(config)
        return ModelRope(rope.head_dim, rope.base, rope.dim, original_length_of(config, rope), rope_layout(config))
    except (FileNotFoundError, ValueError) as error:
        message = name_option(str(error), {"model": "--model"})
        raise fail(message if message.startswith("--") else f"--model {str(model)!r}: {message}") from None


def model_defaults(
    given: ModelRope | None, head_dim: int | None, base: float | None, rotary_dim: int | None
) -> tuple[int, float, int | None]:
    """``(head_dim, base, rotary_dim)``: the options given, else the model's, else 128, 10000 and ``head_dim``."""
    if given is None:
        return (128 if head_dim is None else head_dim), (10000.0 if base is None else base), rotary_dim
    if rotary_dim is None and head_dim is None and given.rotary_dim != given.head_dim:
        rotary_dim = given.rotary_dim  # partial rotary: the model's, unless another head size is asked for
    return (given.head_dim if head_dim is None else head_dim), (given.base if base is None else base), rotary_dim
