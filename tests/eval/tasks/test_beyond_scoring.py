"""Scoring the tasks beyond literal retrieval: the correct prefix of a long answer, the paired latent/literal gap with
Newcombe's interval, NoLiMa's relative effective length, and the rows and summary that carry them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.eval.tasks.grid import row_scores
from ropekit.eval.tasks.run import summarise
from ropekit.eval.tasks.scoring import effective_lengths, paired_counts, paired_difference, prefix_fraction, score
from ropekit.synthetic.base import Question, Sample

LINES = ["The door of Ba leads to Ko.", "The door of Ko leads to Mi.", "The door of Mi leads to Su."]


def test_prefix_fraction_hand_examples():
    assert prefix_fraction(" \n" + " \n".join(LINES), LINES) == 1.0
    assert prefix_fraction("The door of ba leads to ko.\n\n  The door of Ko leads to Mi.  \nnope", LINES) == 2 / 3
    assert prefix_fraction("The door of Ko leads to Mi.\n" + "\n".join(LINES), LINES) == 0.0  # order matters
    assert prefix_fraction("\n".join([*LINES, "more", "lines"]), LINES) == 1.0  # what follows is not read
    assert prefix_fraction("The door of Ba leads to Ko", LINES) == 0.0  # a line is whole or wrong
    assert score("\n".join(LINES[:1]), LINES, "prefix") == pytest.approx(1 / 3)


def wilson(x: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval written out (Newcombe 1998, method 3)."""
    p = x / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def newcombe_paired(r: int, s: int, t: int, u: int) -> tuple[float, float, float]:
    """Newcombe's method 10 (Stat. Med. 1998; 17:2635) in his notation: r pairs with both, s with the first only,
    t with the second only, u with neither; the interval of p1 - p2."""
    n = r + s + t + u
    p1, p2 = (r + s) / n, (r + t) / n
    (l1, u1), (l2, u2) = wilson(r + s, n), wilson(r + t, n)
    a, b = (r + s) * (t + u) * (r + t) * (s + u), r * u - s * t
    c = b - n / 2 if b > n / 2 else (b if b < 0 else 0.0)
    phi = c / math.sqrt(a) if a else 0.0
    low = (p1 - p2) - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = (p1 - p2) + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return p1 - p2, low, high


@pytest.mark.parametrize("table", [(12, 2, 9, 21), (5, 0, 7, 8), (0, 0, 0, 20), (10, 0, 0, 0), (3, 6, 1, 10)])
def test_the_gap_interval_is_newcombes_paired_interval(table):
    """``paired_difference(first, second)`` is second − first: Newcombe's p1 − p2 with the second side as p1."""
    both, first_only, second_only, neither = table
    first = [1] * both + [1] * first_only + [0] * second_only + [0] * neither
    second = [1] * both + [0] * first_only + [1] * second_only + [0] * neither
    got = paired_difference(first, second)
    difference, low, high = newcombe_paired(both, second_only, first_only, neither)
    assert got["difference"] == pytest.approx(difference)
    assert got["ci95"] == pytest.approx([max(-1, low), min(1, high)], abs=1e-9)
    assert got["counts"] == list(table) and got["pairs"] == sum(table)
    assert got["ci95"][0] <= got["difference"] <= got["ci95"][1]
    assert paired_counts(table) == got


def test_the_gap_needs_pairs_of_0_1_scores():
    with pytest.raises(ValueError, match="0/1 scores"):
        paired_difference([0.5], [1])
    with pytest.raises(ValueError, match="same number"):
        paired_difference([1, 0], [1])


def test_nolimas_relative_effective_length_is_against_the_shortest_score():
    """Scores 0.6, 0.55, 0.5, 0.9: 85% of 0.6 is 0.51, so 2k is the last length counted from the start (RULER's
    absolute 85.6% finds none)."""
    means = {
        n: {"score": s, "ci95": [s - 0.05, s + 0.05]} for n, s in {1024: 0.6, 2048: 0.55, 4096: 0.5, 8192: 0.9}.items()
    }
    got = effective_lengths(means, 85.6)
    assert got["effective_length"] is None
    assert got["short_reference"] == 0.6 and got["short_relative_threshold"] == pytest.approx(51.0)
    assert got["short_relative_effective_length"] == 2048
    assert got["short_relative_interval"] == [1024, 8192]  # lower bounds: 0.5 < 0.51 at 2k; upper: all clear
    nothing = effective_lengths({1024: {"score": 0.0, "ci95": [0.0, 0.2]}}, 85.6)
    assert nothing["short_relative_effective_length"] is None and nothing["short_relative_interval"] == [None, None]


def twin_sample(own_metric: str = "all") -> Sample:
    ids, target = np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return Sample(
        "latent_hop",
        np.zeros(4, dtype=np.int64),
        (Question(ids, ("Ba",), target, 9, own_metric), Question(ids, ("Ba",), target, 9, twin="literal")),
    )


def test_a_rows_own_score_leaves_its_twins_out_and_pairs_them_by_sample():
    group = [twin_sample() for _ in range(5)]
    scores = [[0.0, 1.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]]  # (latent, literal) per sample
    row = row_scores(group, scores)
    assert row["samples"] == 5 and row["score"] == pytest.approx(0.4)
    literal = row["twins"]["literal"]
    assert literal["score"] == pytest.approx(0.6) and literal["samples"] == 5
    assert literal["gap"] == paired_difference([0, 1, 0, 0, 1], [1, 1, 1, 0, 0])
    assert "exact" not in row


def test_a_long_answers_row_counts_its_exact_answers():
    sample = Sample("path_traversal", np.zeros(4, dtype=np.int64), (twin_sample("prefix").questions[0],))
    row = row_scores([sample] * 4, [[1.0], [0.5], [1.0], [0.0]])
    assert row["score"] == pytest.approx(0.625) and row["exact"]["score"] == 0.5 and row["exact"]["samples"] == 4


def test_the_summary_pools_the_gap_over_tasks_per_length():
    rows = []
    for task, counts in (("latent_hop", [2, 1, 5, 2]), ("latent_hop_2", [1, 0, 6, 3])):
        twin = {"samples": 10, "score": 0.5, "ci95": [0, 1], "gap": paired_counts(counts)}
        rows.append(
            {"method": "none", "length": 512, "task": task, "samples": 10, "score": 0.3, "ci95": [0, 1]}
            | {"twins": {"literal": twin}}
        )
    summary = summarise(rows, 512, 85.6)
    (gap,) = summary["twins"]
    assert gap["tasks"] == ["latent_hop", "latent_hop_2"] and gap["gap"] == paired_counts([3, 1, 11, 5])
    assert gap["own"]["score"] == pytest.approx(0.3) and gap["literal"]["score"] == pytest.approx(0.5)
    assert "twins" not in summarise([{k: v for k, v in r.items() if k != "twins"} for r in rows], 512, 85.6)


class FixedRoomDecoder:
    """A decoder whose room is fixed when first fed, as llama.cpp's context: its first tokens and a margin, unless
    :meth:`reserve` sized it before; it predicts token 0 (a wrong answer, decoded to its whole budget)."""

    margin = 16

    def __init__(self):
        self.length, self.room, self.reserved = 0, None, []

    def reserve(self, tokens):
        self.room = tokens + self.margin
        self.reserved.append(tokens)

    def extend(self, ids, keep):
        import torch

        if self.room is None:
            self.room = len(ids) + self.margin
        if self.length + len(ids) > self.room:
            raise ValueError(f"the context holds {self.room} tokens; this input needs {self.length + len(ids)}")
        self.length += len(ids)
        return torch.zeros(keep, 257)

    def crop(self, length):
        self.length = min(self.length, length)


def test_a_fixed_room_decoder_is_sized_for_the_longest_answer_before_the_prefill():
    """Path traversal's answer is a third of the sample: llama.cpp's context, sized for the prefill and a margin,
    would be too short for it; the room is reserved for the context, the longest question and its budget."""
    from types import SimpleNamespace

    from ropekit.eval.tasks.grid import _answer_locally
    from ropekit.model.corpus import heldout_bytes
    from ropekit.model.tokenizer import byte_ids, byte_text
    from ropekit.synthetic.suite import make_sample

    sample = make_sample("path_traversal", 1000, byte_ids, text=byte_ids(heldout_bytes()), seed=0, index=0)
    decoder = FixedRoomDecoder()
    model = SimpleNamespace(decoder=lambda: decoder, byte_level=False, stop_tokens=frozenset(), detokenize=byte_text)
    scores, _, forward = _answer_locally(model, sample)
    question = sample.questions[0]
    assert decoder.reserved == [len(sample.context) + len(question.ids) + question.budget]
    # the prefill, the question with the canonical answer (teacher-forced), then the budget decoded but its last token
    assert (
        scores == [0.0]
        and forward == len(sample.context) + len(question.ids) + len(question.target) + question.budget - 1
    )
