"""Where a search writes: its output folder checked before any work, and its files written as every command writes
them (:mod:`ropekit._output`).

The folder gets ``journal.jsonl`` while the search runs (:mod:`ropekit.search.journal`), then ``search.json`` and,
for a transformers folder or a GGUF file, the model as ``ropekit extend`` writes it. Before anything loads:

* the folder must not be, hold or lie inside an input (the model, ``tiny``'s bundled checkpoint included, or the
  text);
* every name the search will write that is already there (``search.json``, the model's ``config.json`` and files)
  is refused without ``force``;
* a ``journal.jsonl`` that is a symbolic link, or a file ropekit did not write, is refused (``force`` replaces only
  what ropekit wrote).

``search.json`` is written in a staging folder and renamed into place, so a symbolic link at that name is replaced,
never written through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ropekit.search.journal import JOURNAL, read_journal

#: the search's result file in its output folder
RESULT = "search.json"
#: what turns the written model's config into each engine's launch line: ``(config, target_length, folder, model)``
#: → ``{engine: {command, alternative, note}}`` (given by the layer that knows the engines)
LaunchLines = Callable[[dict[str, Any], int, Path, str], dict[str, Any]]


def writes_model(model: str | Path) -> bool:
    """Whether a search of ``model`` writes the model too (a transformers folder or a GGUF file, not a tiny one)."""
    from ropekit._bundled import is_tiny_checkpoint

    return not is_tiny_checkpoint(model)


def check_search_out(out: str | Path, model: str | Path, text: str | Path | None, *, force: bool) -> Path:
    """Check the output folder ``out`` before any work (the module docstring); nothing is created.

    Returns:
        The real path of ``out``.

    Raises:
        FileExistsError: (:class:`~ropekit._output.OutputExists`) ``out`` holds names the search writes, without
            ``force``; or ``out`` is a file.
        FileNotFoundError: ``out`` is a dangling link or has no parent folder.
        ValueError: ``out`` overlaps an input; a journal there that is a link or not ropekit's
            (:class:`~ropekit.search.journal.JournalMismatch`).
    """
    from ropekit._output import check_output
    from ropekit.integrations.hf.extend import written_names
    from ropekit.search.identity import model_path

    names = [RESULT, *(written_names(model) if writes_model(model) else [])]
    inputs = [("model", model_path(model)), ("text", text)]
    real = check_output(out, inputs, names=names, force=force)
    read_journal(real / JOURNAL)  # a link, or a file ropekit did not write: refused now
    return real


def write_outputs(
    prepared: Any, result: dict[str, Any], out: Path, *, force: bool, launch: LaunchLines | None = None
) -> None:
    """Write the model (when the search writes one; ``result`` gets its ``folder`` and ``launch`` lines) and then
    ``search.json`` into ``out``, each staged and renamed into place."""
    from ropekit._output import staged_output

    result["folder"], result["launch"] = None, None
    if writes_model(prepared.request.model):
        written = _write_model(prepared, result, out, force=force)
        result["folder"] = str(out)
        if launch is not None:
            result["launch"] = launch(written, prepared.target_length, out, str(prepared.request.model))
    with staged_output(out, force=force) as staged:
        (staged / RESULT).write_text(json.dumps(result, indent=2) + "\n")


def _write_model(prepared: Any, result: dict[str, Any], out: Path, *, force: bool) -> dict[str, Any]:
    """The model with the searched factors in its config.json, as ``extend`` writes it; returns that config."""
    from ropekit.integrations.hf.extend import extend
    from ropekit.search.objective import longrope_of

    spec = longrope_of(
        result["long_factor"],
        original_length=prepared.original_length,
        factor=prepared.factor,
        switch=prepared.request.switch,
    )
    return extend(prepared.request.model, spec, out, target_length=prepared.target_length, force=force).config
