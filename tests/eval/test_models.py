"""The evaluation view of the tiny model: loading by path, byte encoding, and out-of-memory as a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ropekit.eval.loader import load_eval_model
from ropekit.eval.model_support import is_out_of_memory
from ropekit.eval.models import TinyEvalModel

TRAIN_LENGTH = 128  # of the conftest's tiny_checkpoint


def test_loads_a_tiny_checkpoint_as_a_tiny_eval_model(tiny_checkpoint: Path) -> None:
    model = load_eval_model(tiny_checkpoint)
    assert isinstance(model, TinyEvalModel)
    assert model.train_length == TRAIN_LENGTH
    assert model.rope.head_dim == 16 and model.rope.base == 10000.0 and model.native_scaling is None
    assert model.encode("añ".encode()).tolist() == [97, 0xC3, 0xB1]
    assert model.describe()["kind"] == "ropekit-tiny"


def test_missing_path_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere.*does not exist"):
        load_eval_model(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (torch.OutOfMemoryError("CUDA out of memory"), True),
        (MemoryError(), True),
        (RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"), True),
        (RuntimeError("size mismatch"), False),
        (ValueError("can't allocate memory"), False),
    ],
)
def test_is_out_of_memory(error: BaseException, expected: bool) -> None:
    assert is_out_of_memory(error) is expected


def test_tiny_model_out_of_memory_becomes_a_clear_error(tiny_checkpoint: Path, monkeypatch) -> None:
    model = load_eval_model(tiny_checkpoint)

    def forward(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")

    monkeypatch.setattr(model.model.blocks[0], "forward", forward)
    with pytest.raises(ValueError, match=r"out of memory at sequence length 300 \(batch 1\)"):
        model.logits(torch.zeros(1, 300, dtype=torch.long))


@pytest.mark.parametrize(("dtype", "rel"), [("float32", 0.0), ("bfloat16", 2e-2), ("float16", 2e-3)])
def test_dtype_is_applied_and_stated(tiny_checkpoint: Path, dtype: str, rel: float) -> None:
    """Oracle: the float32 losses; bf16 keeps 8 bits of mantissa, fp16 11, so the mean loss moves by about that."""
    ids = torch.randint(0, 256, (129,), generator=torch.Generator().manual_seed(0))
    reference = load_eval_model(tiny_checkpoint).token_losses(ids).mean()
    model = load_eval_model(tiny_checkpoint, dtype=dtype)
    assert model.describe()["dtype"] == dtype and next(model.model.parameters()).dtype == getattr(torch, dtype)
    assert float(model.token_losses(ids).mean()) == pytest.approx(float(reference), rel=rel, abs=1e-6)


def test_a_bad_dtype_is_refused_before_loading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dtype must be one of auto, bfloat16, float16, float32, got 'fp8'"):
        load_eval_model(tmp_path / "nowhere", dtype="fp8")
