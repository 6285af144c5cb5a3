"""The pseudo-word pool: today's two-syllable order exactly, then longer words, never a repeat, never a hang."""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.synthetic.base import random_word
from ropekit.synthetic.words import SYLLABLES, WordPool, capacity


def drawn_one_by_one(rng: np.random.Generator, count: int) -> list[str]:
    """The oracle: draw ``random_word(r, 2)`` until ``count`` different words have appeared (``count <= 5625``)."""
    r = np.random.default_rng(int(rng.integers(2**63)))
    words: dict[str, None] = {}
    while len(words) < count:
        words.setdefault(random_word(r, 2))
    return list(words)


@pytest.mark.parametrize("seed", [0, 7])
def test_two_syllable_words_come_in_the_one_by_one_order(seed):
    pool = WordPool(np.random.default_rng(seed))
    assert pool.first(5625) == drawn_one_by_one(np.random.default_rng(seed), 5625)
    assert sorted(pool.first(5625)) == sorted(a + b for a in SYLLABLES for b in SYLLABLES)  # every one, once


def test_past_the_two_syllable_words_the_pool_goes_on(deadline):
    with deadline(60):
        words = WordPool(np.random.default_rng(3)).first(30_000)  # the old pool never returned past 5,625
    assert len(set(words)) == 30_000
    assert [len(w) for w in words] == [4] * 5625 + [6] * (30_000 - 5625)
    consonants, vowels = set("bdfghklmnprstvz"), set("aeiou")
    assert all(w[i] in consonants and w[i + 1] in vowels for w in words[5620:5630] for i in range(0, len(w), 2))


def test_the_words_do_not_depend_on_how_they_were_asked_for():
    one = WordPool(np.random.default_rng(5))
    for count in (3, 6000, 100, 9000, 12_000):
        one.first(count)
    assert one.first(12_000) == WordPool(np.random.default_rng(5)).first(12_000)


def test_more_words_than_the_pool_holds_is_an_error():
    assert capacity() > 2**30  # more than any length the CLI accepts could list
    with pytest.raises(ValueError, match=r"task 'cwe' at length 9: needs .* distinct words"):
        WordPool(np.random.default_rng(0), "task 'cwe' at length 9").first(capacity() + 1)
