"""Llama 4's long-context mechanism under ropekit: attention temperature on the NoPE layers, chunked attention on
the RoPE layers.

The model is a random ``Llama4ForCausalLM`` whose temperature and chunks act within the test's 40 tokens
(``floor_scale`` 4, ``attention_chunk_size`` 8). Oracles: transformers' own logits; the temperature written by hand
from its formula, 1 + attn_scale · log1p(floor((p + 1) / floor_scale)), in a NoPE layer's attention recomputed
with plain torch; transformers alone loading the folder ``extend`` wrote.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers.hf_models import random_hf_config, random_hf_model
from ropekit.scaling import YarnScaling

pytest.importorskip("transformers")
pytestmark = pytest.mark.hf

ORIGINAL = 32
FLOOR_SCALE = 4
ATTN_SCALE = 0.5
CHUNK = 8
LAYERS = [1, 0, 1, 0]  # 1 = RoPE (chunked attention), 0 = NoPE (temperature, full attention)
ATOL = 1e-5
IDS = torch.randint(0, 257, (1, 40), generator=torch.Generator().manual_seed(5))
YARN = YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL)


#: the random Llama 4 text model: 4 heads and 2 KV heads of 8, two experts on every second layer, temperature and
#: chunks that act within 40 tokens
LLAMA4 = {
    "vocab": 257,  # byte ids, so the evaluation model needs no tokenizer
    "hidden": 32,
    "intermediate": 48,
    "layers": len(LAYERS),
    "head_dim": 8,
    "positions": ORIGINAL,
    "intermediate_size_mlp": 48,
    "num_local_experts": 2,
    "interleave_moe_layer_step": 2,
    "no_rope_layers": LAYERS,
    "attention_chunk_size": CHUNK,
    "attn_temperature_tuning": True,
    "floor_scale": FLOOR_SCALE,
    "attn_scale": ATTN_SCALE,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "tie_word_embeddings": False,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def config(**changes):
    return random_hf_config("llama4", **(LLAMA4 | changes))


def llama4(**changes):
    """The same random weights (every matrix, expert stacks too, scaled by 3) under ``config(**changes)``."""
    return random_hf_model("llama4", scale=3.0, scale_stacked=True, **(LLAMA4 | changes)).eval()


def logits(model, ids: torch.Tensor = IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def temperature(position: int) -> float:
    """transformers' temperature at 0-based ``position``, written from its formula (modeling_llama4)."""
    return 1.0 + ATTN_SCALE * math.log1p(math.floor((position + 1) / FLOOR_SCALE))


def nope_attention_by_hand(attention, hidden: torch.Tensor) -> torch.Tensor:
    """A NoPE layer's attention in plain torch: q × the temperature, no rotation, causal over every key."""
    batch, seq, _ = hidden.shape
    heads, kv_heads, dim = attention.num_attention_heads, attention.num_key_value_heads, attention.head_dim
    q = attention.q_proj(hidden).view(batch, seq, heads, dim).double()
    k = attention.k_proj(hidden).view(batch, seq, kv_heads, dim).double()
    v = attention.v_proj(hidden).view(batch, seq, kv_heads, dim).double()
    q = q * torch.tensor([temperature(p) for p in range(seq)], dtype=torch.float64)[None, :, None, None]
    k, v = (x.repeat_interleave(heads // kv_heads, dim=2) for x in (k, v))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dim)
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(batch, seq, heads * dim)
    return attention.o_proj(out.float())


def nope_layers_match_the_formula(model) -> int:
    """Run ``IDS`` and check every NoPE layer's attention against :func:`nope_attention_by_hand`; the count."""
    seen = []

    def check(module, args, kwargs, output):
        expected = nope_attention_by_hand(module, kwargs["hidden_states"])
        assert float((output[0] - expected).abs().max()) < ATOL
        seen.append(module.layer_idx)

    layers = [layer.self_attn for layer in model.model.layers if not layer.self_attn.use_rope]
    hooks = [layer.register_forward_hook(check, with_kwargs=True) for layer in layers]
    try:
        logits(model)
    finally:
        for hook in hooks:
            hook.remove()
    return len(seen)


def test_the_temperature_and_the_chunks_act_within_the_test_length() -> None:
    plain = logits(llama4())
    assert float((logits(llama4(attn_temperature_tuning=False)) - plain).abs().max()) > 1e-3
    assert float((logits(llama4(attention_chunk_size=len(IDS[0]))) - plain).abs().max()) > 1e-3


def test_the_evaluation_model_gives_transformers_logits(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.eval.loader import load_eval_model

    llama4().save_pretrained(tmp_path)
    own = logits(AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval())
    model = load_eval_model(tmp_path)
    assert torch.equal(model.logits(IDS), own)  # transformers' rotary, attention, temperature and chunks
    expected = F.cross_entropy(own[0, :-1], IDS[0, 1:], reduction="none").double()
    model.set_scaling(None)  # what eval runs as "none": ropekit's rotary at the model's base, float64 angles
    assert float((model.logits(IDS) - own).abs().max()) < ATOL
    assert float((model.token_losses(IDS[0]) - expected).abs().max()) < ATOL


def test_yarn_changes_the_rope_layers_and_keeps_the_temperature_on_the_nope_layers() -> None:
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = llama4()
    plain = logits(model)
    assert nope_layers_match_the_formula(model) == 2  # the oracle is transformers' own temperature
    apply_scaling(model, YARN)
    assert nope_layers_match_the_formula(model) == 2  # unchanged under YaRN
    assert float((logits(model) - plain).abs().max()) > 1e-3  # the RoPE layers did change


def test_extend_with_yarn_writes_a_folder_transformers_loads_as_the_patched_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.extend import extend
    from ropekit.integrations.hf.patch_rope import apply_scaling

    llama4().save_pretrained(tmp_path / "model")
    extend(tmp_path / "model", YARN, tmp_path / "out")
    source = json.loads((tmp_path / "model" / "config.json").read_text())
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    kept = ("attn_temperature_tuning", "floor_scale", "attn_scale", "attention_chunk_size", "no_rope_layers")
    assert {key: written[key] for key in kept} == {key: source[key] for key in kept}
    assert written["rope_parameters"]["rope_type"] == "yarn"
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    patched = apply_scaling(AutoModelForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32).eval(), YARN)
    assert float((logits(reloaded) - logits(patched)).abs().max()) < ATOL
    assert nope_layers_match_the_formula(reloaded) == 2


def test_the_closed_form_reads_the_config_and_equals_the_formula() -> None:
    from ropekit.integrations.hf.llama4_context import llama4_long_context

    context = llama4_long_context(config())
    assert context.nope_layers == (1, 3) and context.chunked_layers == (0, 2) and context.chunk_size == CHUNK
    for position in (0, 2, 3, 7, 39, 131_071):
        assert context.scale_at(position) == pytest.approx(temperature(position), rel=1e-15)
    scout = {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 8}}
    defaults = llama4_long_context(scout)  # transformers' defaults: floor_scale 8192, attn_scale 0.1, chunks 8192
    assert defaults.scale_at(8190) == 1.0 and defaults.scale_at(8191) == pytest.approx(1 + 0.1 * math.log(2))
    assert defaults.nope_layers == (3, 7) and defaults.chunk_size == 8192
    assert llama4_long_context({"model_type": "llama", "num_hidden_layers": 2}) is None
    off = llama4_long_context(config(attn_temperature_tuning=False))
    assert off.scale_at(10**6) == 1.0 and not any("temperature" in line for line in off.lines(32, 128))


@pytest.mark.parametrize(
    ("key", "value"), [("floor_scale", 0), ("attn_scale", -0.1), ("attention_chunk_size", 0), ("floor_scale", "8k")]
)
def test_bad_settings_are_named(key: str, value) -> None:
    from ropekit.integrations.hf.llama4_context import llama4_long_context

    raw = {"model_type": "llama4_text", "num_hidden_layers": 4, key: value}
    with pytest.raises(ValueError, match=key):
        llama4_long_context(raw)
