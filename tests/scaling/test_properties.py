"""Properties of the scaling methods, in the style of transformers' own ``test_modeling_rope_utils.py``.

Oracles are closed forms (θ_i = b^(−2i/d) computed here with ``math``, θ_i/s, g(s) = 0.1 ln s + 1, …) and
relations between methods; no transformers needed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropekit import RopeConfig, frequencies
from ropekit.scaling import (
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    YarnScaling,
    ntk_base,
)
from ropekit.scaling.yarn import correction_pair

PROPERTY = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

BASES = st.floats(2.0, 7.0).map(lambda exponent: 10.0**exponent)
FACTORS = st.floats(1.0, 64.0)
ORIGINAL_LENGTHS = st.integers(128, 131072)


@st.composite
def ropes(draw: st.DrawFn) -> RopeConfig:
    """Plain configs: head_dim 32…256 (even), rotary dim 4…head_dim (even), base 1e2…1e7."""
    head_dim = 2 * draw(st.integers(16, 128))
    rotary_dim = draw(st.just(head_dim) | st.integers(2, head_dim // 2).map(lambda pairs: 2 * pairs))
    return RopeConfig(head_dim, base=draw(BASES), rotary_dim=rotary_dim)


def theta(rope: RopeConfig) -> np.ndarray:
    """θ_i = b^(−2i/d) over the rotary dim, one ``math.pow`` per pair (independent of ropekit's vector code)."""
    return np.array([math.pow(rope.base, -2 * i / rope.dim) for i in range(rope.dim // 2)])


def with_scaling(rope: RopeConfig, scaling: object) -> RopeConfig:
    return rope.replace(scaling=scaling)


@PROPERTY
@given(rope=ropes(), original=ORIGINAL_LENGTHS, seq_len=st.integers(1, 10**6))
def test_factor_one_equals_default(rope: RopeConfig, original: int, seq_len: int) -> None:
    default = frequencies(rope)
    np.testing.assert_allclose(default.inv_freq, theta(rope), rtol=1e-14)
    assert default.attention_factor == 1.0
    for scaling in (
        LinearScaling(factor=1.0),
        NTKScaling(factor=1.0),
        YarnScaling(factor=1.0, original_max_position_embeddings=original),
        YarnScaling(factor=1.0, original_max_position_embeddings=original, ramp="paper", truncate=False),
        Llama3Scaling(factor=1.0, original_max_position_embeddings=original),
    ):
        scaled = frequencies(with_scaling(rope, scaling), seq_len)
        np.testing.assert_allclose(scaled.inv_freq, default.inv_freq, rtol=1e-14, err_msg=scaling.rope_type)
        assert scaled.attention_factor == 1.0
    full = RopeConfig(rope.head_dim, base=rope.base, scaling=ProportionalScaling(factor=1.0))
    np.testing.assert_array_equal(frequencies(full).inv_freq, frequencies(full.replace(scaling=None)).inv_freq)


def test_dynamic_factor_one_still_grows_the_base_above_the_original_length() -> None:
    """b·(s·n/L − (s−1))^(d/(d−2)) at s = 1 is b·(n/L)^(d/(d−2)): identity only up to L (transformers agrees)."""
    rope = RopeConfig(128, scaling=DynamicScaling(factor=1.0, original_max_position_embeddings=4096))
    np.testing.assert_array_equal(frequencies(rope, 4096).inv_freq, frequencies(rope.replace(scaling=None)).inv_freq)
    grown = frequencies(rope, 8192).inv_freq
    expected = RopeConfig(128, base=1e4 * 2 ** (128 / 126))
    np.testing.assert_allclose(grown, frequencies(expected).inv_freq, rtol=1e-14)


@PROPERTY
@given(rope=ropes(), factor=FACTORS)
def test_linear_is_default_divided_by_factor(rope: RopeConfig, factor: float) -> None:
    scaled = frequencies(with_scaling(rope, LinearScaling(factor=factor)))
    np.testing.assert_allclose(scaled.inv_freq, theta(rope) / factor, rtol=1e-14)
    assert scaled.attention_factor == 1.0


@PROPERTY
@given(
    rope=ropes(),
    factor=FACTORS,
    original=ORIGINAL_LENGTHS,
    betas=st.tuples(st.floats(1.0, 64.0), st.floats(0.01, 1.0)),
    truncate=st.booleans(),
    ramp=st.sampled_from(["transformers", "paper"]),
)
def test_yarn_lies_between_linear_and_default(
    rope: RopeConfig, factor: float, original: int, betas: tuple[float, float], truncate: bool, ramp: str
) -> None:
    spec = YarnScaling(
        factor=factor,
        original_max_position_embeddings=original,
        beta_fast=betas[0],
        beta_slow=betas[1],
        truncate=truncate,
        ramp=ramp,
    )
    yarn = frequencies(with_scaling(rope, spec))
    plain = theta(rope)
    assert np.all(yarn.inv_freq <= plain * (1 + 1e-14))
    assert np.all(yarn.inv_freq >= plain / factor * (1 - 1e-14))
    assert yarn.attention_factor == pytest.approx(0.1 * math.log(factor) + 1, rel=1e-14)


def test_yarn_attention_factor_forms() -> None:
    """g(s, m) = 0.1·m·ln s + 1 (YaRN eq. 22; DeepSeek-V2's ratio); explicit attention_factor overrides."""
    common = {"factor": 40.0, "original_max_position_embeddings": 4096}
    assert YarnScaling(**common).resolved_attention_factor() == pytest.approx(1 + 0.1 * math.log(40))
    ratio = YarnScaling(**common, mscale=0.707, mscale_all_dim=1.0).resolved_attention_factor()
    assert ratio == pytest.approx((1 + 0.0707 * math.log(40)) / (1 + 0.1 * math.log(40)))
    assert YarnScaling(**common, mscale=1.0, mscale_all_dim=1.0).resolved_attention_factor() == 1.0
    alone = YarnScaling(**common, mscale=0.707).resolved_attention_factor()
    assert alone == pytest.approx(1 + 0.1 * math.log(40))  # mscale without mscale_all_dim: ignored (transformers)
    explicit = YarnScaling(**common, mscale=0.707, mscale_all_dim=1.0, attention_factor=1.5)
    assert explicit.resolved_attention_factor() == 1.5


@PROPERTY
@given(
    rope=ropes(),
    factor=FACTORS,
    original=ORIGINAL_LENGTHS,
    bands=st.tuples(st.floats(0.25, 8.0), st.floats(0.01, 16.0)),
)
def test_llama3_keeps_high_frequencies_and_divides_low_ones(
    rope: RopeConfig, factor: float, original: int, bands: tuple[float, float]
) -> None:
    low, high = bands[0], bands[0] + bands[1]
    spec = Llama3Scaling(
        factor=factor, original_max_position_embeddings=original, low_freq_factor=low, high_freq_factor=high
    )
    scaled = frequencies(with_scaling(rope, spec)).inv_freq
    plain = theta(rope)
    wavelength = 2 * math.pi / plain
    kept = wavelength < original / high
    divided = wavelength > original / low
    np.testing.assert_allclose(scaled[kept], plain[kept], rtol=1e-14)
    np.testing.assert_allclose(scaled[divided], plain[divided] / factor, rtol=1e-14)
    middle = ~kept & ~divided
    assert np.all(scaled[middle] <= plain[middle] * (1 + 1e-14))
    assert np.all(scaled[middle] >= plain[middle] / factor * (1 - 1e-14))


def test_llama3_1_settings_split_the_pairs_into_three_bands() -> None:
    """Llama 3.1 (d = 128, b = 5e5, s = 8, L0 = 8192, lf = 1, hf = 4): 29 pairs kept (λ < 2048), 29 divided
    (λ > 8192), 6 blended."""
    spec = Llama3Scaling(factor=8.0, original_max_position_embeddings=8192)
    rope = RopeConfig(128, base=5e5, scaling=spec)
    scaled, plain = frequencies(rope).inv_freq, frequencies(rope.replace(scaling=None)).inv_freq
    wavelength = 2 * math.pi / plain
    assert np.array_equal(scaled == plain, wavelength < 2048)
    np.testing.assert_allclose(scaled[wavelength > 8192], plain[wavelength > 8192] / 8, rtol=1e-14)
    assert (wavelength < 2048).sum() == 29 and (wavelength > 8192).sum() == 29


@PROPERTY
@given(rope=ropes().filter(lambda rope: rope.dim >= 4), factor=FACTORS)
def test_ntk_scales_lowest_frequency_by_factor_and_keeps_highest(rope: RopeConfig, factor: float) -> None:
    scaled = frequencies(with_scaling(rope, NTKScaling(factor=factor))).inv_freq
    plain = theta(rope)
    assert scaled[0] == plain[0] == 1.0
    assert scaled[-1] == pytest.approx(plain[-1] / factor, rel=1e-12)
    assert np.all(np.diff(scaled / plain) <= 1e-15)  # the division grows monotonically from 1 to s


def test_ntk_base_for_llama_2() -> None:
    """b' = b·s^(d/(d−2)): s = 4, d = 128, b = 1e4 gives 40,890 (FACTS.md, seed 002)."""
    assert round(ntk_base(1e4, 4.0, 128)) == 40890
    rope = RopeConfig(128, scaling=NTKScaling(factor=4.0))
    np.testing.assert_allclose(frequencies(rope).inv_freq, theta(RopeConfig(128, base=ntk_base(1e4, 4, 128))))


@PROPERTY
@given(rope=ropes().filter(lambda rope: rope.dim >= 4), factor=FACTORS, original=ORIGINAL_LENGTHS, data=st.data())
def test_dynamic_is_identity_up_to_the_original_length(
    rope: RopeConfig, factor: float, original: int, data: st.DataObject
) -> None:
    dynamic = with_scaling(rope, DynamicScaling(factor=factor, original_max_position_embeddings=original))
    plain = frequencies(rope).inv_freq
    np.testing.assert_array_equal(frequencies(dynamic).inv_freq, plain)
    np.testing.assert_array_equal(frequencies(dynamic, data.draw(st.integers(1, original))).inv_freq, plain)
    longer = data.draw(st.integers(original + 1, 64 * original))
    grown_base = rope.base * (factor * longer / original - (factor - 1)) ** (rope.dim / (rope.dim - 2))
    np.testing.assert_allclose(
        frequencies(dynamic, longer).inv_freq, theta(RopeConfig(rope.head_dim, base=grown_base, rotary_dim=rope.dim))
    )


@PROPERTY
@given(
    rope=ropes().filter(lambda rope: rope.dim >= 4),
    factor=FACTORS,
    fixed=st.integers(1, 10**6),
    seq_len=st.integers(1, 10**6),
)
def test_fixed_mode_ignores_the_current_length(rope: RopeConfig, factor: float, fixed: int, seq_len: int) -> None:
    dynamic = with_scaling(
        rope, DynamicScaling(factor=factor, original_max_position_embeddings=4096, fixed_seq_len=fixed)
    )
    compatible = with_scaling(rope, DynamicScaling(factor=factor, original_max_position_embeddings=4096))
    np.testing.assert_array_equal(frequencies(dynamic, seq_len).inv_freq, frequencies(compatible, fixed).inv_freq)


@PROPERTY
@given(
    rope=ropes(),
    factor=FACTORS,
    original=ORIGINAL_LENGTHS,
    betas=st.tuples(st.floats(1.0, 64.0), st.floats(0.01, 1.0)),
    truncate=st.booleans(),
)
def test_yarn_ramps_agree_outside_the_ramp_region(
    rope: RopeConfig, factor: float, original: int, betas: tuple[float, float], truncate: bool
) -> None:
    """Pairs rotating at least beta_fast times (r_i = L0/λ_i >= beta_fast) or at most beta_slow times in L0."""
    common = {"factor": factor, "original_max_position_embeddings": original, "truncate": truncate}
    hf = with_scaling(rope, YarnScaling(**common, beta_fast=betas[0], beta_slow=betas[1]))
    paper = with_scaling(rope, YarnScaling(**common, beta_fast=betas[0], beta_slow=betas[1], ramp="paper"))
    rotations = original * theta(rope) / (2 * math.pi)
    outside = (rotations >= betas[0] * (1 + 1e-12)) | (rotations <= betas[1] * (1 - 1e-12))
    np.testing.assert_array_equal(frequencies(hf).inv_freq[outside], frequencies(paper).inv_freq[outside])


@pytest.mark.parametrize("factor", [4.0, 16.0, 32.0])
@pytest.mark.parametrize("original", [2048, 4096])
def test_yarn_ramps_differ_inside_the_ramp_region(factor: float, original: int) -> None:
    """Llama-2-like d = 128, b = 1e4: linear in i (transformers) vs linear in r = L0/λ_i (paper, eq. 18)."""
    rope = RopeConfig(128)
    hf = YarnScaling(factor=factor, original_max_position_embeddings=original)
    paper = YarnScaling(factor=factor, original_max_position_embeddings=original, ramp="paper")
    keep_hf, keep_paper = hf.keep_fraction(rope), paper.keep_fraction(rope)
    pairs = np.arange(64)
    inside = (pairs > correction_pair(32, 128, 1e4, original)) & (pairs < correction_pair(1, 128, 1e4, original))
    assert inside.sum() >= 20
    assert np.all(keep_hf[inside] != keep_paper[inside])
    assert np.abs(keep_hf - keep_paper).max() > 0.35  # r is exponential in i, so the two ramps bend apart


@PROPERTY
@given(rope=ropes(), factor=FACTORS, original=ORIGINAL_LENGTHS, seed=st.integers(0, 2**32 - 1))
def test_longrope_divides_by_the_chosen_factor_list(rope: RopeConfig, factor: float, original: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    short, long = rng.uniform(1, 4, rope.dim // 2), rng.uniform(1, 64, rope.dim // 2)
    spec = LongRopeScaling(
        short_factor=tuple(short), long_factor=tuple(long), original_max_position_embeddings=original, factor=factor
    )
    scaled = with_scaling(rope, spec)
    expected_attention = 1.0 if factor == 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    for seq_len, factors in ((None, short), (original, short), (original + 1, long)):
        result = frequencies(scaled, seq_len)
        np.testing.assert_allclose(result.inv_freq, theta(rope) / factors, rtol=1e-14)
        assert result.attention_factor == pytest.approx(expected_attention, rel=1e-14)


@PROPERTY
@given(head_dim=st.integers(16, 128).map(lambda n: 2 * n), data=st.data(), base=BASES, factor=FACTORS)
def test_proportional_uses_head_dim_exponents_and_zeros(
    head_dim: int, data: st.DataObject, base: float, factor: float
) -> None:
    rotary_dim = 2 * data.draw(st.integers(1, head_dim // 2))
    rope = RopeConfig(head_dim, base=base, rotary_dim=rotary_dim, scaling=ProportionalScaling(factor=factor))
    result = frequencies(rope).inv_freq
    assert result.shape == (head_dim // 2,)
    expected = [math.pow(base, -2 * i / head_dim) / factor for i in range(rotary_dim // 2)]
    np.testing.assert_allclose(result[: rotary_dim // 2], expected, rtol=1e-14)
    assert np.all(result[rotary_dim // 2 :] == 0)


@PROPERTY
@given(rope=ropes())
def test_partial_rotary_frequencies_use_the_rotary_dim(rope: RopeConfig) -> None:
    """θ_i = b^(−2i/rotary_dim), rotary_dim/2 of them — not head_dim (FACTS.md, user complaint 5)."""
    result = frequencies(rope).inv_freq
    assert result.shape == (rope.dim // 2,)
    np.testing.assert_allclose(result, theta(rope), rtol=1e-14)
