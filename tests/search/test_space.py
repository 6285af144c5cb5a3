"""The search space: the formula seeds against closed forms and the constraints of every repaired candidate."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ropekit.config import RopeConfig
from ropekit.search.space import repair, seed_candidates, theory_critical_pair

ROPE = RopeConfig(32, base=10000.0)


def test_seeds_match_closed_forms():
    s, d = 4.0, 32
    seeds = seed_candidates(ROPE, 256, s)
    np.testing.assert_allclose(seeds["linear"].factors, [s] * 16, rtol=1e-8)
    # NTK: base' = b·s^(d/(d-2)), so pair i is slowed by s^(2i/(d-2)) (bloc97; arXiv 2309.00071 eq. 16)
    np.testing.assert_allclose(seeds["ntk"].factors, [s ** (2 * i / (d - 2)) for i in range(16)], rtol=1e-5)
    # the critical pair of Liu et al. eq. 8: ceil((d/2) log_b(L0 / 2π)) = ceil(16 · ln(256/2π) / ln 1e4) = 7
    assert theory_critical_pair(ROPE, 256) == math.ceil(16 * math.log(256 / (2 * math.pi)) / math.log(1e4)) == 7
    theory = seeds["theory"]
    assert theory.critical_pair == 7
    np.testing.assert_allclose(theory.factors[:7], seeds["ntk"].factors[:7], rtol=1e-5)
    np.testing.assert_allclose(theory.factors[7:], [s] * 9, rtol=1e-5)
    assert seeds["yarn"].factors[0] == 1.0 and math.isclose(seeds["yarn"].factors[-1], s, rel_tol=1e-8)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.floats(-3, 3), min_size=1, max_size=20),
    st.integers(-2, 25),
    st.floats(1.0, 64.0),
)
def test_repair_keeps_the_constraints(logs, critical, factor):
    candidate = repair(logs, critical, factor)
    values = np.asarray(candidate.log_factors)
    assert 0 <= candidate.critical_pair <= len(logs)
    assert (values >= 0).all() and (np.diff(values) >= 0).all()
    assert (values[candidate.critical_pair :] >= math.log(factor) - 1e-6).all()
    assert repair(values, candidate.critical_pair, factor).key() == candidate.key()  # a valid one is kept
