"""Distinct pseudo-words without end, for the word-list tasks (:mod:`ropekit.synthetic.aggregation`).

The pool draws consonant-vowel syllables as :func:`~ropekit.synthetic.base.random_word` does, in tiers of growing
length: every two-syllable word first (15·5 = 75 syllables, so 75² = 5,625 words), then three-syllable words
(421,875), and so on up to :data:`MAX_SYLLABLES` (about 1.8·10¹¹ words in all, more than the 2³⁰ tokens any length
the CLI accepts could hold). Within a tier words are drawn uniformly at random and a word already drawn is skipped,
so the two-syllable words come in exactly the order that drawing ``random_word(rng, 2)`` until a new word appears
gives (numpy's generator draws an array of bounded integers as it draws them one at a time; the tests compare the
two). Each tier has its own generator (the two-syllable one is the pool's seed itself), so where a tier ends does
not depend on how many words were asked for at a time. Draws are made in vectorised batches, and a word is kept
as an integer code (its syllables as base-75 digits) until it is needed as text.

A tier is left once every one of its words is drawn, or after :data:`TIER_DRAWS` draws per word of the tier (a
coupon collector needs about ``ln(size)`` per word: 8.6 for two syllables; leaving a tier with a word not drawn
after 32 per word has probability below ``size · e^-32``, under 10⁻¹⁰), so every loop here is bounded.
"""

from __future__ import annotations

import re

import numpy as np

from ropekit.synthetic.base import CONSONANTS, VOWELS

#: the syllables, indexed by ``consonant · 5 + vowel`` (the order :func:`~ropekit.synthetic.base.random_word` draws)
SYLLABLES = tuple(c + v for c in CONSONANTS for v in VOWELS)
#: the shortest words the pool gives
MIN_SYLLABLES = 2
#: the longest (75⁶ codes still fit in int64 with room to spare)
MAX_SYLLABLES = 6
#: draws per word of a tier after which the pool moves on to longer words even if a word of the tier is left
TIER_DRAWS = 32
#: the fewest draws made at a time
MIN_BATCH = 4096


def _place_values(syllables: int) -> np.ndarray:
    return len(SYLLABLES) ** np.arange(syllables - 1, -1, -1, dtype=np.int64)


def spell(codes: np.ndarray, syllables: int) -> list[str]:
    """The words of ``codes`` (each ``syllables`` base-75 digits, the first syllable most significant)."""
    digits = (codes[:, None] // _place_values(syllables)) % len(SYLLABLES)  # (n, syllables)
    parts = np.array(SYLLABLES)[digits]  # (n, syllables) two-letter strings
    words = parts[:, 0]
    for j in range(1, syllables):
        words = np.char.add(words, parts[:, j])
    return words.tolist()


def _within(ranked: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in the sorted array ``ranked`` (by bisection: no table over the code range)."""
    if not len(ranked):
        return np.zeros(len(values), dtype=bool)
    return ranked[np.minimum(np.searchsorted(ranked, values), len(ranked) - 1)] == values


def capacity() -> int:
    """How many distinct words the pool can give."""
    return sum(len(SYLLABLES) ** s for s in range(MIN_SYLLABLES, MAX_SYLLABLES + 1))


class WordPool:
    """An endless (up to :func:`capacity`) deterministic sequence of distinct pseudo-words, shortest first.

    Typical use::

        pool = WordPool(rng)          # takes one draw from rng for its seed
        words = pool.first(10_000)    # the same 10,000 words for any earlier or later call pattern
    """

    def __init__(self, rng: np.random.Generator, context: str = "the word pool") -> None:
        self.seed = int(rng.integers(2**63))
        self.context = context  # what errors name (a task and its length)
        self.words: list[str] = []
        self._syllables = MIN_SYLLABLES
        self._rng = np.random.default_rng(self.seed)
        self._drawn = 0  # draws made in the current tier
        self._codes = np.zeros(0, dtype=np.int64)  # sorted codes taken in the current tier
        self._pending: list[tuple[int, np.ndarray]] = []  # (syllables, codes in order) not yet made text
        self._count = 0  # words drawn: len(self.words) + the pending codes

    def first(self, count: int) -> list[str]:
        """The pool's first ``count`` words.

        Raises:
            ValueError: ``count`` is above :func:`capacity`.
        """
        if count > capacity():
            raise ValueError(
                f"{self.context}: needs {count:,} distinct words; the pseudo-word pool holds {capacity():,}"
            )
        while self._count < count:  # each pass draws a batch or moves to the next tier: bounded by the caps
            self._draw(count - self._count)
        while len(self.words) < count:  # text only for the words asked for
            syllables, codes = self._pending.pop(0)
            take = count - len(self.words)
            self.words += spell(codes[:take], syllables)
            if take < len(codes):
                self._pending.insert(0, (syllables, codes[take:]))
        return self.words[:count]

    def _draw(self, wanted: int) -> None:
        """Draw one batch of the current tier, keeping the new words in order; move on when the tier is done."""
        size = len(SYLLABLES) ** self._syllables
        batch = min(max(MIN_BATCH, 2 * wanted, len(self._codes) // 2), TIER_DRAWS * size - self._drawn)
        bounds = np.tile([len(CONSONANTS), len(VOWELS)], batch * self._syllables)
        letters = self._rng.integers(bounds).reshape(batch, self._syllables, 2)  # (batch, syllables, c/v)
        digits = letters[:, :, 0] * len(VOWELS) + letters[:, :, 1]  # (batch, syllables) syllable indices
        codes = digits @ _place_values(self._syllables)  # (batch,) the first syllable most significant
        self._drawn += batch
        order = np.argsort(codes, kind="stable")  # equal codes keep their draw order
        ranked = codes[order]
        first = order[np.concatenate([[True], ranked[1:] != ranked[:-1]])]  # each code's first draw
        new = codes[np.sort(first[~_within(self._codes, codes[first])])]  # new words in the order they were drawn
        self._pending.append((self._syllables, new))
        self._count += len(new)
        self._codes = np.sort(np.concatenate([self._codes, new]))
        if len(self._codes) == size or self._drawn >= TIER_DRAWS * size:
            if self._syllables == MAX_SYLLABLES:
                raise ValueError(f"{self.context}: the pseudo-word pool ran out after {self._count:,} words")
            self._syllables += 1
            self._rng = np.random.default_rng([self.seed, self._syllables])
            self._drawn = 0
            self._codes = np.zeros(0, dtype=np.int64)


def template_words(*texts: str) -> set[str]:
    """Every word of ``texts``, capitalised: names a generator must not draw (a pseudo-word can be an English word,
    ``home`` or ``give``, and a name that is a word of its own template would blur its sentences)."""
    return {word.capitalize() for text in texts for word in re.findall(r"[A-Za-z]+", text)}
