"""Length-dependent methods (dynamic NTK, LongRoPE) inside :class:`ropekit.RotaryEmbedding`.

Two modes. ``fixed_seq_len=None`` reproduces transformers' rotary modules call by call, history included
(oracle: ``LlamaRotaryEmbedding`` with a dynamic config, ``Phi3RotaryEmbedding`` with a longrope config, fed
the same sequence of position batches). ``fixed_seq_len=N`` keeps one set of frequencies, so keys rotated
early equal keys rotated later (oracle: the module's own earlier output, bit for bit).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ropekit
from ropekit import RopeConfig, RotaryEmbedding, frequencies
from ropekit.scaling import DynamicScaling, LongRopeScaling

HEAD_DIM, HEADS = 64, 2
ORIGINAL = 256
DYNAMIC_FACTOR = 4.0
# Call lengths (max position + 1): below L, growth, no change inside the cached length, exactly L after growth
# (no reset: transformers resets only strictly below L), reset below L, growth again, L + 1.
CALLS = [100, 300, 1000, 600, 256, 255, 50, 700, 257, 2000, 1]


def short_and_long_factors() -> tuple[list[float], list[float]]:
    pairs = np.arange(HEAD_DIM // 2)
    return (1.0 + 0.02 * pairs).tolist(), (1.0 + 0.5 * pairs).tolist()


def positions_for(length: int, step: int) -> torch.Tensor:
    """Alternate prefill (0 … length−1) and single-token decoding (length − 1 only): both set max + 1 = length."""
    return torch.arange(length) if step % 2 == 0 else torch.tensor([length - 1])


def angle_tolerance(length: int) -> float:
    """transformers forms angles in float32: |error| <= a few ulp of the largest angle (inv_freq <= 1)."""
    return 4 * float(torch.finfo(torch.float32).eps) * length + 1e-6


def assert_same_tables(ours: RotaryEmbedding, hf_module: torch.nn.Module, positions: torch.Tensor) -> None:
    """Same state (inv_freq, attention factor) and same cos/sin as transformers after this call."""
    x = torch.zeros(1, HEADS, positions.numel(), HEAD_DIM)
    hf_cos, hf_sin = hf_module(x, positions[None])  # (1, seq, head_dim), halves repeated
    cos, sin = ours.cos_sin(positions[None])  # (1, seq, head_dim / 2)
    np.testing.assert_allclose(ours.frequencies.inv_freq, hf_module.inv_freq.double().numpy(), rtol=1e-6)
    assert ours.frequencies.attention_factor == pytest.approx(hf_module.attention_scaling, rel=1e-12)
    atol = angle_tolerance(int(positions.max()) + 1) * ours.frequencies.attention_factor
    for table, hf_table in ((cos, hf_cos), (sin, hf_sin)):
        torch.testing.assert_close(table, hf_table[..., : HEAD_DIM // 2], rtol=0, atol=atol)
        torch.testing.assert_close(table, hf_table[..., HEAD_DIM // 2 :], rtol=0, atol=atol)


@pytest.fixture(scope="module")
def transformers_quiet():
    transformers = pytest.importorskip("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield transformers
    transformers.logging.set_verbosity(verbosity)


def llama_dynamic(transformers):
    config = transformers.LlamaConfig(
        hidden_size=HEAD_DIM * HEADS,
        num_attention_heads=HEADS,
        max_position_embeddings=ORIGINAL,
        rope_parameters={"rope_type": "dynamic", "factor": DYNAMIC_FACTOR, "rope_theta": 10000.0},
    )
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return config, LlamaRotaryEmbedding(config)


def phi3_longrope(transformers, max_len: int = 4 * ORIGINAL):
    short, long = short_and_long_factors()
    config = transformers.Phi3Config(
        hidden_size=HEAD_DIM * HEADS,
        num_attention_heads=HEADS,
        max_position_embeddings=max_len,
        original_max_position_embeddings=ORIGINAL,
        rope_parameters={"rope_type": "longrope", "short_factor": short, "long_factor": long, "rope_theta": 1e4},
    )
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    return config, Phi3RotaryEmbedding(config)


@pytest.mark.hf
def test_dynamic_compatible_mode_follows_llama_call_by_call(transformers_quiet) -> None:
    config, hf_module = llama_dynamic(transformers_quiet)
    ours = RotaryEmbedding(ropekit.from_hf_config(config))
    assert ours.config.scaling.fixed_seq_len is None
    for step, length in enumerate(CALLS):
        assert_same_tables(ours, hf_module, positions_for(length, step))


@pytest.mark.hf
def test_dynamic_rotation_equals_llama_attention_inputs(transformers_quiet) -> None:
    """End to end: q, k rotated by ropekit's module equal transformers' ``apply_rotary_pos_emb``."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    config, hf_module = llama_dynamic(transformers_quiet)
    ours = RotaryEmbedding(ropekit.from_hf_config(config))
    generator = torch.Generator().manual_seed(0)
    for length in (200, 900, 300):
        q = torch.randn(1, HEADS, length, HEAD_DIM, generator=generator)  # (batch, heads, seq, head_dim)
        k = torch.randn(1, HEADS, length, HEAD_DIM, generator=generator)
        positions = torch.arange(length)
        hf_q, hf_k = apply_rotary_pos_emb(q, k, *hf_module(q, positions[None]))
        our_q, our_k = ours(q, k, positions, seq_dim=2)
        atol = 8 * angle_tolerance(length)
        torch.testing.assert_close(our_q, hf_q, rtol=0, atol=atol)
        torch.testing.assert_close(our_k, hf_k, rtol=0, atol=atol)


@pytest.mark.hf
def test_dynamic_history_dependence_is_reproduced(transformers_quiet) -> None:
    """A length-300 call after a length-1000 call keeps the 1000 base; on a fresh module it uses the 300 base."""
    config, hf_after_long = llama_dynamic(transformers_quiet)
    _, hf_fresh = llama_dynamic(transformers_quiet)
    after_long = RotaryEmbedding(ropekit.from_hf_config(config))
    fresh = RotaryEmbedding(ropekit.from_hf_config(config))
    assert_same_tables(after_long, hf_after_long, torch.arange(1000))
    assert_same_tables(after_long, hf_after_long, torch.arange(300))
    assert_same_tables(fresh, hf_fresh, torch.arange(300))
    assert not np.allclose(after_long.frequencies.inv_freq, fresh.frequencies.inv_freq, rtol=1e-3)
    np.testing.assert_array_equal(after_long.frequencies.inv_freq, frequencies(after_long.config, 1000).inv_freq)
    np.testing.assert_array_equal(fresh.frequencies.inv_freq, frequencies(fresh.config, 300).inv_freq)


@pytest.mark.hf
def test_longrope_compatible_mode_follows_phi3_call_by_call(transformers_quiet) -> None:
    config, hf_module = phi3_longrope(transformers_quiet)
    rope = ropekit.from_hf_config(config)
    assert rope.scaling.original_max_position_embeddings == ORIGINAL and rope.scaling.factor == 4.0
    ours = RotaryEmbedding(rope)
    for step, length in enumerate([100, ORIGINAL, ORIGINAL + 1, 100, 1000, ORIGINAL, 3000, 1]):
        assert_same_tables(ours, hf_module, positions_for(length, step))
        expected = "long_factor" if length > ORIGINAL else "short_factor"
        factors = np.asarray(getattr(rope.scaling, expected))
        np.testing.assert_allclose(
            ours.frequencies.inv_freq * factors, frequencies(rope.replace(scaling=None)).inv_freq
        )


@pytest.mark.hf
def test_longrope_attention_factor_matches_phi3(transformers_quiet) -> None:
    """A = √(1 + ln s / ln L0) with s = L/L0, the same at every length; cos(0) = A."""
    config, hf_module = phi3_longrope(transformers_quiet, max_len=32 * ORIGINAL)
    ours = RotaryEmbedding(ropekit.from_hf_config(config))
    expected = math.sqrt(1 + math.log(32) / math.log(ORIGINAL))
    for length in (10, 5000):
        assert_same_tables(ours, hf_module, torch.arange(length))
        assert ours.frequencies.attention_factor == pytest.approx(expected, rel=1e-14)
        cos, sin = ours.cos_sin(torch.tensor([0]))
        torch.testing.assert_close(cos, torch.full_like(cos, expected), rtol=1e-7, atol=0)
        assert torch.all(sin == 0)


def test_longrope_at_exactly_the_original_length_uses_short_factors() -> None:
    short, long = short_and_long_factors()
    spec = LongRopeScaling(short_factor=short, long_factor=long, original_max_position_embeddings=ORIGINAL)
    rope = RopeConfig(HEAD_DIM, scaling=spec)
    plain = frequencies(rope.replace(scaling=None)).inv_freq
    np.testing.assert_allclose(frequencies(rope, ORIGINAL).inv_freq, plain / np.asarray(short), rtol=1e-15)
    np.testing.assert_allclose(frequencies(rope, ORIGINAL + 1).inv_freq, plain / np.asarray(long), rtol=1e-15)
    module = RotaryEmbedding(rope)
    module.cos_sin(torch.arange(ORIGINAL))  # positions 0 … L0−1: length exactly L0
    np.testing.assert_allclose(module.frequencies.inv_freq, plain / np.asarray(short), rtol=1e-15)
    module.cos_sin(torch.tensor([ORIGINAL]))  # position L0: length L0 + 1
    np.testing.assert_allclose(module.frequencies.inv_freq, plain / np.asarray(long), rtol=1e-15)


def kv_cache_keys(module: RotaryEmbedding, keys: torch.Tensor, prompt: int, total: int) -> tuple[torch.Tensor, ...]:
    """Rotate the first ``prompt`` keys at prefill, decode one token at a time to ``total``, then re-rotate
    the same keys as a full-length prefill would. Returns (keys as cached, keys as a long call rotates them).

    Shapes: keys ``(1, total, heads, head_dim)``.
    """
    _, cached = module(keys[:, :prompt], keys[:, :prompt])
    for position in range(prompt, total):
        module(keys[:, position : position + 1], keys[:, position : position + 1], offset=position)
    _, late = module(keys, keys)
    return cached, late[:, :prompt]


@pytest.mark.parametrize("method", ["dynamic", "longrope"])
def test_fixed_mode_keeps_the_kv_cache_consistent_and_compatible_mode_does_not(method: str) -> None:
    short, long = short_and_long_factors()
    keys = torch.randn(1, 3 * ORIGINAL, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(0))
    fixed_len = 4 * ORIGINAL
    if method == "dynamic":
        compatible = DynamicScaling(factor=DYNAMIC_FACTOR, original_max_position_embeddings=ORIGINAL)
        fixed = DynamicScaling(
            factor=DYNAMIC_FACTOR, original_max_position_embeddings=ORIGINAL, fixed_seq_len=fixed_len
        )
    else:
        common = {"short_factor": short, "long_factor": long, "original_max_position_embeddings": ORIGINAL}
        compatible = LongRopeScaling(**common)
        fixed = LongRopeScaling(**common, fixed_seq_len=fixed_len)

    cached, late = kv_cache_keys(RotaryEmbedding(RopeConfig(HEAD_DIM, scaling=fixed)), keys, 64, 3 * ORIGINAL)
    assert torch.equal(cached, late)  # the cache stays valid, bit for bit

    cached, late = kv_cache_keys(RotaryEmbedding(RopeConfig(HEAD_DIM, scaling=compatible)), keys, 64, 3 * ORIGINAL)
    assert not torch.allclose(cached, late, atol=1e-3)  # keys in the cache carry the old rotation

    # the fixed mode uses, at every length, what the compatible mode uses at the declared length
    np.testing.assert_array_equal(
        frequencies(RopeConfig(HEAD_DIM, scaling=fixed), 1).inv_freq,
        frequencies(RopeConfig(HEAD_DIM, scaling=compatible), fixed_len).inv_freq,
    )


@pytest.mark.hf
def test_rotary_embedding_applies_the_yarn_attention_factor(transformers_quiet) -> None:
    """cos/sin carry A (so logits scale by A²), like transformers' ``attention_scaling``."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers_quiet.LlamaConfig(
        hidden_size=HEAD_DIM * HEADS,
        num_attention_heads=HEADS,
        max_position_embeddings=16 * ORIGINAL,
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": ORIGINAL},
    )
    ours = RotaryEmbedding(ropekit.from_hf_config(config))
    expected = 0.1 * math.log(16.0) + 1
    assert ours.frequencies.attention_factor == pytest.approx(expected, rel=1e-14)
    assert_same_tables(ours, LlamaRotaryEmbedding(config), torch.arange(512))
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, HEADS, HEAD_DIM, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, HEADS, HEAD_DIM, generator=generator, dtype=torch.float64)
    rotated_q, rotated_k = ours(q, k, torch.tensor([37]))
    logits = (rotated_q * rotated_k).sum(-1)  # same position: the rotation cancels, A² remains
    torch.testing.assert_close(logits, expected**2 * (q * k).sum(-1), rtol=1e-12, atol=0)
