"""Attention methods on models with NoPE layers (SmolLM3, Llama 4): the method reaches the layers that rotate q and k only.

Oracles: transformers' own logits (a model whose layers are all NoPE must not change at all), and the model's own
forward with the naive oracle of ``conftest.py`` on the layers whose transformers attention module says
``use_rope`` and sdpa on the others (ropekit's layout is not consulted). Llama 4 as well, whose interleaved pairs
the oracle sees reordered into its rotate-half layout.
"""

from __future__ import annotations

import pytest
import torch

from helpers.hf_models import random_hf_model
from ropekit.attention import get_attention, list_attentions

pytest.importorskip("transformers")
pytestmark = pytest.mark.hf

NAMES = sorted(list_attentions())
LENGTH = 80
BASE = 10000.0
HEAD_DIM = 16


def sizes(layers: int) -> dict:
    """The random models' config beyond the factory's sizes: ``layers`` layers of 4 heads and 2 KV heads of 16."""
    return {
        "vocab": 101,
        "intermediate": 96,
        "layers": layers,
        "head_dim": HEAD_DIM,
        "positions": 32,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


def smollm3(no_rope_layers: list[int] | None, layers: int = 4):
    """A random SmolLM3 (``no_rope_layers``: 1 = RoPE, 0 = NoPE; ``None``: every 4th layer NoPE), its matrices
    scaled so that positions move the logits."""
    rope = {"rope_type": "default", "rope_theta": BASE}
    return random_hf_model(
        "smollm3", scale=3.0, no_rope_layers=no_rope_layers, rope_parameters=rope, **sizes(layers)
    ).eval()


def inv_freq() -> torch.Tensor:
    return BASE ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)


def per_layer_oracle_logits(model, ids: torch.Tensor, name: str, oracle) -> torch.Tensor:
    """The model's forward with the oracle on the layers transformers rotates (``use_rope``), sdpa on the rest."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if not module.use_rope:
            return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
        out = oracle.attention(name, query, key, value, inv_freq(), scaling, rotated=True, **oracle.CASES[name])
        return out.to(query.dtype).transpose(1, 2), None

    AttentionInterface.register("nope_oracle_test", forward)
    AttentionMaskInterface.register("nope_oracle_test", sdpa_mask)
    previous = model.config._attn_implementation
    model.set_attn_implementation("nope_oracle_test")
    try:
        return model(ids).logits
    finally:
        model.set_attn_implementation(previous)


@pytest.mark.parametrize("name", NAMES)
def test_a_model_whose_layers_are_all_nope_is_unchanged(name: str, oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention, describe_attention

    model = smollm3([0, 0, 0], layers=3)
    ids = torch.randint(0, 101, (1, 200), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(ids).logits  # transformers alone
        apply_attention(model, get_attention(name)(**oracle.CASES[name]))
        assert torch.equal(model(ids).logits, plain)
    described = describe_attention(model)
    assert described["attention"] == name and described["layers"] == [] and described["nope_layers"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("no_rope_layers", "name"),
    [([1, 0, 1, 0], name) for name in NAMES] + [(None, "self_extend"), ([0, 1, 1, 1], "dual_chunk")],
)
def test_mixed_layouts_match_a_per_layer_oracle_and_decode(no_rope_layers, name: str, oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention, describe_attention
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = smollm3(no_rope_layers)
    flags = [int(layer.self_attn.use_rope) for layer in model.model.layers]  # transformers' own reading
    ids = torch.randint(0, 101, (1, LENGTH), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        apply_scaling(model, None)  # ropekit's float64 rotary: the oracle's frequencies exactly
        plain = model(ids).logits
        expected = per_layer_oracle_logits(model, ids, name, oracle)
        apply_attention(model, get_attention(name)(**oracle.CASES[name]))
        ours = model(ids).logits
        assert float((ours - expected).abs().max()) < 1e-5
        assert float((ours - plain).abs().max()) > 1e-4  # the RoPE layers did change
        prefill = model(ids[:, : LENGTH - 4], use_cache=True)
        cache, steps = prefill.past_key_values, [prefill.logits]
        for t in range(LENGTH - 4, LENGTH):
            step = model(ids[:, t : t + 1], past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            steps.append(step.logits)
        assert float((torch.cat(steps, dim=1) - ours).abs().max()) < 1e-5
    described = describe_attention(model)
    assert described["layers"] == [i for i, f in enumerate(flags) if f]
    assert described["nope_layers"] == [i for i, f in enumerate(flags) if not f]


def test_every_layer_of_a_plain_model_gets_the_method(oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention, describe_attention

    settings = {k: v for k, v in sizes(3).items() if k != "pad_token_id"}
    model = random_hf_model("llama", **settings).eval()
    apply_attention(model, get_attention("self_extend")(**oracle.CASES["self_extend"]))
    described = describe_attention(model)
    assert described["layers"] == [0, 1, 2] and "nope_layers" not in described
    assert describe_attention(apply_attention(model, None)) is None


def llama4(no_rope_layers: list[int]):
    """A random Llama 4 text model: interleaved pairs rotated by complex freqs_cis, chunked attention (chunks longer
    than the inputs here) on the RoPE layers, temperature tuning on the NoPE layers (1 below 8,191 tokens)."""
    rope = {"rope_type": "default", "rope_theta": BASE}
    llama4_only = {"intermediate_size_mlp": 96, "num_local_experts": 2, "attention_chunk_size": 128}
    options = {"no_rope_layers": no_rope_layers, "rope_parameters": rope, **llama4_only}
    return random_hf_model("llama4", scale=3.0, **options, **sizes(len(no_rope_layers))).eval()


def llama4_oracle_logits(model, ids: torch.Tensor, name: str, oracle) -> torch.Tensor:
    """Llama 4's forward with the oracle on its RoPE layers: pairs (2m, 2m + 1) are moved to (m, m + d/2), the
    oracle's rotate-half layout, in q and k alike (q·k does not change)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    order = torch.cat((torch.arange(0, HEAD_DIM, 2), torch.arange(1, HEAD_DIM, 2)))

    def forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if not module.use_rope:
            return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
        q, k = query[..., order], key[..., order]
        out = oracle.attention(name, q, k, value, inv_freq(), scaling, rotated=True, **oracle.CASES[name])
        return out.to(query.dtype).transpose(1, 2), None

    AttentionInterface.register("llama4_oracle_test", forward)
    AttentionMaskInterface.register("llama4_oracle_test", sdpa_mask)
    previous = model.config._attn_implementation
    model.set_attn_implementation("llama4_oracle_test")
    try:
        return model(ids).logits
    finally:
        model.set_attn_implementation(previous)


def test_llama4_runs_ropekit_rotary_as_its_own():
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = llama4([1, 1, 0])
    ids = torch.randint(0, 101, (1, LENGTH), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        own = model(ids).logits
        assert float((apply_scaling(model, None)(ids).logits - own).abs().max()) < 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_llama4_methods_reach_its_rope_layers_only(name: str, oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention, describe_attention
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = llama4([1, 0, 1, 0])
    ids = torch.randint(0, 101, (1, LENGTH), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        apply_scaling(model, None)
        plain = model(ids).logits
        expected = llama4_oracle_logits(model, ids, name, oracle)
        apply_attention(model, get_attention(name)(**oracle.CASES[name]))
        ours = model(ids).logits
        assert float((ours - expected).abs().max()) < 1e-5
        assert float((ours - plain).abs().max()) > 1e-4
        prefill = model(ids[:, : LENGTH - 3], use_cache=True)
        cache, steps = prefill.past_key_values, [prefill.logits]
        for t in range(LENGTH - 3, LENGTH):
            step = model(ids[:, t : t + 1], past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            steps.append(step.logits)
        assert float((torch.cat(steps, dim=1) - ours).abs().max()) < 1e-5
    assert describe_attention(model)["layers"] == [0, 2]


def test_llama4_whose_layers_are_all_nope_is_unchanged(oracle):
    from ropekit.integrations.hf.patch_attention import apply_attention

    model = llama4([0, 0])
    ids = torch.randint(0, 101, (1, 200), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        plain = model(ids).logits
        apply_attention(model, get_attention("self_extend")(group=4, window=16))
        assert torch.equal(model(ids).logits, plain)
