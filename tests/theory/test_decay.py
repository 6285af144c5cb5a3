"""Long-term decay: the ones-vector score g, RoFormer's upper bound and B_m(b), against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.theory import max_context_length, ones_score, roformer_upper_bound, similarity_margin


def test_d4_score_is_periodic_with_period_200_pi():
    """b = 1e4, d = 4: θ = {1, 0.01}, so g(x) = 2cos x + 2cos(0.01x) repeats every 200π."""
    x = np.linspace(0, 700, 97)
    np.testing.assert_allclose(ones_score(x + 200 * np.pi, 4), ones_score(x, 4), atol=1e-9)
    np.testing.assert_allclose(ones_score(x, 4), 2 * np.cos(x) + 2 * np.cos(0.01 * x), atol=1e-12)


def test_d256_score_decays():
    assert ones_score(0, 256) == pytest.approx(256.0)
    assert ones_score(1000, 256) == pytest.approx(49.3, abs=0.05)


def test_score_is_explicit_rotation_of_ones():
    """g(m) = ⟨R_m 1, 1⟩ with R_m the block-diagonal rotation (RoFormer eq. 15)."""
    dim, m = 8, 37.0
    theta = 10000.0 ** -(np.arange(0, dim, 2) / dim)
    rotation = np.zeros((dim, dim))
    for i, angle in enumerate(m * theta):
        c, s = np.cos(angle), np.sin(angle)
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    ones = np.ones(dim)
    assert ones_score(m, dim) == pytest.approx(ones @ rotation @ ones, rel=1e-12)


def test_roformer_bound_values_for_d128():
    """32.5 at m = 0 ((1/64)·Σ_{j=1}^{64} j) and ≈ 6.55 at m = 250; not monotone."""
    assert roformer_upper_bound(0, 128) == pytest.approx(32.5)
    assert roformer_upper_bound(250, 128) == pytest.approx(6.55, abs=0.01)
    values = roformer_upper_bound(np.arange(0, 2000), 128)
    assert np.any(np.diff(values) > 0)


def test_roformer_bound_by_explicit_partial_sums():
    m, dim = 123.0, 16
    theta = 10000.0 ** -(np.arange(0, dim, 2) / dim)
    partial = [abs(sum(np.exp(1j * m * theta[:j]))) for j in range(1, dim // 2 + 1)]
    assert roformer_upper_bound(m, dim) == pytest.approx(np.mean(partial), rel=1e-12)


def test_similarity_margin_is_half_the_ones_score_and_first_goes_negative_at_1707():
    m = np.arange(0, 1708)
    margin = similarity_margin(m, 128)
    np.testing.assert_allclose(margin, ones_score(m, 128) / 2, rtol=1e-14)
    assert margin[0] == 64
    assert int(np.flatnonzero(margin < 0)[0]) == 1707 == max_context_length(10000.0, 128)


def test_shapes_follow_the_distances():
    assert similarity_margin(np.zeros((3, 5)), 16).shape == (3, 5)
    assert roformer_upper_bound(np.zeros((2, 4)), 16).shape == (2, 4)


def test_similarity_sum_is_the_direct_cosine_sum_for_any_frequencies():
    """B_m for arbitrary (e.g. scaled) frequencies: the explicit double loop over m and pairs."""
    from ropekit.theory import similarity_sum

    frequencies = np.array([1.0, 0.3, 0.02, 1e-4])
    m = np.array([[0, 1, 7], [100, 12345, 99999]])
    expected = np.array([[sum(np.cos(float(d) * f) for f in frequencies) for d in row] for row in m])
    np.testing.assert_allclose(similarity_sum(m, frequencies), expected, rtol=0, atol=1e-12)
    assert similarity_sum(m, frequencies).shape == (2, 3)


@pytest.mark.parametrize(("head_dim", "base", "limit"), [(128, 10000.0, 4096), (64, 500.0, 4096), (16, 3e4, 20000)])
def test_first_negative_m_matches_a_direct_scan(head_dim, base, limit):
    """The first m with B_m < −tolerance(m), against np.cos of every m < limit (no block identity)."""
    from ropekit.theory import first_negative_m
    from ropekit.theory.decay import tolerance

    theta = base ** -(np.arange(0, head_dim, 2) / head_dim)
    m = np.arange(limit, dtype=np.float64)
    values = np.cos(np.outer(m, theta)).sum(axis=1)
    negative = np.flatnonzero(values < -tolerance(m, head_dim))
    expected = int(negative[0]) if negative.size else None
    assert first_negative_m(theta, limit) == expected
    if expected is not None:
        assert first_negative_m(theta, expected) is None  # nothing negative below it
        assert first_negative_m(theta, limit, start=expected + 1) == (int(negative[1]) if negative.size > 1 else None)


@pytest.mark.parametrize(("rotary_dim", "length", "base"), [(128, 4096, 1e4), (64, 5000, 3e5), (32, 3000, 800.0)])
def test_the_base_bound_scan_finds_what_first_negative_m_finds(rotary_dim, length, base):
    """One block scan: the bound's full scan (theory._margins) and first_negative_m agree with np.cos of every m."""
    from ropekit.theory import first_negative_m
    from ropekit.theory._certificates import _Sums
    from ropekit.theory.decay import tolerance

    sums = _Sums(rotary_dim, length)
    u = float(np.log(base))
    theta = sums.theta(u)
    m = np.arange(length, dtype=np.float64)
    direct = np.cos(np.outer(m, theta)).sum(axis=1)
    negative = np.flatnonzero(direct < -tolerance(m, rotary_dim))
    found, values = sums.first_negative(u)
    assert (int(found[0]) if found.size else None) == first_negative_m(theta, length)
    assert (int(negative[0]) if negative.size else None) == first_negative_m(theta, length)
    np.testing.assert_allclose(values, direct[: values.size], rtol=0, atol=1e-9)
