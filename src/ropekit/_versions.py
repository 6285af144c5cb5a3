"""The versions of the engines ropekit's behaviour is checked against, in one place.

Docstrings that describe another engine's behaviour ("transformers quirk: …", llama.cpp's metadata, MLX-LM's and
vLLM's RoPE, lm-eval's files) describe these versions. pyproject.toml's extras declare a range for each package
whose low end is the version checked (so ``pip install 'ropekit[hf]'`` keeps a user's newer transformers), the
``dev`` extra and ``constraints.txt`` pin these versions (what CI installs), and ``tests/test_versions.py`` checks
all of that and that an installed package lies in its range. ``ropekit engines`` says when an engine it runs is
another version (:func:`unchecked`).

Example:
    >>> unchecked({"transformers": "5.24.0", "llama.cpp": "0.3.36", "MLX-LM": None})
    'transformers 5.24.0 (checked: 5.18.0)'
"""

from __future__ import annotations

from collections.abc import Mapping

#: package name → the version checked
CHECKED = {
    "transformers": "5.18.0",
    "llama-cpp-python": "0.3.36",
    "mlx-lm": "0.32.2",
    "vllm": "0.33.0",
    "lm-eval": "0.4.13",
    "deepspeed": "0.19.8",
}

#: the engine names ``ropekit engines`` prints → their package in :data:`CHECKED`
ENGINE_PACKAGES = {"transformers": "transformers", "llama.cpp": "llama-cpp-python", "MLX-LM": "mlx-lm", "vLLM": "vllm"}


def unchecked(versions: Mapping[str, str | None]) -> str | None:
    """The engines of ``versions`` (engine name → installed version, ``None`` where not installed) that are not the
    version :data:`CHECKED` names, as ``"name version (checked: version)"`` joined by ``", "``; ``None`` when all
    are (engines without a checked version, or not installed, are left out)."""
    differing = [
        f"{name} {version} (checked: {CHECKED[ENGINE_PACKAGES[name]]})"
        for name, version in versions.items()
        if name in ENGINE_PACKAGES and version not in (None, "unknown", CHECKED[ENGINE_PACKAGES[name]])
    ]
    return ", ".join(differing) or None
