"""The tasks beyond literal retrieval (latent hops, path traversal, the ladder): a solver written here, reading only
each sample's text with regular expressions, answers every sample; no latent question shares a word with its needle
beyond stop words; the ladder's levels share their needles."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ropekit.model.corpus import heldout_bytes
from ropekit.model.tokenizer import byte_ids, byte_text
from ropekit.synthetic.base import Pieces
from ropekit.synthetic.suite import TASKS, make_sample, parse_tasks, suite_tasks

BEYOND = ("latent_hop", "latent_hop_2", "path_traversal", "ladder_retrieve", "ladder_copy", "ladder_copy_compute",
          "ladder_compute")  # fmt: skip
#: English stop words (a subset of NLTK's list): the words a question may share with its needle
STOP = set(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "be",
        "of",
        "in",
        "on",
        "at",
        "by",
        "to",
        "for",
        "from",
        "with",
        "and",
        "or",
        "it",
        "its",
        "who",
        "whom",
        "whose",
        "what",
        "which",
        "has",
        "have",
        "had",
        "do",
        "does",
        "there",
        "here",
        "this",
        "that",
        "these",
        "those",
        "as",
        "into",
        "near",
    ]
)
NAME = r"([A-Z][a-z]+)"


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def solve_latent(context: str, question: str) -> str:
    """The person the question asks for, from the context's sentences alone."""
    lives = dict((town, person) for person, town in re.findall(rf"{NAME} lives next to {NAME}\.", context))
    inside = dict(re.findall(rf"{NAME} is a town in {NAME}\.", context))
    inside.update(re.findall(rf"{NAME} lies in {NAME}\.", context))
    how, place = re.search(rf"Who has a home (in|by) {NAME}\? It is$", question).groups()
    if how == "by":
        return lives[place]
    found = []
    for town, person in lives.items():
        where, seen = town, []
        while where in inside:  # climb town -> region -> land
            where = inside[where]
            seen.append(where)
        if place in seen:
            found.append(person)
    assert len(found) == 1, found
    return found[0]


def solve_path(context: str, question: str) -> list[str]:
    doors: dict[str, set[str]] = {}
    for a, b in re.findall(rf"The door of {NAME} leads to {NAME}\.", context):
        doors.setdefault(a, set()).add(b)
    start, steps = re.search(rf"Start at {NAME} and go through (\d+) doors", question).groups()
    lines, here = [], start
    for _ in range(int(steps)):
        (nxt,) = doors[here]  # exactly one door from every place on the path
        lines.append(f"The door of {here} leads to {nxt}.")
        here = nxt
    return lines


def solve_ladder(task: str, context: str, question: str) -> list[str]:
    codes = dict(re.findall(rf"The code of {NAME} is (\d+)\.", context))
    a, b = re.search(rf"codes of {NAME} and {NAME}", question).groups()
    total = int(codes[a]) + int(codes[b])
    return {
        "ladder_retrieve": [codes[a], codes[b]],
        "ladder_copy": [f"The code of {a} is {codes[a]}.", f"The code of {b} is {codes[b]}."],
        "ladder_copy_compute": [f"{codes[a]} + {codes[b]} = {total}"],
        "ladder_compute": [str(total)],
    }[task]


def check_solved(task: str, sample, decode) -> None:
    context = decode(sample.context.tolist())
    for question in sample.questions:
        asked = decode(question.ids.tolist())
        if task.startswith("latent_hop"):
            assert [solve_latent(context, asked)] == list(question.answers)
        elif task == "path_traversal":
            assert solve_path(context, asked) == list(question.answers)
            lines = [line.strip() for line in decode(question.target.tolist()).split("\n") if line.strip()]
            assert lines == list(question.answers)  # one line a step
        else:
            assert solve_ladder(task, context, asked) == list(question.answers)


def test_the_new_tasks_are_registered_apart_from_rulers():
    assert suite_tasks("beyond") == tuple(sorted(BEYOND, key=list(TASKS).index))
    assert set(BEYOND) <= set(parse_tasks("all"))
    assert not set(BEYOND) & set(parse_tasks("ruler"))
    assert len(parse_tasks("ruler")) == 11


@pytest.mark.parametrize("task", BEYOND)
def test_a_solver_reading_the_text_answers_every_byte_sample(task):
    text = byte_ids(heldout_bytes())
    pieces = Pieces(byte_ids, byte_text)
    for length in (300, 1000, 4096):
        for index in range(20):
            sample = make_sample(task, length, byte_ids, text=text, seed=7, index=index, pieces=pieces)
            assert sample.length == length
            check_solved(task, sample, byte_text)


@pytest.mark.parametrize("task", BEYOND)
def test_a_solver_reading_the_text_answers_every_family_sample(task, family):
    for length in (600, 2048):
        for index in range(5):
            sample = make_sample(
                task, length, family.encode, text=family.text, seed=1, index=index, pieces=family.pieces
            )
            assert sample.length == length
            check_solved(task, sample, family.encode.decode)


def needle_of(context: str, person: str) -> str:
    (needle,) = re.findall(rf"{person} lives next to {NAME}\.", context)
    return f"{person} lives next to {needle}."


def check_no_shared_word(task: str, encode, decode, text: np.ndarray, length: int) -> None:
    """1,000 samples: the latent question's words and its needle's share stop words only; the literal twin names the
    needle's town (short noise haystacks: the question and its needle are what is checked)."""
    pieces = Pieces(encode, decode)
    for index in range(1000):
        sample = make_sample(task, length, encode, text=text, seed=0, index=index, pieces=pieces, haystack="noise")
        context = decode(sample.context.tolist())
        latent, literal = (decode(q.ids.tolist()) for q in sample.questions)
        needle = needle_of(context, sample.questions[0].answers[0])
        assert not (words(latent) - STOP) & words(needle), (latent, needle)
        town = re.search(rf"next to {NAME}\.", needle).group(1)
        assert town in literal and sample.questions[1].twin == "literal" and not sample.questions[0].twin


@pytest.mark.parametrize("task", ["latent_hop", "latent_hop_2"])
def test_no_latent_question_shares_a_word_with_its_needle_bytes(task):
    check_no_shared_word(task, byte_ids, byte_text, byte_ids(heldout_bytes()[:20_000]), 300)


@pytest.mark.parametrize("task", ["latent_hop", "latent_hop_2"])
def test_no_latent_question_shares_a_word_with_its_needle(task, family):
    check_no_shared_word(task, family.encode, family.encode.decode, family.text, 200)


def test_the_ladder_levels_share_their_needles():
    text = byte_ids(heldout_bytes())
    for index in range(5):
        found = set()
        for task in BEYOND[3:]:
            context = byte_text(make_sample(task, 1000, byte_ids, text=text, seed=2, index=index).context.tolist())
            found.add(tuple(re.findall(rf"The code of {NAME} is (\d+)\.", context)))
        assert len(found) == 1 and len(next(iter(found))) == 4


def test_path_answer_grows_with_the_length():
    """About a third of the sample is the answer, so the output itself grows past a training length."""
    text = byte_ids(heldout_bytes())
    for length in (1000, 4000, 16000):
        sample = make_sample("path_traversal", length, byte_ids, text=text, seed=0, index=0)
        share = len(sample.questions[0].target) / length
        assert 0.28 < share <= 1 / 3


@pytest.mark.parametrize(
    ("task", "overrides", "message"),
    [
        ("latent_hop", {"hops": 3}, "hops must be 1 or 2"),
        ("path_traversal", {"answer_share": 1.5}, "answer_share must be a fraction"),
        ("ladder_copy", {"level": "sum"}, "level must be one of"),
        ("ladder_copy", {"keys": 1}, "keys must be at least 2"),
    ],
)
def test_bad_parameters_are_named(task, overrides, message):
    with pytest.raises(ValueError, match=message):
        make_sample(task, 1000, byte_ids, text=np.asarray(byte_ids(heldout_bytes())), **overrides)


@pytest.mark.parametrize("task", BEYOND)
def test_too_short_names_the_task(task):
    with pytest.raises(ValueError, match=rf"task '{task}' needs a length of at least \d+ tokens"):
        make_sample(task, 60, byte_ids, text=byte_ids(heldout_bytes()))
