"""SGLang: not installed here, so the row gives the launch line and says why it was not run.

SGLang 0.5.23's rotary classes (``sglang.srt.layers.rotary_embedding``) import its runtime and platform layers
(``sglang.srt.platforms``, ``sglang.kernels``) and use ``sgl_kernel`` lazily; whether they build on CPU beside
vLLM's environment was not tried."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ropekit.engines.probe import Case, EngineRow, Probe

NAME = "SGLang"


def version() -> str | None:
    if importlib.util.find_spec("sglang") is None:
        return None
    from importlib.metadata import version as installed

    return installed("sglang")


def launch(config: dict[str, Any], probe: Probe, folder: Path) -> str:
    """SGLang's launch line for the folder (:func:`ropekit.engines.launch.launch_lines`)."""
    from ropekit.engines.launch import launch_lines

    return launch_lines(config, probe.target_length, folder=folder)[NAME].text()


def row(case: Case) -> EngineRow:
    found = version()
    why = (
        "sglang is not installed here (its rotary module imports SGLang's runtime and platform layers; building it "
        "on CPU was not tried)"
    )
    return EngineRow(NAME, found, "cannot run here", why, launch(case.config, case.probe, case.folder))
