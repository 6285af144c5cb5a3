"""The llama.cpp matrix's released layouts (evidence/llamacpp_matrix/released.py): what a family's released folder has
that llama.cpp's converter reads, given to a tiny model. The oracle: transformers computes the same model from the
dressed folder as from the folder it saved (legacy keys agree with what it derives, renamed tensors load where they
were), and the SentencePiece tokenizer is one vocabulary to sentencepiece and to transformers."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "engines_matrix"))
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "llamacpp_matrix"))

import released
from matrix import tiny_folder

from helpers.llamacpp_convert import byte_tokenizer, sentencepiece_tokenizer

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

IDS = [(7 * i + 3) % 256 for i in range(48)]


def _logits(folder: Path):
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([IDS])).logits


@pytest.mark.parametrize("model_type", ["gpt_neox", "hy_v4", "glm4_moe_lite", "minimax_m2", "solar_open"])
def test_the_released_layout_is_the_same_model_to_transformers(model_type: str, tmp_path: Path) -> None:
    import torch

    saved = tiny_folder(model_type, tmp_path / "saved", released.BUILD.get(model_type))
    byte_tokenizer(saved)
    dressed = shutil.copytree(saved, tmp_path / "dressed")
    released.dress(model_type, dressed)
    torch.testing.assert_close(_logits(dressed), _logits(saved), rtol=0, atol=0)


def test_tensor_names_are_the_releases(tmp_path: Path) -> None:
    """HY-V4: the names gguf-py maps for tencent's checkpoint, none of transformers' reversed ones."""
    from safetensors import safe_open

    folder = tiny_folder("hy_v4", tmp_path / "hy_v4")
    released.dress("hy_v4", folder)
    with safe_open(folder / "model.safetensors", "pt") as file:
        names = set(file.keys())
    assert {"model.hc_head.hc_head_base", "model.layers.0.hc_attn_layer.hc_pre.hc_fn"} <= names
    assert "model.layers.0.mlp.gate_proj.weight" in names and "model.layers.0.self_attn.linear_gate.weight" in names
    assert not [
        name for name in names if re.match(r"model\.(layers\.\d+\.)?hc_pre\.", name) or "mlp.linear_gate" in name
    ]


def test_the_sentencepiece_tokenizer_is_one_vocabulary(tmp_path: Path) -> None:
    from sentencepiece import SentencePieceProcessor
    from transformers import AutoTokenizer

    byte_tokenizer(tmp_path)
    sentencepiece_tokenizer(tmp_path)
    processor = SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert [processor.id_to_piece(i) for i in (0, 1, 2, 3, 258)] == ["<unk>", "<s>", "</s>", "<0x00>", "<0xFF>"]
    assert processor.is_byte(13) and processor.is_control(1) and processor.is_unknown(0)
    text = "héllo\nwörld"
    expected = [3 + byte for byte in ("▁" + text.replace(" ", "▁")).encode()]  # byte fallback: every byte its piece
    assert processor.encode(text) == expected
    assert tokenizer(text, add_special_tokens=False).input_ids == expected
