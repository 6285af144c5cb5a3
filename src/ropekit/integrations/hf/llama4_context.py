"""Llama 4's own long-context mechanism, as its config states it: what it does at a length (for ``plan``).

Two settings of ``Llama4TextConfig`` (``llama4_text``, or the ``text_config`` of ``llama4``), as transformers'
``modeling_llama4`` applies them:

* **Attention temperature** (``attn_temperature_tuning``, ``floor_scale``, ``attn_scale``; the method transformers
  cites is arXiv 2501.19399): on each NoPE layer, q at absolute position p (0-based, cached tokens counted) is
  multiplied, before the softmax, by ``1 + attn_scale · log1p(floor((p + 1) / floor_scale))``. It is 1 below
  position ``floor_scale − 1`` and grows with the log of the position beyond. RoPE layers take no temperature.
* **Chunked local attention** (``attention_chunk_size``): the layers of type ``chunked_attention`` (by default the
  RoPE layers) attend only to the keys of their own block of ``attention_chunk_size`` tokens, so the largest
  distance they see is ``attention_chunk_size − 1`` at any length.

ropekit computes neither: ``eval`` runs transformers' own attention modules, and ``apply_scaling`` / ``extend``
replace only the rotary module (which NoPE layers never read) and the RoPE keys of the config, so both mechanisms
stay as the config says under any scaling. This module reads them and gives the temperature in closed form, in
float64 (transformers computes it in float32, exact for positions below 2^24).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ropekit.integrations.hf.rope_layers import rope_layout

__all__ = ["Llama4LongContext", "llama4_long_context"]

#: ``Llama4TextConfig``'s defaults (transformers), for keys a config.json leaves out
_DEFAULTS = {"attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1, "attention_chunk_size": 8192}


@dataclass(frozen=True)
class Llama4LongContext:
    """What a Llama 4 config sets for long context.

    Attributes:
        temperature: whether the NoPE layers scale q by position (``attn_temperature_tuning``).
        floor_scale: positions per step of the temperature's floor.
        attn_scale: the temperature's slope in log1p of the step.
        chunk_size: ``attention_chunk_size`` (``None``: no chunking).
        nope_layers: the layers that take the temperature (and no RoPE).
        rope_layers: the layers that rotate q and k.
        chunked_layers: the layers that attend within chunks.
    """

    temperature: bool
    floor_scale: float
    attn_scale: float
    chunk_size: int | None
    nope_layers: tuple[int, ...]
    rope_layers: tuple[int, ...]
    chunked_layers: tuple[int, ...]

    def scale_at(self, position: int) -> float:
        """The factor q is multiplied by at 0-based ``position`` on a NoPE layer (1.0 without temperature)."""
        if not self.temperature:
            return 1.0
        return 1.0 + self.attn_scale * math.log1p(math.floor((position + 1) / self.floor_scale))

    def to_dict(self, train_length: int, target_length: int) -> dict[str, Any]:
        """The settings and the temperature at the last position of each length, for JSON."""
        return {
            "attn_temperature_tuning": self.temperature,
            "floor_scale": self.floor_scale,
            "attn_scale": self.attn_scale,
            "nope_layers": list(self.nope_layers),
            "temperature_at_train": self.scale_at(train_length - 1),
            "temperature_at_target": self.scale_at(target_length - 1),
            "attention_chunk_size": self.chunk_size,
            "chunked_layers": list(self.chunked_layers),
        }

    def lines(self, train_length: int, target_length: int) -> list[str]:
        """What the temperature and the chunking do at the training and the target length, in words."""
        lines = []
        if self.temperature and self.nope_layers:
            floor, slope = f"{self.floor_scale:g}", f"{self.attn_scale:g}"
            lines.append(
                f"Llama 4 attention temperature on the NoPE layers ({_listed(self.nope_layers)}): q × "
                f"{self.scale_at(train_length - 1):.4f} at the last of {train_length:,} positions, × "
                f"{self.scale_at(target_length - 1):.4f} at the last of {target_length:,} "
                f"(1 + {slope}·log1p(floor((p + 1) / {floor})) at position p; × 1 below position "
                f"{max(self.floor_scale - 1, 0):,.0f}). No scaling changes it: it depends on the position only."
            )
        if self.chunk_size is not None and self.chunked_layers:
            full = [i for i in self.rope_layers if i not in self.chunked_layers]
            rest = (
                f"the bound and the methods above concern the other RoPE layers ({_listed(tuple(full))})"
                if full
                else "no RoPE layer meets a longer one, so the NoPE layers alone see the whole context"
            )
            lines.append(
                f"Llama 4 chunked attention on {_listed(self.chunked_layers)}: they attend within blocks of "
                f"{self.chunk_size:,} tokens, so the largest distance they meet is {self.chunk_size - 1:,} at any "
                f"length; {rest}."
            )
        return lines


def _listed(layers: tuple[int, ...]) -> str:
    return "layer " + str(layers[0]) if len(layers) == 1 else "layers " + ", ".join(map(str, layers))


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)


def _number(config: Any, key: str, *, integer: bool = False) -> Any:
    """The config's value of ``key`` (its default if left out), checked positive (>= 0 for ``attn_scale``)."""
    value = _get(config, key)
    value = _DEFAULTS[key] if value is None else value
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise ValueError(f"{key} must be a finite {'integer' if integer else 'number'}, got {value!r}")
    if value < 0 or (value == 0 and key != "attn_scale"):
        raise ValueError(f"{key} must be {'>= 0' if key == 'attn_scale' else '> 0'}, got {value!r}")
    return value


def llama4_long_context(model_or_config: Any) -> Llama4LongContext | None:
    """The long-context settings of a Llama 4 config (a ``config.json`` dict, a config object or a model);
    ``None`` for any other model.

    Raises:
        ValueError: naming the key, for a ``floor_scale`` or ``attention_chunk_size`` that is not a positive
            number, a negative ``attn_scale``, or a bad NoPE layout (see ``rope_layout``).
    """
    config = model_or_config.config if hasattr(model_or_config, "named_modules") else model_or_config
    text = _get(config, "text_config")
    config = text if text is not None and _get(text, "model_type") == "llama4_text" else config
    if _get(config, "model_type") != "llama4_text":
        return None
    layout = rope_layout(config)
    uses_rope = layout.uses_rope if layout is not None else ()
    tuning = _get(config, "attn_temperature_tuning")
    chunk = (
        _get(config, "attention_chunk_size")
        if _has(config, "attention_chunk_size")
        else _DEFAULTS["attention_chunk_size"]
    )
    if chunk is not None:
        chunk = _number({"attention_chunk_size": chunk}, "attention_chunk_size", integer=True)
    types = _get(config, "layer_types") or ["chunked_attention" if rope else "full_attention" for rope in uses_rope]
    return Llama4LongContext(
        temperature=bool(_DEFAULTS["attn_temperature_tuning"] if tuning is None else tuning),
        floor_scale=_number(config, "floor_scale"),
        attn_scale=_number(config, "attn_scale"),
        chunk_size=chunk,
        nope_layers=tuple(i for i, rope in enumerate(uses_rope) if not rope),
        rope_layers=tuple(i for i, rope in enumerate(uses_rope) if rope),
        chunked_layers=tuple(i for i, kind in enumerate(types) if kind == "chunked_attention"),
    )


def _has(config: Any, key: str) -> bool:
    """Whether ``key`` is set in the config (a ``None`` value counts: ``attention_chunk_size: null`` turns it off)."""
    return key in config if isinstance(config, Mapping) else hasattr(config, key)
