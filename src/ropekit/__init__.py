"""ropekit: rotary position embeddings (RoPE) and context-window extension.

Vocabulary used throughout:

* ``base``: the RoPE constant b (10000 in RoFormer). Never called theta.
* ``inv_freq[i] = base ** (-2i / rotary_dim)``: angular frequency of pair i; ``wavelength = 2π / inv_freq``.
* ``angles = positions ⊗ inv_freq``; ``cos``/``sin`` are tables of those angles, one column per pair.
* ``rotary_dim <= head_dim``: how many leading dims rotate; the rest pass through unchanged.
* ``interleaved=True``: pairs (0,1),(2,3),… (Meta Llama, GPT-J, RoFormer); ``False``: pairs
  (i, i + rotary_dim/2) (GPT-NeoX, Hugging Face ``rotate_half``).
* ``attention_factor``: multiplies cos and sin, so q·k logits scale by its square (YaRN).
* Shapes are ``(batch, seq, heads, head_dim)`` unless a function says otherwise.
* Plain RoPE (no scaling method) is ``scaling=None`` in a ``RopeConfig``. ``"default"`` is its transformers
  ``rope_type`` (``RopeConfig.rope_type`` and ``to_hf_dict`` write it); ``"none"`` is its name in the CLI's and the
  evaluation's method lists (``make_scaling("none")`` and ``make_scaling("default")`` both give ``None``);
  ``DefaultScaling`` is only the registry entry that makes ``"default"`` a known rope type: pass ``None``, not it.

The short API for models (:mod:`ropekit.api`): ``ropekit.patch(model, "yarn", factor=4)`` puts a method inside a
loaded transformers model, ``ropekit.extend(path, "yarn", factor=4, out=...)`` writes an extended copy of a model
folder or GGUF file, ``ropekit.evaluate(model, tasks=..., lengths=...)`` runs the task suite, returning what
``ropekit eval tasks`` prints, and ``ropekit.search(model, out=..., target_length=...)`` searches per-pair factors,
returning what it writes to ``search.json``.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Frequencies",
    "RopeConfig",
    "RotaryEmbedding",
    "__version__",
    "apply_rope",
    "apply_rope_qk",
    "cos_sin",
    "evaluate",
    "extend",
    "frequencies",
    "from_hf_config",
    "get_scaling",
    "inv_freq",
    "list_scalings",
    "make_scaling",
    "patch",
    "search",
]

if TYPE_CHECKING:
    from ropekit.api import evaluate, extend, patch
    from ropekit.config import RopeConfig
    from ropekit.functional import apply_rope, apply_rope_qk, cos_sin
    from ropekit.hf_format import from_hf_config
    from ropekit.module import RotaryEmbedding
    from ropekit.scaling import Frequencies, frequencies, get_scaling, inv_freq, list_scalings, make_scaling

_LAZY = {
    "RopeConfig": "ropekit.config",
    **{
        name: "ropekit.scaling"
        for name in ("Frequencies", "frequencies", "get_scaling", "inv_freq", "list_scalings", "make_scaling")
    },
    "apply_rope": "ropekit.functional",
    "apply_rope_qk": "ropekit.functional",
    "cos_sin": "ropekit.functional",
    "RotaryEmbedding": "ropekit.module",
    "from_hf_config": "ropekit.hf_format",
    **{name: "ropekit.api" for name in ("evaluate", "extend", "patch")},
}
#: names that are a subpackage, callable as the short API's function of the same name (:mod:`ropekit.search`)
_CALLABLE_PACKAGES = ("search",)


class _CallablePackage(types.ModuleType):
    """A subpackage that is also the short API's function of its name: ``ropekit.search(...)`` calls
    :func:`ropekit.api.search` (the package sets this class on itself when it is imported)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import ropekit.api

        return getattr(ropekit.api, self.__name__.rpartition(".")[2])(*args, **kwargs)


def __getattr__(name: str) -> Any:
    """Import names on first use, so ``import ropekit`` and the CLI's start-up pull in neither torch nor numpy."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _CALLABLE_PACKAGES:
        import importlib

        return importlib.import_module(f"ropekit.{name}")
    raise AttributeError(f"module 'ropekit' has no attribute {name!r}")
