"""SGLang: its rotary classes import its CUDA kernels package (``sgl_kernel``) at module level, which has no CPU
wheel here, so the row gives the launch line and says why it was not run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from ropekit.engines.probe import Answer, EngineRow, Probe

NAME = "SGLang"


def version() -> str | None:
    if importlib.util.find_spec("sglang") is None:
        return None
    from importlib.metadata import version as installed

    return installed("sglang")


def launch(config: dict[str, Any], probe: Probe, folder: Path) -> str:
    override = json.dumps({"rope_parameters": config.get("rope_parameters")}, separators=(",", ":"))
    return (
        f"python -m sglang.launch_server --model-path {folder} --json-model-override-args '{override}' "
        f"--context-length {probe.target_length}"
    )


def row(folder: Path, config: dict[str, Any], probe: Probe, reference: Answer, *, gguf: Path | None) -> EngineRow:
    found = version()
    why = (
        "sglang is not installed here: its rotary module (sglang.srt.layers.rotary_embedding) imports sgl_kernel, "
        "a CUDA-only package with no CPU wheel"
    )
    return EngineRow(NAME, found, "cannot run here", why, launch(config, probe, folder))
