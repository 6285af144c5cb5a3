"""Which decoder layers rotate q and k: the one model of a NoPE layout, for every command and patch.

Some models interleave layers that take no position at all (NoPE, "no positional embedding") with RoPE layers:

* SmolLM3 (``model_type`` ``smollm3``): ``no_rope_layers``, one entry per layer, ``1`` = the layer applies RoPE,
  ``0`` = NoPE (the name reads backwards: transformers' ``SmolLM3Attention`` sets ``use_rope =
  no_rope_layers[layer_idx]``). Left out (``None``), it is ``int((i + 1) % no_rope_layer_interval != 0)``: every
  ``no_rope_layer_interval``-th layer (default 4) is NoPE.
* Llama 4 (``llama4_text``, or the ``text_config`` of ``llama4``): the same key and rule, except that an empty list
  also means the default (``Llama4TextConfig`` keeps ``no_rope_layers`` only when it is non-empty).

On a NoPE layer q and k are never rotated, so the model's RoPE (its base, a scaling, an attention method that
re-positions q and k) does not reach it: ``apply_scaling`` and ``extend`` leave it as it is (transformers applies
``rope_parameters`` only where ``use_rope`` holds), and :func:`~ropekit.integrations.hf.patch_attention.apply_attention`
gives a method only to the RoPE layers. Every other model rotates q and k in every layer (:func:`rope_layout` is
``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RopeLayout", "layer_uses_rope", "rope_layout"]

#: model types whose layers may be NoPE, and whether an empty ``no_rope_layers`` also means the default
_NOPE_TYPES = {"smollm3": False, "llama4_text": True}
#: ``no_rope_layer_interval``'s default in both config classes
_DEFAULT_INTERVAL = 4


@dataclass(frozen=True)
class RopeLayout:
    """Per decoder layer, whether it rotates q and k.

    Attributes:
        uses_rope: one entry per layer (``num_hidden_layers``), ``True`` where the layer applies RoPE.
    """

    uses_rope: tuple[bool, ...]

    @property
    def rope_layers(self) -> list[int]:
        """The indices of the layers that apply RoPE."""
        return [i for i, rope in enumerate(self.uses_rope) if rope]

    @property
    def nope_layers(self) -> list[int]:
        """The indices of the layers that take no position (NoPE)."""
        return [i for i, rope in enumerate(self.uses_rope) if not rope]

    def describe(self) -> str:
        """One line: which layers are NoPE and how many rotate."""
        total, nope = len(self.uses_rope), self.nope_layers
        if not nope:
            return f"all {total} layers apply RoPE"
        listed = ", ".join(map(str, nope))
        rotating = total - len(nope)
        return (
            f"{len(nope)} of {total} layers take no RoPE (NoPE: layers {listed}); the other {rotating} rotate q and k"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"layers": len(self.uses_rope), "rope_layers": self.rope_layers, "nope_layers": self.nope_layers}


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)


def _text_config(model_or_config: Any) -> Any:
    """The decoder's config: a model's ``.config``, and a multimodal config's ``text_config`` (Llama 4)."""
    config = model_or_config.config if hasattr(model_or_config, "named_modules") else model_or_config
    text = _get(config, "text_config")
    return text if text is not None and _get(text, "model_type") in _NOPE_TYPES else config


def rope_layout(model_or_config: Any) -> RopeLayout | None:
    """The layers that rotate q and k, for a model type that can have NoPE layers; ``None`` for any other model
    (every layer rotates).

    Args:
        model_or_config: a ``config.json`` dict, a transformers config object or a model (its ``.config``).

    Raises:
        ValueError: ``no_rope_layers`` is not a list of 0/1 at least ``num_hidden_layers`` long, or the layer
            count or ``no_rope_layer_interval`` is not a positive integer.
    """
    config = _text_config(model_or_config)
    model_type = _get(config, "model_type")
    if model_type not in _NOPE_TYPES:
        return None
    layers = _get(config, "num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        raise ValueError(f"num_hidden_layers must be a positive integer for {model_type}, got {layers!r}")
    flags = _get(config, "no_rope_layers")
    if flags is None or (_NOPE_TYPES[model_type] and not flags):
        interval = _get(config, "no_rope_layer_interval")
        interval = _DEFAULT_INTERVAL if interval is None else interval
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(f"no_rope_layer_interval must be a positive integer, got {interval!r}")
        return RopeLayout(tuple((i + 1) % interval != 0 for i in range(layers)))
    if not isinstance(flags, (list, tuple)) or len(flags) < layers or any(f not in (0, 1) for f in flags[:layers]):
        raise ValueError(
            f"no_rope_layers must list 1 (RoPE) or 0 (NoPE) for each of the {layers} layers, got {flags!r}"
        )
    return RopeLayout(tuple(bool(f) for f in flags[:layers]))


def layer_uses_rope(layout: RopeLayout | None, layer_idx: int | None) -> bool:
    """Whether layer ``layer_idx`` rotates q and k (every layer does without a layout)."""
    if layout is None or layer_idx is None:
        return True
    return layout.uses_rope[layer_idx]
