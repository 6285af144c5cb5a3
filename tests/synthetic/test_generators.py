"""Generators: exact token length, answers placed as asked (once where the task says once), depth, determinism."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.base import NOISE, largest_fitting
from ropekit.synthetic.suite import TASKS, make_sample, mixture_sample, parse_tasks


def text_of(ids) -> str:
    return bytes(int(i) for i in ids).decode()


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("length", [256, 257, 1000, 4096])
def test_exact_length_bytes(task, length, text_ids):
    sample = make_sample(task, length, byte_ids, text=text_ids, seed=3, index=2)
    question = sample.questions[0]
    # the canonical answer fits the length, as RULER counts it in the input's total: a right answer is decoded at
    # positions inside the length (at 1x, positions the model trained on)
    assert len(sample.context) + len(question.ids) + len(question.target) == length == sample.length
    assert question.budget == len(question.target) + 8
    trained = make_sample(task, length, byte_ids, text=text_ids, seed=3, index=2, include_answer=True)
    assert len(trained.sequence()) == length
    assert np.array_equal(trained.context, sample.context)  # evaluation asks what training taught, same layout


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("length", [300, 2048])
def test_exact_length_bpe(task, length, bpe_encode):
    text = bpe_encode(b"The river runs past the old mill. def walk(tree): yield node\n" * 300)
    sample = make_sample(task, length, bpe_encode, text=text, seed=1, index=0)
    assert sample.length == length
    decoded = bpe_encode.decode(sample.context)
    if "compute" in task:  # a sum, in no sentence (tests/synthetic/test_beyond.py computes it from the text)
        return
    for answer in sample.questions[0].answers:  # the references survive tokenization of the pieces
        assert answer in decoded


@pytest.mark.parametrize("task", list(TASKS))
def test_same_seed_same_sample(task, text_ids):
    a = make_sample(task, 1024, byte_ids, text=text_ids, seed=5, index=7)
    b = make_sample(task, 1024, byte_ids, text=text_ids, seed=5, index=7)
    c = make_sample(task, 1024, byte_ids, text=text_ids, seed=6, index=7)
    assert np.array_equal(a.context, b.context) and a.questions[0].answers == b.questions[0].answers
    assert not np.array_equal(a.context, c.context)


NEEDLE = re.compile(r" The magic (number|word|uuid) for (\S+) is ([^\s.]+)\.")


@pytest.mark.parametrize("task", [t for t in TASKS if t.startswith("niah")])
def test_needles_state_each_answer_once(task, text_ids):
    for index in range(5):
        sample = make_sample(task, 2048, byte_ids, text=text_ids, seed=0, index=index)
        context = text_of(sample.context)
        question = text_of(sample.questions[0].ids)
        asked = re.findall(r"for ([^?]+)\?", question)[0].split(", ")
        stated = NEEDLE.findall(context)
        for answer in sample.questions[0].answers:
            assert context.count(answer) == 1  # the value occurs once, inside its needle
        expected = [value for key in asked for _, k, value in stated if k == key]
        assert sorted(expected) == sorted(sample.questions[0].answers)
        assert text_of(sample.questions[0].target) == " " + ", ".join(sample.questions[0].answers)


def test_multikey_counts(text_ids):
    sample = make_sample("niah_multikey_1", 2048, byte_ids, text=text_ids, seed=0, index=0)
    assert len(NEEDLE.findall(text_of(sample.context))) == 4
    haystack = make_sample("niah_multikey_2", 2048, byte_ids, text=text_ids, seed=0, index=0)
    keys = [k for _, k, _ in NEEDLE.findall(text_of(haystack.context))]
    assert len(keys) > 20 and len(set(keys)) == len(keys)  # a haystack of needles, every key once


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_depth_placement(depth, text_ids):
    for task, unit in (("niah_single_1", len(NOISE)), ("niah_single_2", 1)):
        sample = make_sample(task, 2048, byte_ids, text=text_ids, seed=0, index=1, depth=depth)
        needle = NEEDLE.search(text_of(sample.context))
        haystack = len(sample.context) - (needle.end() - needle.start())
        assert needle.start() == sample.needle_starts[0]
        assert depth * haystack - unit <= needle.start() <= depth * haystack + 1  # at the boundary before it


def test_depth_is_random_by_default(text_ids):
    depths = {make_sample("niah_single_1", 1024, byte_ids, seed=0, index=i).depth for i in range(10)}
    assert len(depths) == 10 and all(0 <= d <= 1 for d in depths)


def test_variable_tracking_chain(text_ids):
    for hops in (1, 4, 7):
        sample = make_sample("vt", 2048, byte_ids, seed=2, index=0, hops=hops, chains=2)
        context = text_of(sample.context)
        value = re.findall(r"value (\d+)\?", text_of(sample.questions[0].ids))[0]
        holders = {v for v, n in re.findall(r"VAR (\w+) = (\d+)\.", context) if n == value}
        links = re.findall(r"VAR (\w+) = VAR (\w+)\.", context)
        changed = True
        while changed:  # follow the assignments (an independent reading of the chain)
            new = {a for a, b in links if b in holders}
            changed = not new <= holders
            holders |= new
        assert sorted(holders) == sorted(sample.questions[0].answers) and len(holders) == hops + 1
        assert context.count(f"= {value}.") == 1


@pytest.mark.parametrize("task", ["cwe", "fwe"])
def test_word_lists(task):
    for length in (256, 4096):
        sample = make_sample(task, length, byte_ids, seed=0, index=3)
        words = text_of(sample.context).split("List:")[-1].split()
        ranked = Counter(words).most_common()
        top = [w for w, _ in ranked[:3]]
        assert sorted(top) == sorted(sample.questions[0].answers)
        assert ranked[2][1] > ranked[3][1]  # never a tie for the answer


def test_parse_tasks():
    assert parse_tasks("all") == tuple(TASKS)
    assert parse_tasks("vt, cwe") == ("vt", "cwe")
    with pytest.raises(ValueError, match="unknown task 'qa_1'"):
        parse_tasks("qa_1")


def test_too_short_names_task():
    with pytest.raises(ValueError, match=r"niah_multiquery.*at least"):
        make_sample("niah_multiquery", 100, byte_ids, seed=0, haystack="noise")


def test_largest_fitting():
    assert largest_fitting(lambda n: 3 * n, 100) == 33
    assert largest_fitting(lambda n: 3 * n, 2) == 0
    assert largest_fitting(lambda n: 3 * n, 100, lowest=0) == 33


def test_mixture_sample_length(text_ids):
    from ropekit.synthetic.base import Pieces

    pieces = Pieces(byte_ids)
    for seed in range(30):
        sequence, answer = mixture_sample(np.random.default_rng(seed), 257, text_ids, pieces)
        assert len(sequence) == 257 and 0 < answer < 257


def check_word_list(text: str, answers: tuple[str, ...]) -> None:
    """The answers are the list's most frequent words, strictly ahead of the rest (counted here, independently)."""
    ranked = Counter(text.split("List:")[-1].split()).most_common()
    assert sorted(w for w, _ in ranked[: len(answers)]) == sorted(answers)
    assert ranked[len(answers) - 1][1] > ranked[len(answers)][1]


def test_every_task_builds_at_64k_bytes(deadline):
    """The bundled model's byte tokenizer at 64k: common-word extraction needs more than the 5,625 two-syllable
    words there (it never returned); every task builds, exact in length, in seconds."""
    from ropekit.model.corpus import heldout_bytes
    from ropekit.synthetic.base import Pieces

    text, pieces = byte_ids(heldout_bytes()), Pieces(byte_ids)
    with deadline(120):
        samples = {task: make_sample(task, 65536, byte_ids, text=text, pieces=pieces) for task in TASKS}
    assert all(sample.length == 65536 for sample in samples.values())
    for task in ("cwe", "fwe"):
        check_word_list(text_of(samples[task].context), samples[task].questions[0].answers)
    assert len(set(text_of(samples["cwe"].context).split("List:")[-1].split())) > 5625


def test_draw_until_new_loops_end_with_an_error_naming_the_task(deadline):
    """More keys than there are two-syllable words, or a tokenizer that encodes the haystack to nothing: errors that
    name the task and the length, where these loops used to run forever."""
    with deadline(60), pytest.raises(ValueError, match=r"task 'niah_multikey_1' at length 300,000: keys"):
        make_sample("niah_multikey_1", 300_000, byte_ids, haystack="noise", keys=6000)

    def no_noise(text: bytes) -> np.ndarray:
        return np.zeros(0, dtype=np.int64) if text == NOISE.encode() else byte_ids(text)

    with deadline(60), pytest.raises(ValueError, match="encodes a noise haystack unit to no tokens"):
        make_sample("niah_single_1", 256, no_noise)
    with deadline(60), pytest.raises(ValueError, match="does not grow"):
        largest_fitting(lambda n: 5, 100)


@pytest.mark.parametrize(("argument", "value"), [("value_kind", "numbr"), ("key_kind", "number")])
def test_unknown_kind_names_the_argument(argument, value, text_ids):
    with pytest.raises(ValueError, match=rf"^{argument} must be one of .*; got '{value}'$"):
        make_sample("niah_single_1", 256, byte_ids, text=text_ids, seed=0, index=0, **{argument: value})
