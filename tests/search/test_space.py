"""The search space: the formula seeds against closed forms and the constraints of every repaired candidate."""

from __future__ import annotations

import math

import numpy as np
import pytest
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


def _ntk_factors(base: float, tied_base: float, dim: int, pairs: int) -> np.ndarray:
    """Closed form, independent of the search: plain inv_freq over the inv_freq of base b', per pair."""
    from ropekit.scaling import inv_freq

    return (inv_freq(dim, base) / inv_freq(dim, tied_base))[:pairs]


@pytest.mark.parametrize("factor", [4.0, 8.0])
def test_longrope2_pairs_below_the_critical_pair_follow_the_searched_ntk_curve(factor):
    from ropekit.search.space import Operators, crossover, mutate, ntk_base

    seeds = seed_candidates(ROPE, 256, factor, "longrope2")
    # the NTK and theory seeds are on NTK's own curve: b' = b·s^(d/(d-2))
    assert math.isclose(ntk_base(seeds["theory"], 1e4), 1e4 * factor ** (32 / 30), rel_tol=1e-7)
    rng = np.random.default_rng(0)
    population = list(seeds.values())
    for _ in range(300):
        first, second = (population[int(rng.integers(len(population)))] for _ in range(2))
        child = mutate(crossover(first, second, rng, factor), rng, factor, Operators(shift_rate=0.5))
        population.append(child)
        c, factors = child.critical_pair, np.asarray(child.factors)
        assert child.log_base_ratio is not None and child.log_base_ratio >= 0
        np.testing.assert_allclose(factors[:c], _ntk_factors(1e4, ntk_base(child, 1e4), 32, c), rtol=1e-8)
        assert np.all(factors[c:] >= factor * (1 - 1e-8)) and np.all(np.diff(factors) >= -1e-12)
    assert len({c.critical_pair for c in population}) > 3  # the critical pair moves
    assert len({round(c.log_base_ratio, 6) for c in population}) > 10  # and the base is searched


def test_free_form_candidates_carry_no_base():
    seeds = seed_candidates(ROPE, 256, 4.0)
    assert all(seed.log_base_ratio is None for seed in seeds.values())
    # the tail seed: plain below the first pair whose wavelength exceeds T = 1024 (2π·10^(i/4) > 1024: pair 9)
    np.testing.assert_allclose(seeds["tail"].factors, [1.0] * 9 + [4.0] * 7, rtol=1e-8)


def test_a_longrope2_candidate_reads_back_from_its_journal_entry():
    from ropekit.search.space import Candidate

    for candidate in seed_candidates(ROPE, 256, 4.0, "longrope2").values():
        assert Candidate.from_dict(candidate.to_dict()) == candidate
    free = seed_candidates(ROPE, 256, 4.0)["yarn"]
    assert "log_base_ratio" not in free.to_dict() and Candidate.from_dict(free.to_dict()) == free
