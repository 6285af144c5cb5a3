"""Passkey retrieval: oracles are a "model" that reads the key out of the needle (accuracy 1), a uniform one
(accuracy 0), published Wilson intervals and the quadratic they solve, and the episode text itself."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ropekit.eval.passkey import PasskeyCell, passkey_grid
from ropekit.model.corpus import heldout_bytes
from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.passkey import needle_text, passkey_episode, question_text

VOCAB = 260
KEY = re.compile(rb"The pass key is (\d{5})\.")


@pytest.fixture(scope="module")
def filler() -> np.ndarray:
    return byte_ids(heldout_bytes()[:20_000])


def needle_key(row: torch.Tensor) -> bytes:
    """The key stated by the needle in a row of byte ids (what a perfect retriever would copy)."""
    match = KEY.search(bytes(row.tolist()))
    assert match is not None, "every episode holds a needle"
    return match.group(1)


def cheat(ids: torch.Tensor) -> torch.Tensor:
    """One-hot on the true next token: the next input byte, and after the last input byte the key's last digit."""
    logits = torch.zeros(*ids.shape, VOCAB)  # (batch, seq, vocab)
    for b, row in enumerate(ids):
        logits[b, torch.arange(len(row) - 1), row[1:]] = 1.0
        logits[b, -1, needle_key(row)[-1]] = 1.0
    return logits


def uniform(ids: torch.Tensor) -> torch.Tensor:
    return torch.zeros(*ids.shape, VOCAB)


def test_perfect_retrieval_scores_one(filler: np.ndarray) -> None:
    cells = passkey_grid(cheat, filler, [120, 200], [0.0, 0.5, 1.0], trials=3, batch_size=2)
    assert [(c.length, c.depth) for c in cells] == [(n, d) for n in (120, 200) for d in (0.0, 0.5, 1.0)]
    assert all(c.trials == 3 and c.correct == 3 and c.accuracy == 1.0 for c in cells)


def test_uniform_logits_score_zero(filler: np.ndarray) -> None:
    # argmax of equal logits is token 0, never a digit
    cells = passkey_grid(uniform, filler, [150], [0.0, 1.0], trials=4)
    assert [c.correct for c in cells] == [0, 0]


def test_correct_counts_follow_the_trials_that_were_answered(filler: np.ndarray) -> None:
    """Cheat only when the key's last digit is even: the count must equal the number of such keys."""
    keys: list[bytes] = []

    def half(ids: torch.Tensor) -> torch.Tensor:
        logits = cheat(ids)
        for b, row in enumerate(ids):
            key = needle_key(row)
            keys.append(key)
            if key[-1] % 2:
                logits[b, -1] = 0.0
        return logits

    (cell,) = passkey_grid(half, filler, [130], [0.25], trials=12, batch_size=5)
    assert len(keys) == 12
    assert cell.correct == sum(k[-1] % 2 == 0 for k in keys)
    assert 0 < cell.correct < 12  # the seed gives a mix, so both branches are exercised


def test_episodes_are_a_function_of_the_seed(filler: np.ndarray) -> None:
    def record(seed: int) -> list[torch.Tensor]:
        seen: list[torch.Tensor] = []

        def fn(ids: torch.Tensor) -> torch.Tensor:
            seen.append(ids.clone())
            return uniform(ids)

        passkey_grid(fn, filler, [120, 160], [0.0, 0.5], trials=3, seed=seed)
        return seen

    first, again, other = record(0), record(0), record(1)
    assert len(first) == 4
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_the_answer_is_where_the_episode_says(filler: np.ndarray, depth: float) -> None:
    episode = passkey_episode(np.random.default_rng(7), filler, 300, depth, encode=byte_ids)
    text = bytes(episode.ids.tolist())
    needle = needle_text(episode.key)
    assert len(text) == 300
    assert re.fullmatch(rb"\d{5}", episode.key.encode())
    assert text[episode.needle_start : episode.needle_start + len(needle)] == needle
    assert text.endswith(question_text() + episode.key.encode())
    assert episode.answer_len == 5
    # Filler before and after the needle is one contiguous slice of the filler text.
    body = text[: episode.needle_start] + text[episode.needle_start + len(needle) : -len(question_text()) - 5]
    assert body in bytes(filler.tolist())
    fill = len(body)
    assert episode.needle_start == round(depth * fill)
    if depth == 1.0:  # the needle sits right before the question
        assert text[episode.needle_start + len(needle) :] == question_text() + episode.key.encode()


@pytest.mark.parametrize(
    ("correct", "trials", "low", "high"),
    [  # 95% Wilson score intervals (z = 1.96), as tabulated e.g. by statsmodels' proportion_confint(method="wilson")
        (8, 10, 0.4902, 0.9433),
        (5, 10, 0.2366, 0.7634),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (1, 20, 0.0089, 0.2361),
    ],
)
def test_wilson_interval_known_values(correct: int, trials: int, low: float, high: float) -> None:
    cell = PasskeyCell(100, 0.5, trials, correct)
    assert cell.interval() == pytest.approx((low, high), abs=6e-5)
    assert cell.to_dict()["ci95"] == pytest.approx([low, high], abs=6e-5)
    assert cell.to_dict()["accuracy"] == correct / trials


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(trials=st.integers(1, 500), data=st.data())
def test_wilson_bounds_solve_the_score_equation(trials: int, data: st.DataObject) -> None:
    """Wilson's bounds are the roots p of (p̂ − p)² = z² p(1 − p)/n."""
    correct = data.draw(st.integers(0, trials))
    z = 1.96
    p_hat = correct / trials
    k = z * z / trials
    roots = np.sort(np.roots([1 + k, -(2 * p_hat + k), p_hat * p_hat]).real)
    low, high = PasskeyCell(64, 0.0, trials, correct).interval(z)
    assert (low, high) == pytest.approx((max(0.0, roots[0]), min(1.0, roots[1])), abs=1e-9)
    assert low <= p_hat <= high


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"trials": 0}, "trials"), ({"depths": [1.5]}, "depth"), ({"batch_size": 0}, "batch_size")],
)
def test_bad_grid_arguments_raise(filler: np.ndarray, kwargs: dict, match: str) -> None:
    args = {"depths": [0.5]} | kwargs
    with pytest.raises(ValueError, match=match):
        passkey_grid(uniform, filler, [150], args.pop("depths"), **args)


def test_a_length_too_short_for_an_episode_raises(filler: np.ndarray) -> None:
    with pytest.raises(ValueError, match="passkey episode"):
        passkey_grid(uniform, filler, [64], [0.5], trials=1)


@pytest.mark.parametrize(("trials", "correct"), [(0, 0), (3, 4), (3, -1)])
def test_cell_rejects_impossible_counts(trials: int, correct: int) -> None:
    with pytest.raises(ValueError):
        PasskeyCell(100, 0.5, trials, correct)
