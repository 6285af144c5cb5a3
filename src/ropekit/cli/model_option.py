"""``--model`` for the theory commands (``inspect``, ``plan``): a model's RoPE, training length and NoPE layout.

Options the user gives win over the model's values, so ``--model M --base B`` asks "what if M had base B".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import fail, model_error

MODEL = typer.Option(
    None,
    "--model",
    help="A transformers model folder, its config.json, a .gguf file or tiny (the bundled model): its RoPE layout, "
    "training length and NoPE layers.",
)


@dataclass(frozen=True)
class ModelRope:
    """What ``--model`` says.

    Attributes:
        head_dim, base, rotary_dim: the model's RoPE (of the layers a method scales, on per-layer-type models).
        original_length: its pre-training length.
        layout: which layers rotate q and k (``None``: every layer).
        path: ``--model`` as given.
        llama4: Llama 4's temperature and chunked attention
            (:class:`~ropekit.integrations.hf.llama4_context.Llama4LongContext`; ``None`` for other models).
        config: its whole ``config.json`` dict (for :func:`ropekit.integrations.hf.model_layout.model_layout`).
    """

    head_dim: int
    base: float
    rotary_dim: int
    original_length: int
    layout: Any
    path: str
    llama4: Any = None
    config: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``model`` entry of a command's JSON: the path and the layout (``None``: every layer rotates)."""
        return {"path": self.path, "rope_layout": None if self.layout is None else self.layout.to_dict()}

    def layout_line(self) -> str:
        return "every layer applies RoPE" if self.layout is None else self.layout.describe()


def read_model(model: Path | None) -> ModelRope | None:
    """The RoPE of ``--model``, or ``None`` without one; a one-line error (exit 2) naming ``--model`` if it cannot
    be read or has no RoPE."""
    if model is None:
        return None
    from ropekit.cli.layout_view import read_config
    from ropekit.hf_format import text_part
    from ropekit.integrations.hf.llama4_context import llama4_long_context
    from ropekit.integrations.hf.model_config import original_length_of, rope_of
    from ropekit.integrations.hf.rope_layers import rope_layout

    try:
        config = _tiny_config(model) or read_config(str(model))
        text = text_part(config)  # a multimodal model's language model (Qwen3-VL: text_config)
        rope = rope_of(text)
        original = original_length_of(text, rope)
        layout, llama4 = rope_layout(config), llama4_long_context(config)
        return ModelRope(rope.head_dim, rope.base, rope.dim, original, layout, str(model), llama4, config)
    except (FileNotFoundError, ValueError) as error:
        raise fail(model_error(error, model)) from None


def model_defaults(
    given: ModelRope | None,
    head_dim: int | None,
    base: float | None,
    rotary_dim: int | None,
    length: str | None,
    length_option: str,
) -> tuple[int, float, int | None, str | int]:
    """``(head_dim, base, rotary_dim, length)``: the options given, else the model's, else 128, 10000 and
    ``head_dim``; ``length`` (the training length) is the model's when not given, and needed without a model."""
    if given is None:
        if length is None:
            raise fail(f"{length_option} is needed (or --model, whose training length is used)")
        return (128 if head_dim is None else head_dim), (10000.0 if base is None else base), rotary_dim, length
    if rotary_dim is None and head_dim is None and given.rotary_dim != given.head_dim:
        rotary_dim = given.rotary_dim  # partial rotary: the model's, unless another head size is asked for
    head_dim = given.head_dim if head_dim is None else head_dim
    return (
        head_dim,
        (given.base if base is None else base),
        rotary_dim,
        (given.original_length if length is None else length),
    )


def _tiny_config(model: Path) -> dict[str, Any] | None:
    """The transformers-style config of the bundled tiny model (``tiny``) or a tiny checkpoint folder, as
    ``search`` and ``eval`` accept them; ``None`` for any other ``--model``."""
    from ropekit._bundled import is_tiny_checkpoint

    if not is_tiny_checkpoint(model):
        return None  # torch is not imported for a config or a GGUF file
    from ropekit.model.checkpoint import hf_style_config

    return hf_style_config(str(model))
