"""ropekit scalings as llama.cpp RoPE fields and flags.

Oracle: ``helpers/llamacpp_port.py``, a direct port of llama.cpp's own arithmetic (llama-cpp-python 0.3.36's vendored tree), written here from the
C source independently of :mod:`ropekit.integrations.gguf.llamacpp_rope`: ``load_hparams`` (scale = 1/factor, ``none``
forces 1), ``llama_context`` (ext_factor 1 for YaRN; ``yarn_attn_factor`` = g(s)/(1 + 0.1 ln s) · attn_factor),
``ggml_rope_yarn_corr_dims`` and ``rope_yarn`` (θ/ff, the ramp in i0/2, mscale · (1 + 0.1 ln(1/scale)) under YaRN).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.llamacpp_port import llamacpp_reference
from ropekit.config import RopeConfig
from ropekit.integrations.gguf.llamacpp_rope import (
    LlamaCppRope,
    llamacpp_flags,
    llamacpp_options,
    to_llamacpp,
)
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    YarnScaling,
    frequencies,
)

D, BASE, L0 = 64, 100000.0, 8192  # SmolLM2-135M's RoPE


EXPRESSIBLE = {
    "plain": None,
    "linear": LinearScaling(factor=2.0),
    "yarn": YarnScaling(factor=2.0, original_max_position_embeddings=L0),
    "yarn-attention": YarnScaling(factor=4.0, original_max_position_embeddings=L0, attention_factor=1.3),
    "yarn-paper": YarnScaling(factor=2.0, original_max_position_embeddings=L0, ramp="paper"),
    "yarn-betas": YarnScaling(factor=2.0, original_max_position_embeddings=L0, beta_fast=16.0, beta_slow=2.0),
    "llama3": Llama3Scaling(factor=2.0, original_max_position_embeddings=L0, low_freq_factor=1.0, high_freq_factor=4.0),
    "longrope": LongRopeScaling(
        short_factor=tuple(np.linspace(1, 2, D // 2)),
        long_factor=tuple(np.linspace(1, 2, D // 2)),
        original_max_position_embeddings=L0,
        factor=2.0,
    ),
    "ntk": NTKScaling(factor=2.0),
    "base": BaseChange(base=500000.0),
    "dynamic-frozen": DynamicScaling(factor=2.0, original_max_position_embeddings=L0, fixed_seq_len=4 * L0),
}


@pytest.mark.parametrize("name", list(EXPRESSIBLE))
@pytest.mark.parametrize("rope_freqs", [True, False])
def test_llamacpp_computes_ropekits_frequencies(name: str, rope_freqs: bool) -> None:
    """The fields chosen, read by llama.cpp's own arithmetic, give ropekit's float64 frequencies and attention."""
    rope = RopeConfig(D, base=BASE, scaling=EXPRESSIBLE[name])
    try:
        form = to_llamacpp(rope, rope_freqs=rope_freqs, betas=False)
    except ValueError as error:
        assert not rope_freqs and "rope_freqs" in str(error)  # only per-pair methods need the tensor
        assert name in ("yarn-paper", "yarn-betas", "llama3", "longrope")
        return
    ours = frequencies(rope, seq_len=getattr(rope.scaling, "fixed_seq_len", None))
    angles, mscale = llamacpp_reference(form)
    np.testing.assert_allclose(angles, ours.inv_freq, rtol=1e-12)
    assert mscale == pytest.approx(ours.attention_factor, rel=1e-12)


def test_named_forms_are_used_where_llamacpp_has_them() -> None:
    """YaRN with transformers' ramp and default betas is metadata; a base change is a new base; the rest per pair."""
    form = lambda spec: to_llamacpp(RopeConfig(D, base=BASE, scaling=spec), rope_freqs=True, betas=False)  # noqa: E731
    assert form(EXPRESSIBLE["yarn"]).scaling_type == "yarn" and form(EXPRESSIBLE["yarn"]).freq_factors is None
    assert form(EXPRESSIBLE["linear"]).scaling_type == "linear"
    assert form(EXPRESSIBLE["base"]) == LlamaCppRope(D, 500000.0)
    assert form(EXPRESSIBLE["ntk"]).freq_factors is None and form(EXPRESSIBLE["ntk"]).freq_base > BASE
    yarn_attention = form(EXPRESSIBLE["yarn-attention"])  # A = 1.3 = attn_factor · (1 + 0.1 ln 4)
    assert yarn_attention.scaling_type == "yarn"
    assert yarn_attention.attn_factor == pytest.approx(1.3 / (1 + 0.1 * math.log(4)))
    for name in ("yarn-paper", "yarn-betas", "llama3", "longrope"):
        assert form(EXPRESSIBLE[name]).scaling_type == "none" and form(EXPRESSIBLE[name]).freq_factors is not None
    flags_form = to_llamacpp(RopeConfig(D, base=BASE, scaling=EXPRESSIBLE["yarn-betas"]), rope_freqs=False, betas=True)
    assert (flags_form.scaling_type, flags_form.beta_fast, flags_form.beta_slow) == ("yarn", 16.0, 2.0)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (DynamicScaling(factor=2.0, original_max_position_embeddings=L0), "follow the current sequence length"),
        (
            LongRopeScaling(
                short_factor=(1.0,) * (D // 2), long_factor=(2.0,) * (D // 2), original_max_position_embeddings=L0
            ),
            "n_ctx",
        ),
        (ProportionalScaling(factor=1.0), "frequency <= 0"),
    ],
)
def test_what_llamacpp_cannot_run_is_refused_with_the_reason(spec, reason: str) -> None:
    rope = RopeConfig(D, base=BASE, scaling=spec)
    if isinstance(spec, ProportionalScaling):  # half the pairs rotate, the rest have frequency 0
        rope = RopeConfig(D, base=BASE, rotary_dim=D // 2, scaling=spec)
    with pytest.raises(ValueError, match=reason):
        to_llamacpp(rope, rope_freqs=True, betas=True)


def test_flags_map_each_field_to_llamacpps_option() -> None:
    """The flags and llama_cpp.Llama options name the same values (common/arg.cpp: --rope-scale N sets 1/N)."""
    yarn = LlamaCppRope(D, BASE, "yarn", 2.0, L0)
    assert llamacpp_options(yarn) == {
        "rope_scaling_type": 2,
        "rope_freq_base": BASE,
        "rope_freq_scale": 0.5,
        "yarn_orig_ctx": L0,
        "yarn_ext_factor": 1.0,
        "yarn_beta_fast": 32.0,
        "yarn_beta_slow": 1.0,
    }
    assert llamacpp_flags(yarn) == [
        "--rope-scaling", "yarn", "--rope-freq-base", "100000", "--rope-scale", "2", "--yarn-orig-ctx", "8192",
        "--yarn-ext-factor", "1", "--yarn-beta-fast", "32", "--yarn-beta-slow", "1",
    ]  # fmt: skip
    assert llamacpp_flags(LlamaCppRope(D, 5e5)) == ["--rope-scaling", "none", "--rope-freq-base", "500000"]
    assert llamacpp_flags(LlamaCppRope(D, BASE, "linear", 4.0)) == [
        "--rope-scaling", "linear", "--rope-freq-base", "100000", "--rope-scale", "4",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="rope_freqs"):
        llamacpp_flags(LlamaCppRope(D, BASE, freq_factors=(1.0,) * (D // 2)))
    with pytest.raises(ValueError, match="overwrites --yarn-attn-factor"):
        llamacpp_flags(LlamaCppRope(D, BASE, "yarn", 2.0, L0, attn_factor=1.2))
