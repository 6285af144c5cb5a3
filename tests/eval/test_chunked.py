"""Chunked scoring (body once, output head and loss in chunks of positions) equals scoring from full logits.

Oracles: the model's own full forward (``model(ids)`` for the tiny model, transformers' ``model(input_ids).logits``
for small random Llama, Gemma 2, Gemma 3, Cohere and Granite models built in code), with the loss taken by one float32
cross-entropy over all positions and the argmax over all positions. Gemma's final-logit soft-capping is set low
(0.5), Cohere's ``logit_scale`` to 0.25 and Granite's ``logits_scaling`` to 4, so that leaving the transform out
would change the losses by far more than the tolerance; that is checked too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers.hf_models import LOGIT_TRANSFORMS, random_hf_model
from ropekit.eval.loader import load_eval_model
from ropekit.eval.models import TinyEvalModel
from ropekit.eval.passkey import episode_batch_correct
from ropekit.eval.perplexity import perplexity_at
from ropekit.integrations.hf.output_head import LOGIT_TRANSFORM_KEYS, chunk_positions
from ropekit.synthetic.passkey import Episode

VOCAB = 300
#: float32 losses of the same logits in a different chunking agree to rounding
ATOL = 1e-5


def full_losses(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """One float32 cross-entropy over all positions of ``(seq, vocab)`` logits predicting ``ids[1:]``."""
    return F.cross_entropy(logits.float(), ids[1:], reduction="none").double()


def test_chunk_positions_keeps_one_chunk_near_the_budget() -> None:
    assert chunk_positions(49152, 64 * 2**20) == 341  # 341 · 49152 · 4 bytes ≈ 64 MiB
    assert chunk_positions(10**9, 1) == 1


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_tiny_model_chunked_losses_equal_full_logits(tiny_checkpoint: Path, chunk: int | None) -> None:
    model = TinyEvalModel(tiny_checkpoint)
    model.chunk = chunk
    ids = torch.randint(0, 256, (200,), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        reference = full_losses(model.model(ids[None, :-1])[0], ids)
    torch.testing.assert_close(model.token_losses(ids), reference, rtol=0, atol=ATOL)


def test_tiny_model_predictions_equal_full_argmax(tiny_checkpoint: Path) -> None:
    model = TinyEvalModel(tiny_checkpoint)
    ids = torch.randint(0, 256, (3, 90), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model.model(ids).argmax(-1)[:, -6:]
    assert torch.equal(model.predict_last(ids, 6), reference)


# ---- transformers models ---------------------------------------------------------------------------------------

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("quiet_transformers")  # tests/conftest.py


def build(name: str):
    """The small random model of ``name``'s final-logit transform: 4 heads of 16, initialised at 0.05."""
    return random_hf_model(name, head_dim=16, initializer_range=0.05, **LOGIT_TRANSFORMS[name]).eval()


@pytest.fixture(scope="module", params=["llama", "gemma2", "gemma3", "cohere", "granite"])
def saved(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chunked") / request.param
    build(request.param).save_pretrained(path)
    return path


@pytest.mark.hf
@pytest.mark.parametrize("chunk", [None, 5])
def test_transformers_chunked_losses_equal_full_logits(saved: Path, chunk: int | None) -> None:
    model = load_eval_model(saved)
    model.chunk = chunk
    ids = torch.randint(3, VOCAB, (100,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = model.model(input_ids=ids[None, :-1]).logits[0]  # transformers' own forward: (seq, vocab)
    reference = full_losses(logits, ids)
    torch.testing.assert_close(model.token_losses(ids), reference, rtol=0, atol=ATOL)
    config = model.model.config
    if any(getattr(config, key, None) not in (None, 1.0) for key in LOGIT_TRANSFORM_KEYS):
        # the transform matters: the raw head output scores very differently
        with torch.no_grad():
            raw = model.model.lm_head(model.hidden_states(ids[None, :-1]))[0]
        assert float((full_losses(raw, ids) - reference).abs().max()) > 100 * ATOL


@pytest.mark.hf
def test_transformers_predictions_and_perplexity_equal_full_logits(saved: Path) -> None:
    model = load_eval_model(saved)
    ids = torch.randint(3, VOCAB, (2, 60), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = model.model(input_ids=ids).logits  # (batch, seq, vocab)
    assert torch.equal(model.predict_last(ids, 5), logits.argmax(-1)[:, -5:])
    episodes = [Episode(row.numpy(), 10, "x", 4) for row in ids]
    with torch.no_grad():
        expected = episode_batch_correct(lambda batch: model.model(batch).logits, episodes)
    assert episode_batch_correct(model, episodes) == expected
    data = torch.randint(3, VOCAB, (130,), generator=torch.Generator().manual_seed(4))
    chunked = perplexity_at(model, data, 64, 32)
    with torch.no_grad():
        full = perplexity_at(lambda batch: model.model(input_ids=batch).logits, data, 64, 32)
    assert chunked.perplexity == pytest.approx(full.perplexity, rel=1e-6)
    assert chunked.beyond == pytest.approx(full.beyond, rel=1e-6)


@pytest.mark.hf
def test_unknown_logit_transform_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ropekit.eval.hf_model import HFEvalModel

    build("llama").save_pretrained(tmp_path)
    forward = transformers.LlamaForCausalLM.forward

    def doubled(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        out.logits = out.logits * 2  # a transform ropekit does not know
        return out

    monkeypatch.setattr(transformers.LlamaForCausalLM, "forward", doubled)
    with pytest.raises(ValueError, match="transforms the output logits"):
        HFEvalModel(tmp_path)
