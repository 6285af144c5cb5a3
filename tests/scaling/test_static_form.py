"""The one export decision: each answer checked against the method's own frequencies or a closed form."""

from __future__ import annotations

import numpy as np

from ropekit import RopeConfig
from ropekit.scaling import DynamicScaling, LongRopeScaling, NTKScaling, YarnScaling, frequencies, inv_freq
from ropekit.scaling.static_form import static_form

D, BASE, L0 = 16, 10000.0, 64


def test_a_frozen_dynamic_ntk_declares_its_exact_base() -> None:
    spec = DynamicScaling(factor=4.0, original_max_position_embeddings=L0, fixed_seq_len=256)
    form = static_form(RopeConfig(D, base=BASE, scaling=spec))
    assert form.base_declared and form.factors is None and form.frozen_at == 256
    assert form.new_base == BASE * (4.0 * 256 / L0 - 3.0) ** (D / (D - 2))  # the closed form, float64


def test_length_following_methods_have_no_static_form_and_name_their_switch() -> None:
    dynamic = static_form(
        RopeConfig(D, base=BASE, scaling=DynamicScaling(factor=2.0, original_max_position_embeddings=L0))
    )
    longrope = LongRopeScaling(short_factor=(1.0,) * 8, long_factor=(2.0,) * 8, original_max_position_embeddings=L0)
    switching = static_form(RopeConfig(D, base=BASE, scaling=longrope))
    for form in (dynamic, switching):
        assert form.named and not form.static and form.switch_lengths == (L0,) and form.follows_length


def test_per_pair_factors_reproduce_the_methods_frequencies() -> None:
    rope = RopeConfig(D, base=BASE, scaling=YarnScaling(factor=4.0, original_max_position_embeddings=L0, ramp="paper"))
    form = static_form(rope)
    assert not form.named and form.new_base is None
    ours = frequencies(rope)
    np.testing.assert_allclose(inv_freq(D, BASE) / np.asarray(form.factors), ours.inv_freq, rtol=1e-15)
    assert form.attention_factor == ours.attention_factor and form.original_length == L0 and form.factor == 4.0


def test_a_static_ntk_is_a_declared_base_change() -> None:
    form = static_form(RopeConfig(D, base=BASE, scaling=NTKScaling(factor=4.0)))
    assert form.base_declared and form.new_base == BASE * 4.0 ** (D / (D - 2)) and form.switch_lengths == ()
