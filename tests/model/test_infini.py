"""Infini-attention (arXiv 2404.07143) against independent oracles: float64 attention written out by hand,
the memory's closed-form sums, the delta rule's fixed point, and segment-by-segment equivalences."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ropekit.model import TinyConfig, TinyLM
from ropekit.model.infini import InfiniAttention, Memory, elu_plus_one, retrieve, update

SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 64, "train_length": 64}


def layer(segment_length: int = 8, rule: str = "linear") -> InfiniAttention:
    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=segment_length, memory_update=rule))
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.gate.copy_(torch.linspace(-1.5, 1.5, attn.gate.numel()))  # every head mixes differently
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
            proj.weight.normal_(0, 0.3)  # larger than the 0.02 init, so the memory term is far from zero
    return attn


def projections64(attn: InfiniAttention, x: torch.Tensor):
    """q (h), k, v (kv) per head in float64, ``(batch, heads, seq, hd)``, computed by hand."""
    hd, x = attn.config.head_dim, x.double()

    def heads(w):
        y = x @ w.weight.double().T  # (b, s, heads * hd)
        return y.view(x.shape[0], x.shape[1], -1, hd).transpose(1, 2)

    return heads(attn.q_proj), heads(attn.k_proj), heads(attn.v_proj)


def sigma64(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x + 1, torch.exp(x))  # ELU + 1 written out


def rope64(x: torch.Tensor, base: float) -> torch.Tensor:
    """Half-split RoPE at positions 0 … seq-1 by the rotation formula, float64."""
    hd, seq = x.shape[-1], x.shape[-2]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv  # (seq, hd/2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def causal_attention64(q, k, v) -> torch.Tensor:
    """softmax(q kᵀ / √d + causal mask) v, float64, kv heads shared by groups of query heads."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
    return scores.masked_fill(~mask, -math.inf).softmax(-1) @ v


def test_gate_closed_one_segment_is_plain_causal_attention(seed):
    attn = layer(segment_length=16)
    with torch.no_grad():
        attn.gate.fill_(-1e4)  # sigmoid(β) = 0 exactly in float32
        x = torch.randn(2, 16, 32)
        out, _ = attn(x)
    q, k, v = projections64(attn, x)
    base = attn.config.rope_base
    expected = causal_attention64(rope64(q, base), rope64(k, base), v)  # (b, h, s, hd)
    expected = expected.transpose(1, 2).reshape(2, 16, -1) @ attn.o_proj.weight.double().T
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-5)


def test_gate_closed_matches_the_rope_model_attention_inside_a_segment(seed):
    infini = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=64))
    rope = TinyLM(TinyConfig(**SMALL))
    with torch.no_grad():
        for block in infini.blocks:
            block.attn.gate.fill_(-1e4)
        state = {k: v for k, v in infini.state_dict().items() if not k.endswith("attn.gate")}
        rope.load_state_dict(state)
        ids = torch.randint(0, 256, (2, 64))
        torch.testing.assert_close(infini(ids), rope(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rule", ["linear", "delta"])
def test_memory_after_two_segments_is_the_closed_form_sum(seed, rule):
    attn = layer(segment_length=8, rule=rule)
    x = torch.randn(2, 16, 32)
    with torch.no_grad():
        _, memory = attn(x)
    _, k, v = projections64(attn, x)
    sk = sigma64(k)  # (b, kv, 16, hd)
    matrix = torch.zeros(2, 2, 8, 8, dtype=torch.float64)
    norm = torch.zeros(2, 2, 8, dtype=torch.float64)
    for segment in (range(0, 8), range(8, 16)):
        old_matrix, old_norm = matrix.clone(), norm.clone()
        for t in segment:
            value = v[:, :, t]  # (b, kv, hd)
            if rule == "delta" and old_norm.abs().sum() > 0:
                # retrieved value σ(k_t) M / (σ(k_t) z), one token at a time
                read = torch.einsum("bhd,bhde->bhe", sk[:, :, t], old_matrix)
                value = value - read / (sk[:, :, t] * old_norm).sum(-1, keepdim=True)
            matrix += torch.einsum("bhd,bhe->bhde", sk[:, :, t], value)  # outer product σ(k_t)ᵀ v_t
            norm += sk[:, :, t]
    torch.testing.assert_close(memory.matrix.double(), matrix, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(memory.norm.double(), norm, rtol=1e-5, atol=1e-5)


def test_delta_rule_leaves_memory_unchanged_when_values_are_already_retrieved(seed):
    sigma_k = elu_plus_one(torch.randn(2, 3, 5, 4, dtype=torch.float64))
    memory = Memory(torch.randn(2, 3, 4, 6, dtype=torch.float64), elu_plus_one(torch.randn(2, 3, 4)).double())
    values = sigma_k @ memory.matrix / (sigma_k * memory.norm[:, :, None]).sum(-1, keepdim=True)
    after = update(sigma_k, values, memory, "delta")
    torch.testing.assert_close(after.matrix, memory.matrix, rtol=0, atol=1e-12)
    torch.testing.assert_close(after.norm, memory.norm + sigma_k.sum(2))
    linear = update(sigma_k, values, memory, "linear")
    assert not torch.allclose(linear.matrix, memory.matrix)


def test_empty_memory_reads_zero_without_nan_in_forward_or_backward(seed):
    q = torch.randn(1, 4, 3, 8, requires_grad=True)
    memory = Memory.empty(1, 2, 8, 8, like=q)
    read = retrieve(elu_plus_one(q), memory)
    assert torch.equal(read, torch.zeros_like(read))
    read.sum().backward()
    assert torch.isfinite(q.grad).all()
    attn = layer()
    x = torch.randn(2, 20, 32, requires_grad=True)
    out, _ = attn(x)
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(attn.gate.grad).all()


@pytest.mark.parametrize("rule", ["linear", "delta"])
def test_segment_by_segment_equals_explicit_memory(seed, rule):
    attn = layer(segment_length=8, rule=rule)
    x = torch.randn(2, 29, 32)  # 3 full segments and a partial one
    with torch.no_grad():
        whole, final = attn(x)
        memory, parts = None, []
        for start in range(0, 29, 8):
            out, memory = attn.segment(x[:, start : start + 8], memory)
            parts.append(out)
        torch.testing.assert_close(torch.cat(parts, 1), whole, rtol=0, atol=0)
        torch.testing.assert_close(memory.matrix, final.matrix, rtol=0, atol=0)
        # The memory of the first 24 tokens, built by hand (linear rule: plain sums), passed explicitly.
        if rule == "linear":
            _, k, v = projections64(attn, x[:, :24])
            explicit = Memory((sigma64(k).transpose(-1, -2) @ v).float(), sigma64(k).sum(2).float())
            tail, _ = attn(x[:, 24:], explicit)
            torch.testing.assert_close(tail, whole[:, 24:], rtol=1e-4, atol=1e-5)


def test_model_streams_in_constant_memory_state(seed):
    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=8, memory_update="delta")).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.gate.fill_(0.7)
        ids = torch.randint(0, 256, (2, 45))
        whole = model(ids)
        first, memory = model.forward_segments(ids[:, :16])
        second, memory = model.forward_segments(ids[:, 16:], memory)
    torch.testing.assert_close(torch.cat((first, second), 1), whole, rtol=0, atol=0)
    assert len(memory) == 2 and memory[0].matrix.shape == (2, 2, 8, 8)


def test_memory_changes_later_segments_only_when_the_gate_is_open(seed):
    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=8)).eval()
    ids = torch.randint(0, 256, (1, 24))
    changed = ids.clone()
    changed[0, 2] = (ids[0, 2] + 1) % 256  # edit the first segment
    with torch.no_grad():
        for block in model.blocks:
            block.attn.gate.fill_(-1e4)
        closed = model(ids) - model(changed)
        for block in model.blocks:
            block.attn.gate.fill_(0.0)
        opened = model(ids) - model(changed)
    assert closed[0, 8:].abs().max() == 0  # segments never see each other without the memory
    assert opened[0, 8:].abs().max() > 0


def test_training_step_gives_finite_gradients_to_every_parameter(seed):
    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=16, memory_update="delta"))
    ids = torch.randint(0, 256, (2, 65))
    logits = model(ids[:, :-1])
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    assert model.blocks[0].attn.gate.grad.abs().sum() > 0


def test_config_validation_and_round_trip():
    config = TinyConfig(**SMALL, position="infini", segment_length=16, memory_update="delta")
    assert TinyConfig.from_dict(config.to_dict()) == config
    assert "segment_length" not in TinyConfig(**SMALL).to_dict()  # other models' configs are unchanged
    with pytest.raises(ValueError, match="segment_length is required"):
        TinyConfig(**SMALL, position="infini")
    with pytest.raises(ValueError, match="segment_length must be an integer >= 1"):
        TinyConfig(**SMALL, position="infini", segment_length=0)
    with pytest.raises(ValueError, match="memory_update must be one of"):
        TinyConfig(**SMALL, position="infini", segment_length=8, memory_update="gated")
    with pytest.raises(ValueError, match="apply only to position='infini'"):
        TinyConfig(**SMALL, segment_length=8)
    with pytest.raises(ValueError, match="positions must be None"):
        TinyLM(config)(torch.zeros(1, 4, dtype=torch.long), torch.arange(4))
    with pytest.raises(ValueError, match="at most segment_length=16"):
        TinyLM(config).blocks[0].attn.segment(torch.zeros(1, 17, 32))


def test_checkpoint_round_trip_keeps_gates(tmp_path, seed):
    from ropekit.model import load, save

    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=8, memory_update="delta")).eval()
    with torch.no_grad():
        model.blocks[1].attn.gate.copy_(torch.tensor([-2.0, 0.0, 1.0, 3.0]))
    save(model, tmp_path / "ckpt")
    loaded = load(tmp_path / "ckpt")
    assert loaded.gate_values()[1] == pytest.approx(torch.sigmoid(torch.tensor([-2.0, 0.0, 1.0, 3.0])).tolist())
    ids = torch.randint(0, 256, (1, 30))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=0)


def test_evaluation_harness_scores_an_infini_checkpoint_and_skips_scalings(tmp_path, seed):
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.sweep import SweepSettings, evaluation_text, run_sweep
    from ropekit.model import save

    model = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=16, memory_update="delta")).eval()
    save(model, tmp_path / "ckpt")
    evaluated = load_eval_model(tmp_path / "ckpt")
    settings = SweepSettings(
        methods=("none", "yarn"), multiples=(2,), passkey_multiples=(2,), depths=(0.5,), trials=2, max_tokens=256
    )
    result = run_sweep(evaluated, settings)
    assert [s["method"] for s in result.skipped] == ["yarn"]
    assert result.context["model"]["gates"] == model.gate_values()
    (point,) = result.perplexity
    ids, _ = evaluation_text(evaluated)
    total = 0.0
    with torch.no_grad():
        for w in range(2):  # 256 scored tokens = two non-overlapping windows of 128
            window = ids[w * 128 : w * 128 + 129]
            total += F.cross_entropy(model(window[None, :-1])[0], window[1:], reduction="sum").item()
    assert point["tokens"] == 256
    assert point["perplexity"] == pytest.approx(math.exp(total / 256), rel=1e-5)
    assert len(result.passkey) == 1 and result.passkey[0]["trials"] == 2


def test_report_model_line_shows_the_gates():
    from ropekit.eval.report import model_line

    line = model_line({"dtype": "float32", "gates": [[0.5, 0.25], [0.125, 1.0]]})
    assert "gates sigmoid(β) per head: layer 0: 0.500, 0.250; layer 1: 0.125, 1.000." in line
    assert "gates" not in model_line({"dtype": "float32"})


def test_memory_is_kept_in_fp32_for_half_activations():
    for dtype, kept in (
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.float64, torch.float64),
    ):
        memory = Memory.empty(1, 2, 4, 4, like=torch.zeros(1, dtype=dtype))
        assert memory.matrix.dtype == kept and memory.norm.dtype == kept


@pytest.mark.parametrize("rule", ["linear", "delta"])
def test_fp16_long_stream_stays_finite_and_matches_float64(seed, rule):
    """in fp16 the normaliser z (a sum over every token) overflowed within 3k
    tokens here (about 12.8k in a larger model), so σ(Q) z = inf and the retrieval was inf/inf = NaN. Oracle: the same layer in float64."""
    attn = layer(segment_length=256, rule=rule)
    x = 2.5 * torch.randn(1, 3072, 32)
    with torch.no_grad():
        want, want_memory = attn.double()(x.double())
        got, memory = attn.half()(x.half())
    assert torch.isfinite(got).all()
    assert memory.norm.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-2 * float(want.abs().max()))
    torch.testing.assert_close(memory.norm.double(), want_memory.norm, rtol=1e-3, atol=0)
