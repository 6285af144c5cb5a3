"""The similar-token property E[qᵀR_m k*] − E[qᵀR_m k] = 2σ²B_m (Men et al., Theorem 1) by Monte Carlo.

Oracle: the closed form 2σ²·Σ_i cos(m·θ_i), summed here directly; the estimate must sit within a few standard
errors of it, and the standard error must shrink as 1/√N.
"""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.theory import similar_token_check
from ropekit.theory.similar_tokens import rotate_pairs

DISTANCES = [0, 10, 250, 1707, 5000]


def closed_form(distances, dim, base, sigma):
    theta = base ** -(np.arange(0, dim, 2) / dim)
    return 2 * sigma**2 * np.cos(np.outer(distances, theta)).sum(axis=1)


def test_estimate_within_four_standard_errors():
    check = similar_token_check(DISTANCES, 128, samples=20000, seed=1)
    np.testing.assert_allclose(check.predicted, closed_form(DISTANCES, 128, 10000.0, 1.0), rtol=1e-12)
    assert np.all(np.abs(check.measured - check.predicted) < 4 * check.stderr), check.z_scores


def test_nonzero_mean_and_sigma():
    """The property holds for any mean shared by q and k; σ enters squared."""
    check = similar_token_check(DISTANCES, 64, samples=20000, sigma=2.0, mean=0.7, seed=2)
    np.testing.assert_allclose(check.predicted, closed_form(DISTANCES, 64, 10000.0, 2.0), rtol=1e-12)
    assert np.all(np.abs(check.z_scores) < 4), check.z_scores


def test_standard_error_shrinks_as_one_over_root_n():
    small = similar_token_check([100], 32, samples=4000, seed=3)
    large = similar_token_check([100], 32, samples=16000, seed=3)
    assert large.stderr[0] / small.stderr[0] == pytest.approx(0.5, rel=0.1)


def test_rotate_pairs_is_the_block_rotation():
    theta = np.array([1.0, 0.1])
    vector = np.array([[1.0, 2.0, 3.0, 4.0]])
    c0, s0, c1, s1 = np.cos(3.0), np.sin(3.0), np.cos(0.3), np.sin(0.3)
    expected = [1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1]
    np.testing.assert_allclose(rotate_pairs(vector, 3.0, theta)[0], expected, rtol=1e-14)


@pytest.mark.parametrize(("kwargs", "name"), [({"samples": 1}, "samples"), ({"sigma": 0.0}, "sigma")])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        similar_token_check([1], 8, **kwargs)
