"""The checkpoints that ship inside the package (``tiny``), and how a name or folder is told to be a tiny
checkpoint: torch-free, so the commands that only read a config (``inspect``, ``plan``) stay light."""

from __future__ import annotations

import json
from pathlib import Path

#: the bundled checkpoints: name -> folder inside the package
BUNDLED = {"tiny": "data/tiny"}


def is_tiny_checkpoint(spec: str | Path) -> bool:
    """Whether ``spec`` names the bundled tiny model (``"tiny"``) or a tiny checkpoint folder (``model.safetensors``
    beside a ``config.json`` holding a ``model`` entry), which :func:`~ropekit.eval.loader.load_eval_model` loads as
    :class:`~ropekit.eval.models.TinyEvalModel`."""
    path = Path(spec)
    if str(spec) == "tiny":
        return True
    if not ((path / "model.safetensors").is_file() and (path / "config.json").is_file()):
        return False
    try:
        return "model" in json.loads((path / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return False
