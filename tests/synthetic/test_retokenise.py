"""Every task's samples re-tokenise exactly: their ids, decoded and tokenized whole (as lm-eval, a text-only server
and RULER tokenize), are the same ids, with a tokenizer of each of the five families most served models use
(trained here on the shipped text) and with the byte tokenizer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropekit.model.tokenizer import byte_ids, byte_text
from ropekit.synthetic.suite import TASKS, make_sample

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


def assert_retokenises(sample, length: int, encode, decode) -> None:
    assert sample.length == length
    for number in range(len(sample.questions)):
        prompt = sample.prompt(number)
        assert encode(decode(prompt.tolist()).encode()).tolist() == prompt.tolist()
        sequence = sample.sequence(number)
        assert encode(decode(sequence.tolist()).encode()).tolist() == sequence.tolist()


@pytest.mark.parametrize("length", [1024, 4096])
@pytest.mark.parametrize("task", list(TASKS))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16))
def test_every_family_reads_every_sample_back(family, task, length, seed):
    """Every task's prompt and training sequence, decoded and tokenized whole, is the sample's ids, for each family
    (:mod:`helpers.families`: GPT-2's, Llama 3's and Qwen2's split rules, Llama 2's and Gemma's SentencePiece)."""
    encode = family.encode
    sample = make_sample(task, length, encode, text=family.text, seed=seed, index=seed % 5, pieces=family.pieces)
    assert_retokenises(sample, length, encode, encode.decode)


@pytest.mark.parametrize("task", list(TASKS))
@settings(max_examples=6, deadline=None)
@given(length=st.integers(256, 3000), seed=st.integers(0, 2**16))
def test_byte_samples_retokenise(task, length, seed):
    text = byte_ids(prose(2, 600).replace("mill", "mühle").encode())  # multi-byte characters: cuts keep them whole
    sample = make_sample(task, length, byte_ids, text=text, seed=seed, decode=byte_text)
    assert_retokenises(sample, length, byte_ids, byte_text)
