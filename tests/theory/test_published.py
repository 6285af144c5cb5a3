"""The published bound tables at face value: does each printed base satisfy its own condition?

Oracle: the known answers were computed once with :func:`max_context_length` (every m checked) and are recorded
here; two are cross-checked by direct summation over every m. 5.1e8 first goes negative at 874,868.
"""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.theory import PAPER_BOUND, SU_BOUND, face_value_check

#: context length -> first m with B_m(published base) < 0, or None when the base satisfies its condition.
PAPER_FIRST_NEGATIVE = {
    2**10: None,
    2**11: None,
    2**12: 4079,
    2**13: None,
    2**14: 12223,
    2**15: 27685,
    2**16: None,
    2**17: 128915,
    2**18: 207455,
    2**19: 511210,
    2**20: 874868,
}
SU_FIRST_NEGATIVE = {
    2**10: None,
    2**11: 1554,
    2**12: 4079,
    2**13: None,
    2**14: 12865,
    2**15: None,
    2**16: None,
    2**17: 125573,
    2**18: 141858,
    2**19: 273611,
    2**20: 679592,
}


def direct_margin(base: float, m: np.ndarray, head_dim: int = 128) -> np.ndarray:
    theta = base ** -(np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return np.cos(np.multiply.outer(m.astype(np.float64), theta)).sum(axis=-1)


def test_tables_are_those_of_facts():
    assert list(PAPER_BOUND) == [2**k for k in range(10, 21)]
    assert list(PAPER_BOUND.values()) == [4.3e3, 1.6e4, 2.7e4, 8.4e4, 3.1e5, 6.4e5, 2.1e6, 7.8e6, 3.6e7, 6.4e7, 5.1e8]
    assert list(SU_BOUND.values()) == [4.3e3, 1.2e4, 2.7e4, 8.4e4, 2.3e5, 6.3e5, 2.1e6, 4.9e6, 2.4e7, 5.8e7, 6.5e7]


@pytest.mark.parametrize(("table", "known"), [(PAPER_BOUND, PAPER_FIRST_NEGATIVE), (SU_BOUND, SU_FIRST_NEGATIVE)])
def test_face_value_of_each_entry(table, known):
    for length, base in table.items():
        check = face_value_check(length, base)
        assert check.first_negative == known[length], (length, base)
        assert check.satisfied == (known[length] is None)


def test_paper_1m_entry_fails_at_874868_by_direct_summation():
    """B_874868(5.1e8) < 0 and the 2**16 distances before it are >= 0 (the full prefix is the recorded scan's)."""
    base, first = PAPER_BOUND[2**20], PAPER_FIRST_NEGATIVE[2**20]
    assert direct_margin(base, np.array([first]))[0] < 0
    assert direct_margin(base, np.arange(first - 2**16, first)).min() > -1e-9


def test_a_passing_and_a_failing_entry_by_direct_summation():
    assert direct_margin(PAPER_BOUND[2**13], np.arange(2**13)).min() >= 0
    values = direct_margin(SU_BOUND[2**11], np.arange(2**11))
    assert np.flatnonzero(values < 0)[0] == SU_FIRST_NEGATIVE[2**11]
