"""Training: loss goes down, batches are deterministic, resume continues exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ropekit.model import TinyConfig, TinyLM, load
from ropekit.model.corpus import heldout_bytes
from ropekit.model.train import TrainConfig, learning_rate, make_batch, train

_NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")

SMALL = TinyConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64, train_length=64)
CORPUS = np.frombuffer(heldout_bytes(), dtype=np.uint8)


def _loss(model: TinyLM, batch: torch.Tensor) -> float:
    with torch.no_grad():
        logits = model(batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)).item()


def test_twenty_steps_lower_the_loss(tmp_path):
    settings = TrainConfig(steps=20, batch_size=8, warmup_steps=2, lr=3e-3, checkpoint_every=10)
    probe = make_batch(CORPUS, SMALL, settings, 10_000)
    torch.manual_seed(settings.seed)
    before = _loss(TinyLM(SMALL), probe)
    train(SMALL, settings, tmp_path / "run", corpus=CORPUS, progress=False)
    after = _loss(load(tmp_path / "run"), probe)
    assert after < before - 0.5


def test_batches_are_a_function_of_seed_and_step():
    settings = TrainConfig(batch_size=4)
    assert torch.equal(make_batch(CORPUS, SMALL, settings, 3), make_batch(CORPUS, SMALL, settings, 3))
    assert not torch.equal(make_batch(CORPUS, SMALL, settings, 3), make_batch(CORPUS, SMALL, settings, 4))


def test_resume_reproduces_an_uninterrupted_run(tmp_path, monkeypatch):
    import ropekit.model.train as train_module

    settings = TrainConfig(steps=12, batch_size=4, warmup_steps=2, checkpoint_every=6)
    train(SMALL, settings, tmp_path / "a", corpus=CORPUS, progress=False)

    real_make_batch = train_module.make_batch

    def interrupted(corpus, config, train_config, step, **kwargs):
        if step == 8:
            raise KeyboardInterrupt
        return real_make_batch(corpus, config, train_config, step, **kwargs)

    monkeypatch.setattr(train_module, "make_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(SMALL, settings, tmp_path / "b", corpus=CORPUS, progress=False)
    monkeypatch.setattr(train_module, "make_batch", real_make_batch)
    train(SMALL, settings, tmp_path / "b", corpus=CORPUS, progress=False)  # resumes from the step-6 checkpoint
    a, b = load(tmp_path / "a"), load(tmp_path / "b")
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6, msg=name)


def test_learning_rate_warms_up_and_decays():
    settings = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert learning_rate(settings, 0, 0.0) == 0.1
    assert learning_rate(settings, 50, 0.5) == 0.1 + 0.9 * 0.5
    assert abs(learning_rate(settings, 99, 1.0) - 0.1) < 1e-12


@pytest.mark.parametrize(
    ("device", "message"),
    [("abacus", "device must be a torch device"), pytest.param("cuda", "CUDA is not available", marks=_NO_CUDA)],
)
def test_a_bad_device_is_a_clear_error(tmp_path, device, message):
    with pytest.raises(ValueError, match=message):
        train(SMALL, TrainConfig(steps=1, device=device), tmp_path, corpus=CORPUS, progress=False)


def test_corpus_root_can_be_pointed_elsewhere(tmp_path, monkeypatch):
    from ropekit.model.corpus import select_files, stdlib_root

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n" * 400)
    monkeypatch.setenv("ROPEKIT_CORPUS_ROOT", str(tmp_path))
    assert stdlib_root() == tmp_path
    assert [f.relpath for f in select_files()] == [f.relpath for f in select_files(tmp_path)]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("steps", 0, ValueError),
        ("steps", -1, ValueError),
        ("steps", 2.5, TypeError),
        ("batch_size", 0, ValueError),
        ("lr", 0.0, ValueError),
        ("lr", -1.0, ValueError),
        ("lr", float("inf"), ValueError),
        ("lr", float("nan"), ValueError),
        ("min_lr_ratio", 1.5, ValueError),
        ("warmup_steps", -1, ValueError),
        ("weight_decay", -0.1, ValueError),
        ("answer_weight", 0.0, ValueError),
        ("answer_weight", float("nan"), ValueError),
        ("task_fraction", 2.0, ValueError),
        ("task_fraction", float("nan"), ValueError),
        ("seed", -1, ValueError),
        ("minutes", 0.0, ValueError),
        ("minutes", -1.0, ValueError),
        ("minutes", float("nan"), ValueError),
        ("checkpoint_every", 0, ValueError),
        ("device", 3, TypeError),
        ("device", "", TypeError),
    ],
)
def test_train_config_is_validated(field, value, error):
    """a bad setting is an error naming the field, before any training."""
    with pytest.raises(error, match=field):
        TrainConfig(**{field: value})


def test_train_config_stores_plain_numbers():
    settings = TrainConfig(steps=np.int64(5), lr=np.float32(0.5), minutes=2)
    assert type(settings.steps) is int and type(settings.lr) is float and type(settings.minutes) is float
    assert (settings.steps, settings.lr, settings.minutes) == (5, 0.5, 2.0)


def test_a_bad_device_leaves_no_output_folder(tmp_path):
    with pytest.raises(ValueError, match="device"):
        train(SMALL, TrainConfig(steps=1, device="abacus"), tmp_path / "run", corpus=CORPUS, progress=False)
    assert not (tmp_path / "run").exists()
