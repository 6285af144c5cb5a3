"""Shared fixture of the transformers integration tests (``quiet_transformers`` is in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

#: the config sizes of the small random models: 2 layers, 4 heads of 16, a 300-token vocabulary
SMALL = {
    "vocab_size": 300,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 128,
    "initializer_range": 0.05,
}


@pytest.fixture(scope="session")
def small_causal_lm():
    """``small_causal_lm(prefix, **config)``: a random ``{prefix}ForCausalLM`` (``Gemma3Text`` builds a
    ``Gemma3ForCausalLM``) from ``{prefix}Config`` with :data:`SMALL` sizes and ``config``, seed 0, its matrices
    scaled by 3 so that its logits are far from uniform and positions and logit transforms move them."""
    transformers = pytest.importorskip("transformers")
    import torch

    def build(prefix: str, **config):
        model_class = "Gemma3ForCausalLM" if prefix == "Gemma3Text" else f"{prefix}ForCausalLM"
        settings = getattr(transformers, f"{prefix}Config")(**{**SMALL, **config})
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(settings).float()
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() == 2:
                    parameter.mul_(3.0)
        return model

    return build
