"""llama.cpp's column (evidence/llamacpp_matrix): what a family's released folder has that llama.cpp's converter reads,
given to a tiny model, is the same model to transformers (the dressed folder's logits are the saved folder's, bit for
bit; renamed tensors load where they were); and each architecture of :data:`released.RELEASED`, built with the keys
and the tokenizer its release ships, is converted by llama.cpp's own converter and loaded by llama.cpp, which refused
or aborted on the config class's defaults. The oracle: llama.cpp's own load, prefill and decode (a child process), and
for the SentencePiece tokenizer, SentencePiece's own reading of the file."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from helpers.llamacpp_convert import (
    SENTENCEPIECE_SPECIALS,
    byte_tokenizer,
    convert,
    llama_sentencepiece_tokenizer,
    missing,
    sentencepiece_tokenizer,
)

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "engines_matrix"))
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "llamacpp_matrix"))

import released
from matrix import tiny_folder

RUNNER = Path(released.__file__).with_name("run.py")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

#: the architectures measured by default (each a different cause: key/value heads and MLP width,
#: a Llama 4 layer period, SentencePiece); the rest under ``-m slow``
FAST = ("phi", "llama4_text", "gemma3_text")
#: the architectures whose release the converter converts here (the others say why not: ``Released.unconvertible``)
CONVERTIBLE = [t for t, entry in released.RELEASED.items() if not entry.unconvertible]


def _runner():
    """evidence/llamacpp_matrix/run.py as a module (its name is shared with the engines matrix's runner)."""
    spec = importlib.util.spec_from_file_location("llamacpp_run", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sentencepiece_tokenizer_is_read_by_sentencepiece(tmp_path: Path) -> None:
    """Gemma's specials at ids 0-3, then one piece per byte (byte fallback), as SentencePiece itself reads them."""
    sentencepiece = pytest.importorskip("sentencepiece")
    sentencepiece_tokenizer(tmp_path)
    model = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    assert [model.id_to_piece(i) for i in range(4)] == list(SENTENCEPIECE_SPECIALS)
    assert (model.pad_id(), model.eos_id(), model.bos_id(), model.unk_id()) == (0, 1, 2, 3)
    text = "héllo"
    assert model.encode(text) == [4 + b for b in text.encode()]  # no merges: every byte its <0xNN> piece
    assert model.decode(model.encode(text)) == text


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """model type → its GGUF file and why there is none; each group (:data:`FAST`, the rest) built and converted in
    one child process (the converter's imports once) the first time one of its types is asked for."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    work, done, runner = tmp_path_factory.mktemp("released"), {}, _runner()

    def get(model_type: str) -> tuple[Path, str | None]:
        if model_type not in done:
            group = [t for t in CONVERTIBLE if (t in FAST) == (model_type in FAST)]
            pairs = [(runner.build(t, work / t), work / f"{t}.gguf") for t in group]
            results = convert(pairs)
            done.update({t: (gguf, results[gguf]) for t, (_, gguf) in zip(group, pairs, strict=True)})
        return done[model_type]

    return get


@pytest.mark.llamacpp
@pytest.mark.parametrize(
    "model_type",
    [t if t in FAST else pytest.param(t, marks=pytest.mark.slow) for t in sorted(CONVERTIBLE)],
)
def test_released_shape_converts_and_llamacpp_loads_it(converted, model_type: str) -> None:
    from ropekit.eval.backends.llamacpp_probe import probe

    gguf, why = converted(model_type)
    assert why is None
    assert probe(gguf) is None


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

    saved = tiny_folder(model_type, tmp_path / "saved", released.RELEASED[model_type].keys or None)
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


def test_the_llama_sentencepiece_tokenizer_is_one_vocabulary(tmp_path: Path) -> None:
    from sentencepiece import SentencePieceProcessor
    from transformers import AutoTokenizer

    byte_tokenizer(tmp_path)
    llama_sentencepiece_tokenizer(tmp_path)
    processor = SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert [processor.id_to_piece(i) for i in (0, 1, 2, 3, 258)] == ["<unk>", "<s>", "</s>", "<0x00>", "<0xFF>"]
    assert processor.is_byte(13) and processor.is_control(1) and processor.is_unknown(0)
    text = "héllo\nwörld"
    expected = [3 + byte for byte in ("▁" + text.replace(" ", "▁")).encode()]  # byte fallback: every byte its piece
    assert processor.encode(text) == expected
    assert tokenizer(text, add_special_tokens=False).input_ids == expected
