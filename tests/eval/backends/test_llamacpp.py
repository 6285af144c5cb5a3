"""``--engine llamacpp``: SmolLM2's GGUF file evaluated by llama.cpp against ropekit's torch path on the same file.

The oracle is ropekit's torch path on the dequantised weights (float32) and llama.cpp's own full recomputation: the
samples are the same token ids, the answers the same, and perplexity within the 1% that the llama.cpp parity tests
(``tests/integrations/gguf/test_llamacpp.py``) calibrated for the Q4_1 file (12.886 against 12.803 at 1×: 0.65%).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("llama_cpp")

#: slow: transformers reads the file's tokenizer (tens of seconds), the torch path decodes 1024-token samples
pytestmark = [pytest.mark.llamacpp, pytest.mark.real, pytest.mark.hf, pytest.mark.slow]

LENGTH = 1024
TASKS = ("niah_single_1", "niah_multikey_1", "vt")
#: the perplexity ratio the parity tests allow between llama.cpp on the Q4_1 file and the dequantised weights
PPL_RTOL = 0.01


@pytest.fixture(scope="module")
def engine(smollm2_path):
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    model = LlamaCppEvalModel(smollm2_path)
    yield model
    model.close()


@pytest.fixture(scope="module")
def torch_model(smollm2_path):
    from ropekit.eval.loader import load_eval_model

    return load_eval_model(smollm2_path)


@pytest.fixture(scope="module")
def settings():
    from ropekit.eval.tasks.run import TaskSettings

    return TaskSettings(methods=("none",), tasks=TASKS, lengths=(LENGTH,), samples=2)


@pytest.mark.slow
def test_samples_are_the_torch_paths_token_ids(engine, torch_model, settings) -> None:
    from ropekit.eval.tasks.run import make_samples

    ours, theirs = make_samples(engine, settings), make_samples(torch_model, settings)
    assert engine.train_length == torch_model.train_length == 8192
    assert engine.stop_tokens == torch_model.stop_tokens and engine.separator == torch_model.separator
    for key, samples in ours.items():
        for a, b in zip(samples, theirs[key], strict=True):
            assert np.array_equal(a.context, b.context)
            assert all(np.array_equal(p.ids, q.ids) for p, q in zip(a.questions, b.questions, strict=True))


@pytest.mark.slow
def test_answers_equal_the_torch_path(engine, torch_model, settings) -> None:
    """Every question scores the same, and the greedy tokens agree over the canonical answer's length (beyond it,
    free generation after a right answer may part: Q4_1 against float32 weights)."""
    from ropekit.eval.tasks.decode import greedy_answer
    from ropekit.eval.tasks.run import make_samples
    from ropekit.eval.tasks.scoring import score

    samples = make_samples(torch_model, settings)
    stop = torch_model.stop_tokens
    for group in samples.values():
        for sample in group:
            decoders = [m.decoder() for m in (engine, torch_model)]
            for decoder in decoders:
                decoder.extend(torch.from_numpy(sample.context), keep=0)
            for question in sample.questions:
                answers = [greedy_answer(d, question.ids, question.target, question.budget, stop) for d in decoders]
                span = max(1, len(question.target))
                assert answers[0].tokens[:span] == answers[1].tokens[:span]
                scored = [score(m.detokenize(a.tokens), question.answers, question.metric) for m, a in zip(
                    (engine, torch_model), answers, strict=True)]  # fmt: skip
                assert scored[0] == scored[1]


def test_decoder_crop_equals_a_fresh_prefill(engine, smollm2_path) -> None:
    """llama.cpp's cache cut back and fed again gives the logits of a fresh context fed the same tokens."""
    ids = torch.arange(1000, 1300)
    decoder = engine.decoder()
    decoder.extend(ids[:200], keep=0)
    decoder.extend(ids[200:260], keep=1)
    decoder.crop(200)
    again = decoder.extend(ids[200:300], keep=100)
    fresh = engine.decoder().extend(ids, keep=100)
    assert again.shape == (100, engine.vocab_size)
    assert torch.allclose(again, fresh, atol=1e-3)


@pytest.mark.slow
def test_perplexity_within_the_calibrated_tolerance(engine, torch_model) -> None:
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.eval.sweep import evaluation_text

    ids, _ = evaluation_text(torch_model)
    assert torch.equal(ids[:4096], evaluation_text(engine)[0][:4096])
    ours = perplexity_at(engine, ids, 512, engine.train_length, max_tokens=1024)
    theirs = perplexity_at(torch_model, ids, 512, torch_model.train_length, max_tokens=1024)
    assert ours.tokens == theirs.tokens == 1024
    assert abs(ours.perplexity / theirs.perplexity - 1) < PPL_RTOL


def test_methods_run_through_llamacpps_options(engine) -> None:
    """YaRN and a base change are load-time options; Llama 3's per-pair factors and Self-Extend are skipped."""
    from ropekit.eval.methods import attention_for, scaling_for

    train = engine.train_length
    engine.set_scaling(scaling_for("yarn", factor=2.0, train_length=train, native=None))
    assert engine.options["rope_scaling_type"] == 2 and engine.options["rope_freq_scale"] == 0.5
    engine.set_scaling(scaling_for("ntk", factor=2.0, train_length=train, native=None))
    assert engine.options["rope_scaling_type"] == 0 and engine.options["rope_freq_base"] > engine.rope.base
    with pytest.raises(LookupError, match=r"llama\.cpp"):
        engine.set_scaling(scaling_for("llama3", factor=2.0, train_length=train, native=None))
    with pytest.raises(LookupError, match="no attention method"):
        engine.set_attention(attention_for("self_extend", train_length=train, length=2 * train, params={}))
    engine.set_scaling(None)  # the plain file's own RoPE: run as it is
    assert engine.options == {}


#: the llama.cpp parity tolerances for logits against the dequantised float32 weights at 1x (docs/llamacpp.md)
LOGITS_MEAN, LOGITS_MAX = 0.25, 4.0


def other_setting(engine, flash_attn: bool, batch: int):
    """``engine`` with another llama.cpp setting: the same file and tokenizer (reading it again costs tens of s)."""
    import copy

    other = copy.copy(engine)
    other.flash_attn, other.batch, other.llm, other._made = flash_attn, batch, None, None
    return other


def test_batch_keeps_the_logits(engine) -> None:
    """The input fed in several ``llama_decode`` calls of a smaller ``n_batch`` gives the default setting's logits."""
    ids = torch.arange(1000, 1300)
    reference = engine.decoder().extend(ids, keep=200)
    other = other_setting(engine, False, 128)
    try:
        logits = other.decoder().extend(ids, keep=200)
        assert other.llm.n_batch == 128 and other.describe()["batch"] == 128
    finally:
        other.close()
    assert torch.allclose(logits, reference, atol=1e-3)


@pytest.mark.parametrize("batch", [512, 128])
def test_flash_attention_within_the_parity_tolerance(engine, torch_model, batch) -> None:
    """llama.cpp's flash attention (its CPU kernel takes q·k in f16) moves the logits by about as much as the Q4_1
    weights do (mean 0.15 from the default setting on this input), so it is held to the parity tolerance against the
    float32 torch path, as the default setting is."""

    ids = torch.arange(1000, 1300)
    exact = torch_model.decoder().extend(ids, keep=200).float()
    other = other_setting(engine, True, batch)
    try:
        logits = other.decoder().extend(ids, keep=200)
        assert other.describe()["flash_attn"] is True
    finally:
        other.close()
    default = engine.decoder().extend(ids, keep=200)
    for got in (logits, default):
        assert (got - exact).abs().mean() < LOGITS_MEAN and (got - exact).abs().max() < LOGITS_MAX
