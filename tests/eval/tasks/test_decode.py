"""The fast path (shared prefill, teacher-forced shortcut, cached greedy decoding) against plain greedy decoding:
transformers' own ``generate(do_sample=False)`` on a small random Llama, and full recomputation on the tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.hf_models import byte_llama, random_hf_model
from ropekit.eval.tasks.decode import FullDecoder, HFDecoder, TinyDecoder, greedy_answer
from ropekit.model import TinyConfig, TinyLM


class _HeadOnly:
    """The tiny model as FullDecoder sees it (hidden states and the tied head)."""

    def __init__(self, lm):
        self.lm = lm

    def hidden_states(self, ids):
        return self.lm.hidden_states(ids)

    def output_logits(self, hidden):
        return torch.nn.functional.linear(hidden, self.lm.embed.weight)


@pytest.fixture(autouse=True)
def one_thread():
    """Small models step faster on one thread (and far faster on a loaded machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_lm():
    torch.manual_seed(0)
    lm = TinyLM(TinyConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, train_length=64)).eval()
    with torch.no_grad():
        for p in lm.parameters():
            if p.dim() == 2:
                p.mul_(5.0)  # peaked predictions, so greedy paths differ between prompts
    return lm


def _reference(logits_of, prompt, budget):
    """Greedy decoding by a full forward of the whole sequence at every step (``logits_of(ids)``: the logits)."""
    ids = list(prompt)
    for _ in range(budget):
        with torch.no_grad():
            ids.append(int(logits_of(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt) :]


def _check_questions(model, seed: int, vocab: int, expected_of) -> None:
    """Two questions after one shared prefill of a random 120-token context, each with no target, a target that
    departs at its 4th token and the right target: the cached answer is ``expected_of(context, question)`` and the
    cache is cut back to the context after each."""
    rng = np.random.default_rng(seed)
    context = rng.integers(0, vocab, 120)
    decoder = HFDecoder(_Wrapped(model))
    decoder.extend(torch.from_numpy(context), keep=0)
    for q in range(2):
        question = rng.integers(0, vocab, 6 + q)
        expected = expected_of(context, question)
        for target in ([], [*expected[:3], (expected[3] + 1) % vocab], expected):
            answer = greedy_answer(decoder, question, np.array(target, dtype=np.int64), 8)
            assert answer.tokens == expected
            assert decoder.length == len(context)


@pytest.mark.parametrize("scaling", [None, "yarn", "self_extend", "yarn+self_extend", "rerope", "dual_chunk", "sinks"])
def test_tiny_cached_decoding_matches_recomputation(tiny_lm, scaling):
    """The oracle is the full forward of the whole sequence at every step, with the same method (the attention
    methods' full forward is itself checked against the paper-definition oracles in tests/attention)."""
    from ropekit.eval.methods import attention_for, scaling_for, split_method

    rope = split_method(scaling)[0] if scaling else None
    tiny_lm.set_scaling(scaling_for(rope, factor=4.0, train_length=64) if rope else None)
    tiny_lm.set_attention(attention_for(scaling, train_length=64, length=128) if scaling else None)
    rng = np.random.default_rng(0)
    context = rng.integers(0, 256, 90)
    decoders = [TinyDecoder(tiny_lm), FullDecoder(_HeadOnly(tiny_lm))]
    for decoder in decoders:
        decoder.extend(torch.from_numpy(context), keep=0)
    for q in range(2):  # several questions after one prefill
        question = rng.integers(0, 256, 5 + q)
        expected = _reference(tiny_lm, np.concatenate([context, question]).tolist(), 8)
        for target in ([], [*expected[:4], (expected[4] + 1) % 256], expected[:8]):
            for decoder in decoders:
                answer = greedy_answer(decoder, question, np.array(target, dtype=np.int64), 8)
                assert answer.tokens == expected[: len(answer.tokens)]
                assert len(answer.tokens) == 8  # the full budget or, with the shortcut, the whole (8-token) target
                assert answer.shortcut == (len(target) == 8)
                assert decoder.length == len(context)  # left as it was: the next question shares the prefill
    tiny_lm.set_scaling(None)
    tiny_lm.set_attention(None)


@pytest.mark.hf
def test_matches_transformers_generate():
    model = _random_model("llama")

    def generated(context, question):
        prompt = torch.from_numpy(np.concatenate([context, question]))[None]
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=8,
            eos_token_id=None,
            pad_token_id=0,
        )
        return out[0, prompt.shape[1] :].tolist()

    _check_questions(model, seed=1, vocab=298, expected_of=generated)


def test_settled_hand_examples():
    from ropekit.eval.tasks.decode import settled

    out = list(b"12345")
    assert not settled(out, ["3456789"], budget=9)  # "345" begins it, 4 more bytes fit in the 4 left
    assert settled(out, ["3456789"], budget=8)  # only 3 left
    assert settled(out, ["234"], budget=5) and settled(out, ["234"], budget=50)  # found: nothing can change
    assert not settled(out, ["234", "999"], budget=8) and settled(out, ["234", "999"], budget=7)


def test_early_stop_keeps_the_score(tiny_lm):
    from ropekit.eval.tasks.scoring import string_match_all

    rng = np.random.default_rng(3)
    for _ in range(6):
        decoder = TinyDecoder(tiny_lm)
        decoder.extend(torch.from_numpy(rng.integers(0, 256, 60)), keep=0)
        question = rng.integers(0, 256, 4)
        full = greedy_answer(decoder, question, np.zeros(0, dtype=np.int64), 12).tokens
        text = bytes(full).decode("latin-1")
        refs = [text[2:5], "zzzz"] if rng.random() < 0.5 else ["zz", text[-3:]]
        short = greedy_answer(decoder, question, np.zeros(0, dtype=np.int64), 12, refs=refs).tokens
        assert short == full[: len(short)]
        as_text = bytes(short).decode("utf-8", errors="replace")
        assert string_match_all(as_text, refs) == string_match_all(bytes(full).decode("utf-8", errors="replace"), refs)


class _Wrapped:
    """What HFDecoder needs from an HFEvalModel: the model and its output head."""

    def __init__(self, model):
        self.model = model

    def output_logits(self, hidden):
        return self.model.get_output_embeddings()(hidden)


def _random_model(architecture: str):
    """A random 2-layer model in float64 (the byte-level Llama's sizes, vocabulary 300), weights scaled up so that
    greedy paths differ; Gemma 3: a sliding-window layer (window 16) and a global one, transformers' defaults beyond
    the sizes."""
    pytest.importorskip("transformers")
    if architecture == "gemma3":
        rope = {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        }
        layer_types = ["sliding_attention", "full_attention"]
        options = {"positions": None, "sliding_window": 16, "layer_types": layer_types, "rope_parameters": rope}
    else:
        options = byte_llama(vocab=300, positions=512, eos_token_id=299, bos_token_id=298)
    return random_hf_model(architecture, dtype=torch.float64, scale=4.0, **options).eval()


@pytest.mark.hf
@pytest.mark.parametrize(
    ("architecture", "method"),
    [("llama", "self_extend"), ("llama", "rerope"), ("llama", "sinks"), ("gemma3", None), ("gemma3", "self_extend")],
)
def test_transformers_cached_decoding_matches_recomputation(architecture, method):
    """The shared prefill and the cached greedy decoding give the tokens of a full forward of the whole sequence at
    every step: under ropekit's attention function (a method), and on Gemma 3 beyond its sliding window, whose
    layers can only be cut back after a question because the cache records what they drop."""
    from ropekit.attention import get_attention
    from ropekit.integrations.hf.patch_attention import apply_attention

    model = _random_model(architecture)
    if method is not None:
        apply_attention(model, get_attention(method).from_options(train_length=32, length=160))

    def recomputed(context, question):
        return _reference(lambda ids: model(ids).logits, np.concatenate([context, question]).tolist(), 8)

    _check_questions(model, seed=2, vocab=300, expected_of=recomputed)
