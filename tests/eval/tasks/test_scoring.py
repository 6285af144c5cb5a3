"""RULER's string match on hand-written examples, Wilson intervals and the effective length."""

from __future__ import annotations

import pytest

from ropekit.eval.tasks.scoring import (
    cell,
    effective_length,
    effective_lengths,
    pooled,
    score,
    string_match_all,
    string_match_part,
)


def test_string_match_all_hand_examples():
    assert string_match_all("The number is 1234567.", ["1234567"]) == 1.0
    assert string_match_all("1234567, 7654321", ["1234567", "7654321", "1111111", "2222222"]) == 0.5  # partial
    assert string_match_all("ABCDE fghij", ["abcde", "FGHIJ", "KLMNO"]) == pytest.approx(2 / 3)  # case-insensitive
    assert string_match_all("123456", ["1234567"]) == 0.0  # a truncated value is no match
    assert string_match_all("", ["x"]) == 0.0


def test_string_match_part_hand_examples():
    assert string_match_part("Paris, France", ["paris", "lyon"]) == 1.0
    assert string_match_part("Lyon and Paris", ["paris", "lyon"]) == 1.0
    assert string_match_part("Berlin", ["paris", "lyon"]) == 0.0
    assert score("Lyon", ["paris", "lyon"], "part") == 1.0 and score("Lyon", ["paris", "lyon"], "all") == 0.5
    with pytest.raises(ValueError, match="metric"):
        score("x", ["x"], "exact")
    with pytest.raises(ValueError, match="refs"):
        string_match_all("x", [])


def test_cell_wilson_interval():
    result = cell([1.0] * 8 + [0.0] * 2)
    assert result["score"] == 0.8 and result["samples"] == 10
    low, high = result["ci95"]
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)  # Wilson, z = 1.96
    assert cell([1.0] * 5)["ci95"][1] == 1.0 and cell([0.0] * 5)["ci95"][0] == 0.0
    assert pooled([cell([1.0, 1.0]), cell([0.0, 1.0])])["score"] == 0.75


def test_effective_length_counts_from_the_start():
    assert effective_length({256: 0.9, 512: 0.87, 1024: 0.5, 2048: 0.9}, 0.856) == 512  # 2048 does not count
    assert effective_length({256: 0.5, 512: 0.9}, 0.856) is None
    means = {n: {"score": s, "ci95": [s - 0.1, min(1.0, s + 0.1)]} for n, s in {256: 1.0, 512: 0.9, 1024: 0.8}.items()}
    result = effective_lengths(means, 85.6, reference=0.9)
    assert result["effective_length"] == 512 and result["interval"] == [256, 1024]
    assert result["relative_threshold"] == pytest.approx(77.04) and result["relative_effective_length"] == 1024


def test_no_relative_effective_length_for_a_model_that_scores_nothing_at_its_training_length():
    means = {n: {"score": 0.0, "ci95": [0.0, 0.3]} for n in (256, 512, 1024)}
    result = effective_lengths(means, 85.6, reference=0.0)  # a 0% threshold would call every length effective
    assert result["relative_effective_length"] is None and result["relative_interval"] == [None, None]
    assert result["effective_length"] is None


def test_samples_to_separate_matches_the_closed_form_for_none_against_all():
    """0/n against n/n: Wilson's upper bound for 0 successes is z²/(n + z²), so the intervals part at the first n
    with z²/(n + z²) < 1/2, i.e. n > z² = 3.8416: n = 4 (k trials per sample: the first n with k·n > z²)."""
    from ropekit.eval.tasks.scoring import samples_to_separate

    z2 = 1.96**2
    assert samples_to_separate(0.0, 1.0) == 4
    for k in (1, 2, 3, 11):
        assert samples_to_separate(1.0, 0.0, per_sample=k) == next(n for n in range(1, 10) if k * n > z2)
    assert samples_to_separate(0.5, 0.5, limit=50) is None
