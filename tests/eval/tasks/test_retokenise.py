"""Every task's samples re-tokenise exactly: their ids, decoded and tokenized whole (as lm-eval, a text-only server
and RULER tokenize), are the same ids, on a byte-level BPE tokenizer trained here and on the byte tokenizer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropekit.eval.tasks.suite import TASKS, make_sample
from ropekit.model.tokenizer import byte_ids, byte_text

#: English-like prose with punctuation, numbers and code: the haystack text and the tokenizer's training text
WORDS = [
    "river",
    "mill",
    "miller",
    "counts",
    "sacks",
    "twice",
    "water",
    "stone",
    "bridge",
    "market",
    "evening",
    "morning",
    "village",
    "road",
]


def prose(seed: int, sentences: int) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(sentences):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), rng.integers(3, 9))]
        sentence = " ".join(words).capitalize() + rng.choice([".", ",", "?", "!", ";"])
        if i % 7 == 3:
            sentence += f" In {int(rng.integers(1000, 99999))} ({words[0]}): {words[-1]}-{words[1]}."
        if i % 11 == 5:
            sentence += "\n\ndef walk(tree):\n    for node in tree.children:\n        yield node\n"
        out.append(sentence)
    return " ".join(out)


@pytest.fixture(scope="module")
def bpe(train_bpe):
    """A byte-level BPE tokenizer (GPT-2's split rule) trained on generated prose: ``(encode, decode)``."""
    encode = train_bpe([prose(0, 400)], 600)
    return encode, encode.decode


@pytest.fixture(scope="module")
def bpe_text(bpe) -> np.ndarray:
    return bpe[0](prose(1, 3000).encode())


def assert_retokenises(sample, length: int, encode, decode) -> None:
    assert sample.length == length
    for number, question in enumerate(sample.questions):
        prompt = sample.prompt(number)
        assert encode(decode(prompt.tolist()).encode()).tolist() == prompt.tolist()
        assert encode(decode(question.target.tolist()).encode()).tolist() == question.target.tolist()
        sequence = sample.sequence(number)
        assert encode(decode(sequence.tolist()).encode()).tolist() == sequence.tolist()


@pytest.mark.parametrize("task", list(TASKS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(400, 3000), seed=st.integers(0, 2**16))
def test_bpe_samples_retokenise(task, length, seed, bpe, bpe_text):
    encode, decode = bpe
    sample = make_sample(task, length, encode, text=bpe_text, seed=seed, index=seed % 5, decode=decode)
    assert_retokenises(sample, length, encode, decode)


@pytest.mark.parametrize("task", list(TASKS))
@settings(max_examples=6, deadline=None)
@given(length=st.integers(256, 3000), seed=st.integers(0, 2**16))
def test_byte_samples_retokenise(task, length, seed):
    text = byte_ids(prose(2, 600).replace("mill", "mühle").encode())  # multi-byte characters: cuts keep them whole
    sample = make_sample(task, length, byte_ids, text=text, seed=seed, decode=byte_text)
    assert_retokenises(sample, length, byte_ids, byte_text)
