"""The llama.cpp row's verdict on logits: against the quantisation floor measured on the unextended file (closed-form
cases built by hand), and the fixed tolerance when there is no floor to measure."""

from __future__ import annotations

import numpy as np

from ropekit.engines.llama_cpp import FLOOR_RATIO, FLOOR_SLACK, gaps, judge_logits


def _numbers(mean: float, agree: float, top: float = 1.0) -> dict[str, float]:
    return {"logits_mean_diff": mean, "logits_max_diff": top, "argmax_agreement": agree}


def test_gaps_are_the_mean_max_and_argmax_agreement() -> None:
    ours = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]])
    theirs = np.array([[0.0, 1.5, 0.0], [0.0, 3.0, 0.0]])  # row 0 same argmax, row 1 not
    numbers = gaps(theirs, ours)
    assert numbers == {
        "logits_mean_diff": (0.5 + 2 + 3) / 6,
        "logits_max_diff": 3.0,
        "argmax_agreement": 0.5,
        "positions": 2,
    }


def test_within_the_floor_is_same_and_beyond_it_differs() -> None:
    floor = _numbers(0.2, 0.9)
    limit = FLOOR_RATIO * 0.2 + FLOOR_SLACK
    assert judge_logits(_numbers(limit, 0.9), floor)[0]
    assert not judge_logits(_numbers(limit + 1e-6, 0.9), floor)[0]  # mean beyond the floor's allowance
    assert not judge_logits(_numbers(0.2, 0.8), floor)[0]  # argmax agreement well below the floor's
    same, detail = judge_logits(_numbers(0.21, 0.9), floor)
    assert same and "quantisation floor" in detail


def test_a_wrong_rope_on_a_noisy_file_is_caught_where_a_fixed_tolerance_would_pass_it() -> None:
    """A file whose quantisation floor is tiny (0.01) and an extended pair at 0.2: the fixed tolerance (0.25) would
    say same; the floor says differs."""
    assert judge_logits(_numbers(0.2, 0.99), None)[0]
    assert not judge_logits(_numbers(0.2, 0.99), _numbers(0.01, 0.99))[0]


def test_without_a_floor_the_row_says_it_is_uncalibrated() -> None:
    same, detail = judge_logits(_numbers(0.3, 0.9), None)
    assert not same and "uncalibrated" in detail


def test_the_argmax_slack_is_the_sampling_noise_of_the_positions_compared() -> None:
    """82% against a floor of 88% on 64 positions is 4 tokens: within two standard errors of the difference,
    sqrt(2 p (1 - p) / n) = 5.7 points; on 6,400 positions the same rates differ."""
    floor, extended = _numbers(0.2, 0.88), _numbers(0.21, 0.82)
    assert judge_logits({**extended, "positions": 64}, {**floor, "positions": 64})[0]
    assert not judge_logits({**extended, "positions": 6400}, {**floor, "positions": 6400})[0]
    assert not judge_logits(extended, floor)[0]  # no count: the fixed 5 points
