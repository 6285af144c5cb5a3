"""The output head, one module for evaluation and training: logits, loss and gradients equal transformers' own.

Oracle: transformers itself — ``model(input_ids, labels=input_ids)`` for the loss and its backward pass for the
gradients, ``model(input_ids).logits`` for the head. Each case is a small random model built from a transformers
config in code (nothing downloaded), one per final-logit transform transformers applies after its output head:
Cohere's ``logit_scale`` (multiplies), Granite's ``logits_scaling`` (divides), Gemma 2/3's soft-capping, and Llama
with none. Each transform must matter: the loss without it differs from transformers' by far more than the
tolerance, so the comparison has teeth.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers.hf_models import LOGIT_TRANSFORMS, random_hf_model

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

VOCAB = 300  # the factory's default vocabulary


@pytest.fixture
def build():
    """``build(name)``: the small random model of ``name``'s final-logit transform, 4 heads of 16, initialised at 0.05
    and its matrices scaled by 3 so that its logits are far from uniform and positions and logit transforms move them."""
    return lambda name: random_hf_model(name, head_dim=16, initializer_range=0.05, scale=3.0, **LOGIT_TRANSFORMS[name])


def ids_of(batch: int = 2, length: int = 50, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunk_positions", [7, None], ids=["chunks-of-7", "one-chunk"])
@pytest.mark.parametrize("name", list(LOGIT_TRANSFORMS))
def test_training_loss_and_gradients_equal_transformers(build, name: str, chunk_positions: int | None) -> None:
    """``ChunkedCausalLM`` (the fine-tuning loss) gives transformers' ``labels=`` loss and every parameter's
    gradient, with the head in chunks of 7 positions (checkpointed) and in one piece."""
    from ropekit.finetune.loss import ChunkedCausalLM

    model = build(name)
    ids = ids_of()
    theirs = model(input_ids=ids, labels=ids).loss
    theirs.backward()
    expected = grads(model)
    model.zero_grad()
    chunk_bytes = chunk_positions * 4 * VOCAB * ids.shape[0] if chunk_positions else 2**30
    ours = ChunkedCausalLM(model, chunk_bytes=chunk_bytes)(ids)
    ours.backward()
    got = grads(model)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    assert got.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-6, msg=f"{name}: gradient of {key}")
    if name != "llama":  # the transform matters: without it the loss is far from transformers'
        with torch.no_grad():
            hidden = model.get_decoder()(input_ids=ids[:, :-1]).last_hidden_state
            raw = F.cross_entropy(model.lm_head(hidden).flatten(0, 1), ids[:, 1:].flatten())
        assert abs(float(raw - theirs)) > 1e-2


def doubling(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with a final-logit transform ropekit does not know (its forward doubles the logits)."""
    forward = model.forward

    def doubled(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.logits = out.logits * 2
        return out

    model.forward = doubled
    return model


@pytest.mark.parametrize("name", list(LOGIT_TRANSFORMS))
def test_head_check_accepts_the_known_transforms(build, name: str) -> None:
    from ropekit.integrations.hf.output_head import check_head

    model = build(name).train()
    check_head(model)
    assert model.training  # the mode is restored


def test_unknown_transform_is_refused_before_training(build, tmp_path) -> None:
    pytest.importorskip("accelerate")
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.finetune.train import train
    from ropekit.integrations.hf.output_head import check_head

    with pytest.raises(ValueError, match="transforms the output logits"):
        check_head(doubling(build("llama")))
    windows = ids_of(4, 16)
    steps = []
    settings = FinetuneSettings(target_length=16, steps=1, checkpoint_every=0, mixed_precision="no")
    with pytest.raises(ValueError, match=r"transforms the output logits.*cannot train on its loss"):
        train(
            lambda: doubling(build("llama")),
            windows,
            windows[:1],
            settings,
            tmp_path,
            on_step=steps.append,
            progress=False,
        )
    assert not steps and not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_loss_with_skipping_position_ids_equals_transformers(build, name: str) -> None:
    """position ids flow through the loss wrapper — PoSE ids (two chunks, one skip) give transformers'
    ``model(input_ids, position_ids=..., labels=...)`` loss and gradients, and differ from the loss at plain positions
    (the ids reach the model). Without a mask or a cache transformers would read the skip as a document boundary."""
    from ropekit.finetune.loss import ChunkedCausalLM
    from ropekit.finetune.pose import PoseSettings

    model = build(name)
    ids = ids_of()
    positions = PoseSettings(window=ids.shape[1], target_length=110, seed=1).batch(torch.arange(2))
    assert int(positions.diff().max()) > 1
    theirs = model(input_ids=ids, position_ids=positions, labels=ids).loss  # with a cache: no packed-document guess
    theirs.backward()
    expected = grads(model)
    model.zero_grad()
    ours = ChunkedCausalLM(model, chunk_bytes=7 * 4 * VOCAB * 2)(ids, position_ids=positions)
    ours.backward()
    got = grads(model)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-6, msg=f"{name}: gradient of {key}")
    with torch.no_grad():
        plain = ChunkedCausalLM(model)(ids)
        packed = model(input_ids=ids, position_ids=positions, labels=ids, use_cache=False).loss  # the trap
    assert abs(float(plain - theirs)) > 1e-3
    assert abs(float(packed - theirs)) > 1e-3
