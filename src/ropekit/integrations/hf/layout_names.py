"""The 2025–26 RoPE layouts ``inspect --model`` names by what they are, each as transformers 5.18's model class runs it:

* Gemma 4: ``proportional`` partial RoPE on full-attention layers (frequencies over the whole head, only the first
  ``partial_rotary_factor`` of its pairs rotating), plain RoPE on sliding layers;
* Qwen3.5: partial RoPE with interleaved M-RoPE (sections t, h, w spread over the pairs in turn); without
  ``mrope_section`` its class uses (11, 11, 10) (:data:`MROPE_CLASS_SECTIONS`);
* DeepSeek-V3.2: the main MLA attention rotates interleaved pairs (``apply_rotary_pos_emb_interleave``), its
  lightning indexer half-split (NeoX) pairs of the same table;
* DeepSeek-V4: ``rope_parameters`` keyed by ``main`` and ``compress`` (compressed attention has its own base), not by
  layer type;
* a multimodal config whose language model's RoPE lives in ``text_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the ``mrope_section`` each model class uses when the rope dict has none (transformers 5.18's modeling files)
MROPE_CLASS_SECTIONS = {
    name: sections
    for names, sections in (
        (("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"), [11, 11, 10]),
        (("qwen3_vl", "qwen3_vl_moe", "qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_omni_moe"), [24, 20, 20]),
        (("qwen2_vl", "qwen2_5_vl", "qwen2_5_omni", "qwen2_vl_text", "qwen2_5_vl_text"), [16, 24, 24]),
    )
    for name in names
}


def with_class_sections(text: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``(text, filled)``: the text config with its model class's default ``mrope_section`` filled in where an M-RoPE
    model's rope dict has none (transformers then uses that default)."""
    params = text.get("rope_parameters")
    sections = MROPE_CLASS_SECTIONS.get(str(text.get("model_type") or ""))
    if sections is None or not isinstance(params, Mapping) or "rope_type" not in params or "mrope_section" in params:
        return text, False
    return {**text, "rope_parameters": {**params, "mrope_section": list(sections)}}, True


def named_layouts(top: Mapping[str, Any], text: Mapping[str, Any], filled: bool) -> list[tuple[str, str, str, str]]:
    """``(key, label, shown, what ropekit does)`` for each named layout the config has."""
    rows = []
    model_type = str(text.get("model_type") or "")
    params = text.get("rope_parameters") or {}
    if top is not text and isinstance(top.get("text_config"), Mapping):
        rows.append(("text_config", "nested text_config", "the language model's RoPE is read from text_config",
                     "extend and eval read and write it there"))  # fmt: skip
    full = params.get("full_attention") if isinstance(params, Mapping) else None
    if isinstance(full, Mapping) and full.get("rope_type") == "proportional":
        partial = full.get("partial_rotary_factor", 1.0)
        rows.append(("gemma4_proportional", "proportional partial RoPE (Gemma 4)",
                     f"full-attention layers rotate the first {partial:g} of each head's pairs, frequencies over the "
                     "whole head; sliding layers plain RoPE", "its own rope_type 'proportional'"))  # fmt: skip
    if model_type.startswith("qwen3_5") and isinstance(params, Mapping) and "rope_type" in params:
        partial = params.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0))
        source = "its class default (11, 11, 10): the config has no mrope_section" if filled else "mrope_section"
        rows.append(("qwen3_5_mrope", "partial RoPE with interleaved M-RoPE (Qwen3.5)",
                     f"partial_rotary_factor {partial:g}; sections from {source}", "text positions: 1-D RoPE"))  # fmt: skip
    if model_type == "deepseek_v32" or (text.get("index_head_dim") and model_type.startswith("deepseek_v32")):
        rows.append(("deepseek_v32_indexer", "indexer RoPE (DeepSeek-V3.2)",
                     "main MLA attention: interleaved pairs; lightning indexer: half-split (NeoX) pairs",
                     "engines must rotate each with its own pairing"))  # fmt: skip
    if isinstance(params, Mapping) and {"main", "compress"} <= set(params):
        rows.append(("deepseek_v4_rope", "RoPE keyed by main / compress (DeepSeek-V4)",
                     f"main base {params['main'].get('rope_theta')}, compress base {params['compress'].get('rope_theta')}",
                     "read per key like layer types"))  # fmt: skip
    return rows
