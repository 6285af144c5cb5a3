"""``inspect --model`` names the 2025–26 RoPE layouts, on the defaults of transformers' own config classes (the
oracle: what those classes and their modeling files say; each row checked against the config's values)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING

from ropekit.integrations.hf.model_layout import model_layout

pytestmark = pytest.mark.hf

CASES = {
    "gemma4": "gemma4_proportional",
    "gemma4_text": "gemma4_proportional",
    "qwen3_5": "qwen3_5_mrope",
    "qwen3_5_text": "qwen3_5_mrope",
    "deepseek_v32": "deepseek_v32_indexer",
    "deepseek_v4": "deepseek_v4_rope",
}


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_inspect_names_the_layout(model_type: str) -> None:
    config = CONFIG_MAPPING[model_type]().to_dict()
    layout = model_layout(config)
    assert CASES[model_type] in layout.data
    assert ("text_config" in layout.data) == isinstance(config.get("text_config"), dict)


def test_qwen3_5_without_sections_reads_its_class_default() -> None:
    from transformers.models.qwen3_5 import modeling_qwen3_5

    config = CONFIG_MAPPING["qwen3_5_text"]().to_dict()
    assert "mrope_section" not in config["rope_parameters"]
    layout = model_layout(config)
    source = Path(modeling_qwen3_5.__file__).read_text()
    assert 'get("mrope_section", [11, 11, 10])' in source  # the class's own default
    assert layout.data["mrope"] == {"sections": [11, 11, 10], "layout": "interleaved"}


def test_gemma4_proportional_partial_factor_is_the_configs() -> None:
    config = CONFIG_MAPPING["gemma4_text"]().to_dict()
    partial = config["rope_parameters"]["full_attention"]["partial_rotary_factor"]
    assert f"first {partial:g}" in model_layout(config).data["gemma4_proportional"]
