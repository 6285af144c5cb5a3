"""Common- and frequent-word extraction, RULER's aggregation family (Hsieh et al., arXiv 2404.06654, section 3.3).

Both show a list of pseudo-words after ``List:`` and ask for the most frequent ones:

- common words (CWE): ``common`` words appear ``freq_common`` times each, every other word ``freq_uncommon`` times;
  as the length grows only the uncommon words grow in number, so the task gets harder with length, as in RULER.
- frequent words (FWE): word counts follow a Zipf law (exponent ``alpha``, RULER's 2.0); the ``top`` most frequent
  are asked, and the counts are set so that the top ones are strictly ahead (the answer is never a tie).

How many words fit is found by bisection on the list's token count (as RULER fits its lists); the tokens left over
go to haystack filler before the list, so the sample is exact in length. The counts are smaller than RULER's
(10 common words × 30) so that the task fits the bundled model's 256-byte context.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ropekit.synthetic.base import (
    Haystack,
    Pieces,
    Question,
    Sample,
    answer_room,
    budget_for,
    largest_fitting,
    too_short,
)
from ropekit.synthetic.words import MIN_SYLLABLES, WordPool

HEADER = " \nList:"


def question_text(count: int) -> str:
    return f" \nWhich {count} words appear most often in the list? They are"


def _list_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    haystack: Haystack,
    counts_for: Callable[[int], list[int]],
    lowest: int,
    answer_count: int,
) -> Sample:
    """The shared builder: ``counts_for(n)`` gives the count of each of the pool's words for size ``n``."""
    pool = WordPool(rng, f"task {task!r} at length {length:,}")
    # longer words are nearly all this sample's only: a shared cache would only grow
    own = Pieces(pieces.encode, pieces.decode, space=pieces.adds_space())

    def word_ids(word: str) -> np.ndarray:  # " word" (two-syllable words recur in every sample: cached for all)
        return (pieces if len(word) <= 2 * MIN_SYLLABLES else own).ids(" " + word)

    question_ids = pieces.ids(question_text(answer_count))
    sizes: list[int] = []  # tokens of " " + word, per word of the pool, encoded as far as a count needed them

    def words_tokens(n: int, limit: float = math.inf) -> int:
        """The list's tokens at size ``n``; once the sum passes ``limit`` the rest is not encoded (a lower bound
        above ``limit`` is returned: the comparison with it is all the fitting needs)."""
        counts = counts_for(n)
        known = min(len(counts), len(sizes))
        total = int(np.dot(counts[:known], sizes[:known]))
        words = pool.first(len(counts))
        for i in range(known, len(counts)):
            if total > limit:
                break
            sizes.append(len(word_ids(words[i])))
            total += counts[i] * sizes[i]
        return total

    header = pieces.ids(HEADER)
    # the answer fits the length, in training sequences and evaluation samples alike (base.answer_room); its token
    # count depends on its words, not on their order (fixed below)
    fixed = len(header) + len(question_ids) + len(pieces.ids(" " + " ".join(pool.first(answer_count))))
    n = largest_fitting(lambda n: words_tokens(n, length - fixed), length - fixed, lowest)
    if n < lowest:
        raise too_short(task, length, fixed + words_tokens(lowest) - 1)
    counts = counts_for(n)
    words = pool.first(len(counts))
    items = np.array([i for i, c in enumerate(counts) for _ in range(c)])
    rng.shuffle(items)
    listed = [word_ids(words[i]) for i in items]
    seen: list[int] = []
    for i in items:  # the answer in order of first appearance
        if i < answer_count and i not in seen:
            seen.append(int(i))
    answers = [words[i] for i in seen]
    target = pieces.ids(" " + " ".join(answers))
    question = Question(question_ids, tuple(answers), target, budget_for(target))
    used = len(header) + sum(len(t) for t in listed) + answer_room(question)
    filler = Haystack("noise") if haystack.kind == "needles" else haystack
    pad, _ = filler.stream(rng, length - used, pieces)
    context = np.concatenate([pad, header, *listed]).astype(np.int64)
    return Sample(task, context, (question,), float("nan"), (len(pad),))


def common_words_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    common: int = 3,
    freq_common: int = 6,
    freq_uncommon: int = 2,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One common-word-extraction sample of exactly ``length`` tokens (``depth`` does not apply; the list ends the
    context; ``include_answer`` does not change the sample: its one answer always fits the length).

    Raises:
        ValueError: ``freq_common <= freq_uncommon`` (no unique answer), or ``length`` too short for the common words.
    """
    if freq_common <= freq_uncommon or common < 1 or freq_uncommon < 1:
        raise ValueError(
            f"need common >= 1 and freq_common > freq_uncommon >= 1, got {common}, {freq_common}, {freq_uncommon}"
        )
    return _list_sample(
        task,
        rng,
        length,
        pieces,
        haystack,
        lambda n: [freq_common] * common + [freq_uncommon] * n,
        0,
        common,
    )


def zipf_counts(total: int, alpha: float, top: int) -> list[int]:
    """Word counts summing to ``total``: ``floor(total · r^-alpha / Σ)`` for rank ``r``, then singletons, with the
    ``top`` counts made strictly decreasing and ahead of every other (excess moved to new singleton words)."""
    ranks = np.arange(1, total + 1, dtype=np.float64) ** -alpha
    counts = [int(c) for c in np.floor(total * ranks / ranks.sum()) if c >= 1]
    for i in range(1, len(counts)):
        limit = counts[i - 1] - 1 if i <= top else counts[top - 1] - 1
        counts[i] = max(0, min(counts[i], limit))
    counts = [c for c in counts if c > 0]
    return counts + [1] * (total - sum(counts))


def frequent_words_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    alpha: float = 2.0,
    top: int = 3,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One frequent-word-extraction sample of exactly ``length`` tokens (``include_answer`` does not change the sample:
    its one answer always fits the length).

    Raises:
        ValueError: ``length`` is too short for a list whose top ``top`` words are strictly ahead.
    """

    def valid(total: int) -> bool:
        counts = zipf_counts(total, alpha, top)
        return len(counts) > top and counts[top - 1] >= 2

    lowest = next((n for n in range(top + 1, 10_000) if valid(n)), None)
    if lowest is None:
        raise ValueError(
            f"task {task!r}: no list under 10,000 words puts its top {top} strictly ahead at alpha {alpha}"
        )
    return _list_sample(task, rng, length, pieces, haystack, lambda n: zipf_counts(n, alpha, top), lowest, top)
