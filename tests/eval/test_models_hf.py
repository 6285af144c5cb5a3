"""``HFEvalModel``: a transformers model saved with ``save_pretrained`` as an evaluation model: what it reads from the
folder, its logits against transformers' own (native and plain RoPE), its refusals and its out-of-memory errors.

Oracle: transformers itself on the same folder (logits at 1e-5), and the config the folder was written from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers.hf_logits import ATOL, BASE, HEAD_DIM, YARN_32_TO_128, gemma3, gpt2, ids_of, llama, logits, max_diff
from ropekit.config import RopeConfig
from ropekit.scaling import LinearScaling, YarnScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


@pytest.fixture(scope="module")
def yarn_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hf") / "llama-yarn"
    llama(YARN_32_TO_128, 128).save_pretrained(path)
    return path


def test_eval_model_reads_the_saved_directory(yarn_dir: Path) -> None:
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.loader import load_eval_model

    model = load_eval_model(yarn_dir)
    assert isinstance(model, HFEvalModel)
    assert model.train_length == 32  # YaRN's original length, not max_position_embeddings
    assert model.native_scaling == YarnScaling(factor=4.0, original_max_position_embeddings=32)
    assert model.rope == RopeConfig(HEAD_DIM, base=BASE)
    description = model.describe()
    assert description["architecture"] == "LlamaForCausalLM"
    assert description["native_scaling"] == "yarn" and description["tokenizer"] == "bytes"
    assert description["rope"] == {"head_dim": HEAD_DIM, "rotary_dim": HEAD_DIM, "base": BASE}
    assert model.encode(b"Az\xff").tolist() == [65, 122, 255]  # no tokenizer: byte ids


def test_eval_model_logits_match_transformers_for_native_and_plain(yarn_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.eval.hf_model import HFEvalModel

    model = HFEvalModel(yarn_dir)
    native = AutoModelForCausalLM.from_pretrained(yarn_dir, local_files_only=True).eval()
    plain = llama({"rope_type": "default", "rope_theta": BASE}, 128)
    plain.load_state_dict(native.state_dict())
    ids = ids_of(150, batch=1)
    model.set_scaling(model.native_scaling)
    assert model.logits(ids).dtype == torch.float32
    assert max_diff(model.logits(ids).double(), logits(native, ids)) < ATOL
    model.set_scaling(None)
    assert max_diff(model.logits(ids).double(), logits(plain, ids)) < ATOL


def test_device_map_auto_loads_through_accelerate(yarn_dir: Path) -> None:
    pytest.importorskip("accelerate")
    from ropekit.eval.hf_model import HFEvalModel

    mapped, direct = HFEvalModel(yarn_dir, device_map="auto"), HFEvalModel(yarn_dir)
    ids = ids_of(64, batch=1)
    assert max_diff(mapped.logits(ids).double(), direct.logits(ids).double()) < ATOL


def test_non_rope_directory_is_refused(tmp_path: Path) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    gpt2().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="GPT2LMHeadModel is not a RoPE model"):
        HFEvalModel(tmp_path)


def test_missing_directory_and_missing_config_are_file_errors(tmp_path: Path) -> None:
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.loader import load_eval_model

    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_eval_model(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        HFEvalModel(tmp_path)


def test_small_vocabulary_without_tokenizer_cannot_take_bytes(tmp_path: Path) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    llama({"rope_type": "default", "rope_theta": BASE}, vocab_size=100).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no tokenizer"):
        HFEvalModel(tmp_path).encode(b"hello")


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried"),
        MemoryError(),
    ],
)
def test_out_of_memory_becomes_a_clear_error(yarn_dir: Path, monkeypatch, error: BaseException) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    model = HFEvalModel(yarn_dir)

    def forward(*args, **kwargs):
        raise error

    monkeypatch.setattr(model.model.base_model, "forward", forward)
    with pytest.raises(ValueError, match=r"out of memory at sequence length 77 \(batch 2\)") as caught:
        model.logits(ids_of(77))
    assert caught.value.__cause__ is error


def test_other_runtime_errors_pass_through(yarn_dir: Path, monkeypatch) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    model = HFEvalModel(yarn_dir)

    def forward(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(model.model.base_model, "forward", forward)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        model.logits(ids_of(8))


def test_eval_model_reports_the_scaled_layer_types(tmp_path: Path) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    gemma3().save_pretrained(tmp_path)
    model = HFEvalModel(tmp_path)
    assert model.rope == RopeConfig(HEAD_DIM, base=1e6)
    model.set_scaling(LinearScaling(factor=2.0))
    description = model.describe()
    assert description["layer_types"] == ["full_attention", "sliding_attention"]
    assert description["scaled_layer_types"] == ["full_attention"]
    assert description["dtype"] == "float32" and description["attention"] == "sdpa"
