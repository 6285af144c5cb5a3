"""Small random transformers models with RoPE and their logits: what the tests comparing ropekit inside
transformers with transformers' own computation share (tests/integrations/test_hf*.py, tests/eval/test_models_hf.py).

Every model has 2 layers, 4 heads and 2 KV heads of :data:`HEAD_DIM` and a vocabulary of :data:`VOCAB`
(:func:`helpers.hf_models.random_hf_model`); logits are compared in float64 at :data:`ATOL`.
"""

from __future__ import annotations

import torch

from helpers.hf_models import random_hf_model

#: transformers forms angles in float32 and ropekit in float64; at these sizes that moves logits by ~1e-6
ATOL = 1e-5
#: plain RoPE must move the logits by at least this much for a comparison at ATOL to mean anything
MATTERS = 1e-2
VOCAB = 300
BASE = 10000.0
HEAD_DIM = 16
#: above transformers' default 0.02 so attention is far from uniform and positions move the logits (by 0.06 to
#: 0.4 here); not much above, or logits grow and the float32 angle error with them.
INIT = 0.05

#: every model's config beyond the factory's sizes (2 layers, 4 heads and 2 KV heads of 16, vocabulary VOCAB)
COMMON = {"initializer_range": INIT, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


YARN_32_TO_128 = {"rope_type": "yarn", "rope_theta": BASE, "factor": 4.0, "original_max_position_embeddings": 32}


def llama(rope_parameters: dict, max_position_embeddings: int = 64, **extra):
    return random_hf_model(
        "llama", positions=max_position_embeddings, rope_parameters=rope_parameters, **COMMON, **extra
    ).eval()


def phi3(partial: float = 1.0):
    pairs = int(HEAD_DIM * partial) // 2
    rope = {
        "rope_type": "longrope",
        "rope_theta": BASE,
        "partial_rotary_factor": partial,
        "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
        "long_factor": [1.0 + 1.5 * i for i in range(pairs)],
    }
    return random_hf_model(
        "phi3", positions=256, original_max_position_embeddings=64, rope_parameters=rope, **COMMON
    ).eval()


GEMMA3_BASES = {"full_attention": 1e6, "sliding_attention": 1e4}


def gemma3(full: dict | None = None, sliding: dict | None = None):
    """A small random Gemma 3 (layers: sliding, full) whose rope_parameters are keyed by layer type."""
    rope = {
        "full_attention": {"rope_type": "default", "rope_theta": GEMMA3_BASES["full_attention"]} | (full or {}),
        "sliding_attention": {"rope_type": "default", "rope_theta": GEMMA3_BASES["sliding_attention"]}
        | (sliding or {}),
    }
    return random_hf_model(
        "gemma3",
        head_dim=HEAD_DIM,
        positions=128,
        sliding_window=32,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters=rope,
        **COMMON,
    ).eval()


def gpt2():
    """A model without RoPE."""
    return random_hf_model("gpt2", vocab=VOCAB, hidden=32, layers=1, heads=2, positions=64)


def ids_of(length: int, batch: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(length)
    return torch.randint(3, VOCAB, (batch, length), generator=generator)


@torch.no_grad()
def logits(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids).logits.double()


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())
