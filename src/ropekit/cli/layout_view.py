"""``--model``'s layout view: the RoPE layout a model's config declares, as one table (or JSON).

:func:`read_config` reads a model folder, a ``config.json`` file or a ``.gguf`` file; :func:`layout_table` renders
:func:`ropekit.integrations.hf.model_layout.model_layout` for any command that shows a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ropekit.cli.common import option_errors

if TYPE_CHECKING:
    from rich.table import Table

    from ropekit.integrations.hf.model_layout import Layout


def read_config(model: str) -> dict:
    """The config.json dict of a folder, a ``config.json`` file or a ``.gguf`` file; a folder's or a file's RoPE as
    transformers reads it (:func:`~ropekit.integrations.hf.transformers_reads.as_transformers_reads`)."""
    import json
    from pathlib import Path

    from ropekit.errors import MissingFile
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.transformers_reads import as_transformers_reads

    path = Path(model)
    if path.is_file() and path.suffix.lower() == ".json":
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{model!r} is not valid JSON ({error})") from None
        if not isinstance(config, dict):
            raise ValueError(f"{model!r} must hold a JSON object, got {type(config).__name__}")
        return as_transformers_reads(config)
    if not path.exists():
        message = f"{model!r} does not exist (a model folder, a config.json or a .gguf file)"
        raise MissingFile("model", model, message=message, leads=False)
    config = load_config(path)
    return config if path.suffix.lower() == ".gguf" else as_transformers_reads(config)


def model_layout_of(given: Any) -> Layout | None:
    """The layout of a ``--model`` (:class:`~ropekit.cli.model_option.ModelRope`), ``None`` without one; a one-line
    error (exit 2) naming ``--model`` if ropekit refuses part of it."""
    if given is None:
        return None
    from ropekit.integrations.hf.model_layout import model_layout

    with option_errors(model="--model"):
        return model_layout(given.config)


def layout_table(layout: Layout, title: str) -> Table:
    """The layout as one rich table: what the config says, and what ropekit does with it."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("", "the model's config", "what ropekit does"):
        table.add_column(column)
    for label, shown, ropekit in layout.rows:
        table.add_row(label, shown, ropekit)
    return table
