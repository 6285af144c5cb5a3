"""Qwen's ``dual_chunk_attention_config`` and ropekit's ``dual_chunk``: the mapping both ways, its refusals, and a
random Qwen2 model whose attention under the mapped method equals an oracle written from vLLM's
``DualChunkRotaryEmbedding`` and dual-chunk flash-attention backend (Qwen2.5-1M report, arXiv 2501.15383)."""

from __future__ import annotations

import pytest

from ropekit.attention import DualChunk
from ropekit.integrations.hf.dual_chunk_config import dual_chunk_config, dual_chunk_from_config

# ---- the mapping -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("s", "w"), [(10, 4), (10, 1), (10, 10), (253952, 8193)])
def test_round_trip(s: int, w: int):
    config = dual_chunk_config(DualChunk(chunk_size=s, local_window=w))
    assert config == {"chunk_size": s + w - 1, "local_size": w - 1, "original_max_position_embeddings": 0}
    assert dual_chunk_from_config(config) == (DualChunk(chunk_size=s, local_window=w), [])


def test_qwen25_1m_config_reads_with_its_temperature_noted():
    shipped = {"chunk_size": 262144, "local_size": 8192, "original_max_position_embeddings": 262144}
    method, notes = dual_chunk_from_config({"model_type": "qwen2", "dual_chunk_attention_config": shipped})
    assert method == DualChunk(chunk_size=253952, local_window=8193)
    assert len(notes) == 1 and "0.1*ln(L/262144) + 1" in notes[0]


def test_wide_local_size_reads_as_a_full_window():
    method, notes = dual_chunk_from_config({"chunk_size": 12, "local_size": 7})  # chunk_len 5 <= local_size
    assert method == DualChunk(chunk_size=5, local_window=5) and "never clamp" in notes[0]


def test_refusals():
    with pytest.raises(ValueError, match=r"local_window must be <= chunk_size \(4\) .* got 5"):
        dual_chunk_config(DualChunk(chunk_size=4, local_window=5))
    for bad, match in [
        ({"chunk_size": 8, "local_size": 8}, "chunk_size must be an integer >= 9"),
        ({"chunk_size": 8, "local_size": -1}, "local_size must be an integer >= 0"),
        ({"chunk_size": 8.5, "local_size": 1}, "chunk_size must be an integer"),
        ({"local_size": 1}, "needs chunk_size and local_size"),
        ([8, 1], "must be a JSON object"),
    ]:
        with pytest.raises(ValueError, match=match):
            dual_chunk_from_config(bad)
    sparse = {"chunk_size": 9, "local_size": 1, "sparse_attention_config": [{"0": ["vertical_and_slash", 1, 1, 0]}]}
    assert "sparse" in dual_chunk_from_config(sparse)[1][0]


# ---- against vLLM's definition on a random Qwen2 model -------------------------------------------------------------

#: vLLM's parameters: chunk_len = CHUNK_SIZE - LOCAL_SIZE = 9; 40 tokens cross four chunk boundaries, and
#: successive-chunk queries clamp from i mod chunk_len = LOCAL_SIZE on
CHUNK_SIZE, LOCAL_SIZE, LENGTH, BASE, HEAD_DIM = 12, 3, 40, 10000.0, 16


def vllm_positions(i: int, j: int) -> tuple[int, int]:
    """(query, key) positions of vLLM's dual-chunk rope and backend for query token ``i`` and key token ``j``."""
    chunk_len = CHUNK_SIZE - LOCAL_SIZE
    if i // chunk_len == j // chunk_len:
        query = i % chunk_len  # cos_sin_q_cache
    elif i // chunk_len - j // chunk_len == 1:
        query = min(i % chunk_len + chunk_len, CHUNK_SIZE)  # cos_sin_qc_cache
    else:
        query = min(2 * chunk_len - 1, CHUNK_SIZE)  # cos_sin_qc_cache[chunk_len - 1]
    return query, j % chunk_len  # cos_sin_k_cache


def vllm_attention(query, key, value, scaling):
    """Float64 dual-chunk attention from q/k rotated at their true positions: un-rotated, then rotated (complex
    multiplication of half-split pairs) at vLLM's positions, pair by pair; causal softmax over the keys."""
    import torch

    theta = BASE ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)

    def as_complex(x):
        x = x.double()
        return torch.complex(x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2 :])

    n = query.shape[2]
    true = torch.arange(n, dtype=torch.float64).unsqueeze(-1)
    q = as_complex(query) * torch.polar(torch.ones_like(true * theta), -true * theta)  # back to position 0
    k = as_complex(key) * torch.polar(torch.ones_like(true * theta), -true * theta)
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = value.double().repeat_interleave(q.shape[1] // value.shape[1], dim=1)
    # relative position query − key of every causal pair; the score is Re Σ q_i conj(k_j) e^{i·rel·θ}, the dot
    # product of q rotated at the query's position and k rotated at the key's
    rel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(i + 1):
            qp, kp = vllm_positions(i, j)
            rel[i, j] = qp - kp
    phase = torch.polar(torch.ones(n, n, theta.numel(), dtype=torch.float64), rel.unsqueeze(-1) * theta)
    scores = torch.einsum("bhid,bhjd,ijd->bhij", q, k.conj(), phase).real
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -torch.inf)
    return torch.softmax(scores * scaling, dim=-1) @ v


def qwen2():
    from helpers.hf_models import random_hf_model

    rope = {"rope_type": "default", "rope_theta": BASE}
    return random_hf_model(
        "qwen2", head_dim=HEAD_DIM, rope_parameters=rope, vocab=101, intermediate=96, positions=64, scale=4.0
    ).eval()


def oracle_logits(model, ids):
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
        return vllm_attention(query, key, value, scaling).to(query.dtype).transpose(1, 2), None

    AttentionInterface.register("vllm_dual_chunk_oracle", forward)
    AttentionMaskInterface.register("vllm_dual_chunk_oracle", sdpa_mask)
    model.set_attn_implementation("vllm_dual_chunk_oracle")
    return model(ids).logits


@pytest.mark.hf
def test_random_qwen2_attends_as_vllm_dual_chunk():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ropekit.integrations.hf.patch_attention import apply_attention

    ids = torch.randint(0, 101, (1, LENGTH), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = oracle_logits(qwen2().double(), ids)
        method, notes = dual_chunk_from_config({"chunk_size": CHUNK_SIZE, "local_size": LOCAL_SIZE})
        model = apply_attention(qwen2().double(), method)
        ours = model(ids).logits
        # the paper's reading of local_size as the window w clamps one position lower: a different model
        shifted = apply_attention(qwen2().double(), DualChunk(chunk_size=CHUNK_SIZE - LOCAL_SIZE, local_window=3))
        wrong = shifted(ids).logits
    assert notes == []
    error, gap = float((ours - expected).abs().max()), float((wrong - expected).abs().max())
    assert error < 1e-5, error
    assert gap > 1e3 * error, (gap, error)


# ---- extend writes it, inspect reads it ----------------------------------------------------------------------------


@pytest.mark.hf
def test_extend_writes_and_inspect_reads(tmp_path):
    pytest.importorskip("transformers")
    import json

    from typer.testing import CliRunner

    from helpers.hf_models import random_hf_folder
    from ropekit.cli.app import app

    source = random_hf_folder(tmp_path / "src", "qwen2", positions=64)
    out = tmp_path / "out"
    args = ["extend", "--model", str(source), "--scaling", "none", "--target-length", "256", "--out", str(out)]
    written = CliRunner().invoke(app, [*args, "--attention", "dual_chunk:chunk_size=40,local_window=8", "--json"])
    assert written.exit_code == 0, written.output
    expected = {"chunk_size": 47, "local_size": 7, "original_max_position_embeddings": 0}
    assert json.loads(written.stdout)["dual_chunk_attention_config"] == expected
    assert json.loads((out / "config.json").read_text())["dual_chunk_attention_config"] == expected
    shown = CliRunner().invoke(app, ["inspect", "--model", str(out), "--json"])
    assert json.loads(shown.stdout)["layout"]["dual_chunk_attention_config"]["ropekit"] == {
        "name": "dual_chunk",
        "chunk_size": 40,
        "local_window": 8,
    }
    for bad, message in [
        ("dual_chunk:chunk_size=4,local_window=8", "local_window must be <= chunk_size (4)"),
        ("rerope", "--attention must be dual_chunk"),
    ]:
        refused = CliRunner().invoke(app, [*args, "--force", "--attention", bad])
        assert refused.exit_code == 2 and message in refused.stderr, refused.output


@pytest.mark.hf
@pytest.mark.parametrize(
    ("scaling", "written"), [(["yarn", "--factor", "4"], None), (["base", "--base", "40000"], 4e4)]
)
def test_extend_refuses_dual_chunk_beside_a_scaling_before_writing(tmp_path, scaling, written):
    """With a dual_chunk_attention_config vLLM and SGLang build the RoPE from the base alone (``engines``: "cannot
    express" a scaling): beside yarn the folder is refused before anything is written or a launch line printed;
    beside a base change (rope_type default, the new rope_theta) it is written."""
    pytest.importorskip("transformers")
    import json

    from typer.testing import CliRunner

    from helpers.hf_models import random_hf_folder
    from ropekit.cli.app import app

    source = random_hf_folder(tmp_path / "src", "qwen2", positions=64)
    out = tmp_path / "out"
    args = ["extend", "--model", str(source), "--scaling", *scaling, "--out", str(out), "--attention", "dual_chunk"]
    result = CliRunner().invoke(app, args)
    if written is None:
        assert result.exit_code == 2 and not out.exists() and "launch" not in result.output, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: --attention: a dual_chunk_attention_config beside")
        assert "rope_type 'yarn'" in lines[0] and "from the base alone" in lines[0]
        return
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["rope_parameters"]["rope_type"] == "default" and config["rope_parameters"]["rope_theta"] == written
    assert "dual_chunk_attention_config" in config
