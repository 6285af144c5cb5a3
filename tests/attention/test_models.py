"""The methods inside models: the bundled tiny model, a random Llama and a random Gemma 3 (global layers only),
against a forward whose attention is the naive oracle; KV-cached decoding against the full forward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers.hf_models import random_hf_model
from ropekit.attention import get_attention, list_attentions

NAMES = sorted(list_attentions())
LENGTH = 80
BASE = 10000.0
HEAD_DIM = 16


def inv_freq(base: float = BASE, dim: int = HEAD_DIM) -> torch.Tensor:
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


# ---- the bundled tiny model ------------------------------------------------------------------------------------


def tiny_oracle_logits(model, ids: torch.Tensor, name: str, oracle) -> torch.Tensor:
    """TinyLM's forward written out, attention by the oracle on unrotated q and k."""
    config = model.config
    freqs = inv_freq(config.rope_base, config.head_dim)
    x = model.embed(ids)
    batch, seq = ids.shape
    for block in model.blocks:
        h, attn = block.attn_norm(x), block.attn
        q = attn.q_proj(h).view(batch, seq, config.n_heads, -1).transpose(1, 2)  # (b, h, s, hd)
        k = attn.k_proj(h).view(batch, seq, config.n_kv_heads, -1).transpose(1, 2)
        v = attn.v_proj(h).view(batch, seq, config.n_kv_heads, -1).transpose(1, 2)
        out = oracle.attention(name, q, k, v, freqs, **oracle.CASES[name]).float()
        x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))
        x = x + block.mlp(block.mlp_norm(x))
    return F.linear(model.norm(x), model.embed.weight)


@pytest.mark.parametrize("name", NAMES)
def test_tiny_model_matches_oracle(name: str, oracle):
    from ropekit.model import load

    model = load("tiny").eval()
    ids = torch.randint(0, 256, (1, LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = tiny_oracle_logits(model, ids, name, oracle)
        ours = model.set_attention(get_attention(name)(**oracle.CASES[name]))(ids)
        assert float((ours - expected).abs().max()) < 1e-4 * float(expected.abs().max())
        wide = {k: (LENGTH if k in ("window", "chunk_size", "shift") else v) for k, v in oracle.CASES[name].items()}
        plain = model.set_attention(None)(ids)
        assert float((model.set_attention(get_attention(name)(**wide))(ids) - plain).abs().max()) < 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_tiny_model_decodes_with_a_kv_cache(name: str, oracle):
    """Prefill, then one token at a time through the tiny model's KV cache: the full forward's logits."""
    from ropekit.model import load
    from ropekit.model.kv_cache import KVCache

    model = load("tiny").eval().set_attention(get_attention(name)(**oracle.CASES[name]))
    ids = torch.randint(0, 256, (1, LENGTH), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache()
        steps = [model(ids[:, : LENGTH - 4], cache=cache)]
        for t in range(LENGTH - 4, LENGTH):
            steps.append(model(ids[:, t : t + 1], cache=cache))
    assert float((torch.cat(steps, dim=1) - full).abs().max()) < 1e-4


def test_tiny_model_refuses_shifted_positions():
    from ropekit.model import load

    model = load("tiny").set_attention(get_attention("rerope")(window=8))
    with pytest.raises(ValueError, match="positions 0"):
        model(torch.zeros(1, 16, dtype=torch.int64), torch.arange(5, 21))


# ---- transformers models -----------------------------------------------------------------------------------------


#: the random models' sizes beyond the factory's (2 layers, 4 heads and 2 KV heads, hidden 64)
SIZES = {"vocab": 101, "intermediate": 96, "positions": 32}


def llama():
    rope = {"rope_type": "default", "rope_theta": BASE}
    return random_hf_model("llama", head_dim=HEAD_DIM, rope_parameters=rope, **SIZES).eval()


def gemma3():
    rope = {
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    }
    layer_types = ["sliding_attention", "full_attention"]
    options = {"sliding_window": 16, "layer_types": layer_types, "rope_parameters": rope}
    return random_hf_model("gemma3", head_dim=HEAD_DIM, **options, **SIZES).eval()


MODELS = {"llama": (llama, BASE), "gemma3": (gemma3, 1e6)}


def oracle_logits(model, ids: torch.Tensor, name: str, base: float, oracle) -> torch.Tensor:
    """The model's own forward with its global layers' attention replaced by the oracle (sliding layers: sdpa)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if getattr(module, "is_sliding", False):
            return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
        out = oracle.attention(name, query, key, value, inv_freq(base), scaling, rotated=True, **oracle.CASES[name])
        return out.to(query.dtype).transpose(1, 2), None

    AttentionInterface.register("attention_oracle_test", forward)
    AttentionMaskInterface.register("attention_oracle_test", sdpa_mask)
    previous = model.config._attn_implementation
    model.set_attn_implementation("attention_oracle_test")
    try:
        return model(ids).logits
    finally:
        model.set_attn_implementation(previous)


#: every method on Llama; Gemma 3 with Self-Extend by default, the others under -m slow (each case runs the oracle)
MODEL_CASES = [pytest.param("llama", name, id=f"llama-{name}") for name in NAMES] + [
    pytest.param("gemma3", name, id=f"gemma3-{name}", marks=() if name == "self_extend" else pytest.mark.slow)
    for name in NAMES
]


@pytest.mark.hf
@pytest.mark.parametrize(("arch", "name"), MODEL_CASES)
def test_transformers_model_matches_oracle_and_decodes(arch: str, name: str, oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention, describe_attention
    from ropekit.integrations.hf.patch_rope import apply_scaling

    build, base = MODELS[arch]
    model = build()
    ids = torch.randint(0, 101, (1, LENGTH), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        apply_scaling(model, None)  # ropekit's float64 rotary: the oracle's frequencies exactly
        plain = model(ids).logits
        expected = oracle_logits(model, ids, name, base, oracle)
        apply_attention(model, get_attention(name)(**oracle.CASES[name]))
        ours = model(ids).logits
        assert float((ours - expected).abs().max()) < 1e-5
        assert float((ours - plain).abs().max()) > 1e-4  # the method changes something at this length
        described = describe_attention(model)
        assert described["attention"] == name
        assert described["layer_types"] == (["full_attention"] if arch == "gemma3" else None)
        prefill = model(ids[:, : LENGTH - 5], use_cache=True)
        cache, steps = prefill.past_key_values, [prefill.logits]
        for t in range(LENGTH - 5, LENGTH):
            step = model(ids[:, t : t + 1], past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            steps.append(step.logits)
        assert float((torch.cat(steps, dim=1) - ours).abs().max()) < 1e-5
        apply_attention(model, None)
        assert float((model(ids).logits - plain).abs().max()) < 1e-6


@pytest.mark.hf
@pytest.mark.parametrize("name", NAMES)
def test_transformers_window_covering_the_length_is_plain(name: str, oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = llama()
    ids = torch.randint(0, 101, (1, 40), generator=torch.Generator().manual_seed(3))
    wide = {k: (40 if k in ("window", "chunk_size", "shift") else v) for k, v in oracle.CASES[name].items()}
    with torch.no_grad():
        apply_scaling(model, None)
        plain = model(ids).logits
        apply_attention(model, get_attention(name)(**wide))
        assert float((model(ids).logits - plain).abs().max()) < 1e-5


@pytest.mark.hf
def test_composes_with_a_scaling():
    """YaRN installed first, then Self-Extend: the method re-positions with YaRN's frequencies (oracle agrees)."""
    from ropekit.integrations.hf.patch_rope import apply_scaling
    from ropekit.scaling import get_scaling

    model = llama()
    ids = torch.randint(0, 101, (1, 64), generator=torch.Generator().manual_seed(4))
    yarn = get_scaling("yarn").make(factor=2.0, original_max_position_embeddings=32)
    with torch.no_grad():
        apply_scaling(model, yarn)
        scaled = model(ids).logits
    _self_extend_changes_only_a_short_window(model, ids, scaled, covering=64)


def _self_extend_changes_only_a_short_window(model, ids, reference, *, covering: int) -> None:
    """Self-Extend with a window of ``covering`` tokens (the whole input) gives ``reference``; a window of 8 does not."""
    from ropekit.integrations.hf.patch_attention import apply_attention

    with torch.no_grad():
        apply_attention(model, get_attention("self_extend")(group=2, window=covering))
        assert float((model(ids).logits - reference).abs().max()) < 1e-5
        apply_attention(model, get_attention("self_extend")(group=2, window=8))
        assert float((model(ids).logits - reference).abs().max()) > 1e-4


@pytest.mark.hf
@pytest.mark.parametrize("arch", ["phi3", "gpt_neox"])
def test_fused_qkv_and_partial_rotary_models(arch: str):
    """Phi-3 (one qkv_proj) and GPT-NeoX (rotary on half the head): plain when the window covers the length."""
    from ropekit.integrations.hf.patch_rope import apply_scaling

    own = {"rotary_pct": 0.5} if arch == "gpt_neox" else {}  # GPT-NeoX has no grouped KV heads
    model = random_hf_model(arch, pad_token_id=0, **SIZES, **own).eval()
    ids = torch.randint(0, 101, (1, 48), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        apply_scaling(model, None)
        plain = model(ids).logits
    _self_extend_changes_only_a_short_window(model, ids, plain, covering=48)
