"""What a model's config says about its positions, in one description: what ``ropekit inspect --model`` prints.

One row per fact a layout can carry (each read by the function that owns it elsewhere: the RoPE by
:func:`ropekit.from_hf_config`, the NoPE layers by :mod:`ropekit.integrations.hf.rope_layers`, the attention layouts by
:mod:`ropekit.integrations.hf.attention_layouts`, Qwen's dual-chunk config by :mod:`ropekit.integrations.hf.dual_chunk_config`), each with what ropekit does with it. Reads a ``config.json`` dict; no weights.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ropekit.config import RopeConfig
from ropekit.hf_format import from_hf_config, text_part
from ropekit.integrations.hf.dual_chunk_config import CONFIG_KEY, dual_chunk_from_config
from ropekit.integrations.hf.rope_layers import rope_layout
from ropekit.scaling.registry import frequencies

__all__ = ["Layout", "model_layout"]


@dataclass
class Layout:
    """The rows of a model's layout: ``(what, value, what ropekit does)``, and the same as JSON."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, label: str, value: Any, shown: str, ropekit: str = "") -> None:
        self.rows.append((label, shown, ropekit))
        self.data[key] = value


def _rope_row(layout: Layout, rope: RopeConfig, label: str, key: str, pairing: str) -> None:
    freqs = frequencies(rope) if not (rope.scaling and rope.scaling.depends_on_seq_len) else None
    factor = f", attention factor {freqs.attention_factor:.4g}" if freqs and freqs.attention_factor != 1 else ""
    shown = f"{rope.rope_type}, base {rope.base:g}, rotary dim {rope.dim} of head {rope.head_dim}, {pairing}{factor}"
    scaling = rope.scaling.describe() if rope.scaling else None
    value = {"rope_type": rope.rope_type, "base": rope.base, "head_dim": rope.head_dim, "rotary_dim": rope.dim,
             "pairing": pairing, "scaling": scaling}  # fmt: skip
    layout.add(key, label, value, shown, "frequencies in float64; extend/eval replace the scaling")


def _layer_rows(layout: Layout, text: dict[str, Any]) -> None:
    layers = text.get("num_hidden_layers")
    types = text.get("layer_types")
    if types:
        counts = ", ".join(f"{n} {t}" for t, n in Counter(types).items())
        window = text.get("sliding_window")
        shown = counts + (f"; sliding window {window}" if window and "sliding_attention" in types else "")
        layout.add("layer_types", "layer types", dict(Counter(types)), shown,
                   "scalings and attention methods go to full_attention layers by default")  # fmt: skip
    elif layers:
        layout.add("layers", "layers", layers, str(layers))
    found = rope_layout(text)
    if found is not None:
        layout.add("nope", "NoPE layers", found.to_dict(), found.describe(), "left alone by extend, scalings, methods")


def _attention_rows(layout: Layout, text: dict[str, Any], rope: RopeConfig) -> None:
    model_type = str(text.get("model_type") or "")
    rope_dims = text.get("qk_rope_head_dim")
    if rope_dims:
        layout.add("mla", "multi-head latent attention", rope_dims, f"last {rope_dims} dims of each head rotate",
                   "attention methods refused by name")  # fmt: skip
    if rope.scaling is not None and rope.scaling.softmax_mscale() != 1 and _applies_softmax_mscale(model_type):
        term = rope.scaling.softmax_mscale()
        layout.add("softmax_mscale", "softmax-scale term", term, f"x{term:.4g} (g(s, mscale_all_dim)^2)",
                   "recomputed when apply_scaling changes the factor")  # fmt: skip
    if model_type == "gpt_oss":
        layout.add("sinks", "attention sinks", True, "learned per head (s_aux)", "attention methods refused by name")
    for key, label, ropekit in _MECHANISMS:
        if text.get(key):
            layout.add(key, label, text[key], str(text[key]), ropekit)
    if text.get(CONFIG_KEY):
        _dual_chunk_row(layout, text[CONFIG_KEY])


def _dual_chunk_row(layout: Layout, config: Any) -> None:
    """Qwen's dual-chunk config (vLLM, SGLang) as ropekit's ``dual_chunk`` method, with what ropekit does not run."""
    try:
        method, notes = dual_chunk_from_config(config)
    except ValueError as error:
        layout.add(CONFIG_KEY, "dual-chunk attention (vLLM, SGLang)", config, str(config), f"not read: {error}")
        return
    ours = {"name": method.name, "chunk_size": method.chunk_size, "local_window": method.local_window}
    value = {**dict(config), "ropekit": ours, "notes": notes}
    shown = f"chunk_size {config['chunk_size']}, local_size {config['local_size']}"
    does = f"ropekit dual_chunk, chunk_size {method.chunk_size}, local_window {method.local_window}"
    layout.add(CONFIG_KEY, "dual-chunk attention (vLLM, SGLang)", value, shown, "; ".join([does, *notes]))


#: long-context mechanisms a config can declare beside its RoPE: (key, label, what ropekit does)
_MECHANISMS = (
    ("attention_chunk_size", "chunked local attention", "eval runs transformers' attention; scalings leave it"),
    ("attn_temperature_tuning", "attention temperature (NoPE layers)", "as transformers; plan --model gives it"),
)


def _applies_softmax_mscale(model_type: str) -> bool:
    """Whether transformers' attention class of ``model_type`` applies DeepSeek's softmax-scale term."""
    if not model_type:
        return False
    try:
        module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    except ImportError:
        return False
    return getattr(module, "yarn_apply_mscale", None) is not None


def model_layout(config: Mapping[str, Any]) -> Layout:
    """The layout of the model whose ``config.json`` dict is ``config``.

    Raises:
        ValueError: the config has no RoPE or a value ropekit refuses (the message of :func:`from_hf_config`).
    """
    from ropekit.integrations.hf.layout_names import named_layouts, with_class_sections

    top = dict(config)
    text, filled = with_class_sections(text_part(top))
    layout = Layout()
    architectures = top.get("architectures") or []
    name = architectures[0] if architectures else top.get("model_type", "unknown")
    layout.add("architecture", "architecture", name, f"{name} ({top.get('model_type', '?')})")
    pairing = "interleaved pairs (rope_interleave)" if text.get("rope_interleave") else "half-split pairs"
    params = text.get("rope_scaling") or text.get("rope_parameters") or {}
    nested = sorted(k for k, v in params.items() if isinstance(v, Mapping)) if isinstance(params, Mapping) else []
    ropes = {t: from_hf_config(text, layer_type=t) for t in nested} or {None: from_hf_config(text)}
    for layer_type, rope in ropes.items():
        label = "RoPE" if layer_type is None else f"RoPE ({layer_type})"
        _rope_row(layout, rope, label, "rope" if layer_type is None else f"rope.{layer_type}", pairing)
    rope = next(iter(ropes.values()))
    if rope.mrope is not None:
        m = rope.mrope
        layout.add("mrope", "M-RoPE", {"sections": list(m.sections), "layout": m.layout},
                   f"sections (t, h, w) = {m.sections}, {m.layout}", "mrope_cos_sin / apply_mrope; text = 1-D RoPE")  # fmt: skip
    if text.get("max_position_embeddings"):
        layout.add("max_position_embeddings", "context length", text["max_position_embeddings"],
                   f"{text['max_position_embeddings']:,}")  # fmt: skip
    _layer_rows(layout, text)
    _attention_rows(layout, text, rope)
    for key, label, shown, does in named_layouts(top, text, filled):
        layout.add(key, label, shown, shown, does)
    return layout
