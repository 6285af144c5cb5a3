"""Small random models of the architectures ``ropekit engines`` was found wrong on (nothing downloaded): each built
in code with its config class, the RoPE given as transformers 5's ``rope_parameters`` (and the hub's older keys
where a case needs them), saved to a folder."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

#: name → (config class, model class, config keys beyond the sizes)
HELD_OUT = {
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {"partial_rotary_factor": 0.25}),
    "phi4-mini": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {"partial_rotary_factor": 0.75, "original_max_position_embeddings": 64},
    ),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", {"partial_rotary_factor": 0.5}),
    "cohere": ("CohereConfig", "CohereForCausalLM", {}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"rotary_pct": 0.25}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
}
L0 = 64
TARGET = 4 * L0


def held_out_folder(name: str, path: Path, rope: dict | None = None, **extra) -> Path:
    """A random ``name`` model (:data:`HELD_OUT`), 2 layers, hidden 64, 4 heads of 16, L0 = 64, served at 256,
    whose RoPE is ``rope`` (``rope_parameters`` without the base; ``None``: plain) over base 10,000; ``extra``:
    more config keys written into config.json as they are."""
    import torch
    import transformers

    config_class, model_class, keys = HELD_OUT[name]
    partial = {"partial_rotary_factor": keys["partial_rotary_factor"]} if "partial_rotary_factor" in keys else {}
    params = {"rope_type": "default", **(rope or {}), "rope_theta": 10000.0, **partial}
    config = getattr(transformers, config_class)(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=16,
        max_position_embeddings=TARGET,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        rope_parameters=params,
        **keys,
    )
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(transformers, model_class)(config).save_pretrained(path)
    if extra:
        written = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps(written | extra, indent=2))
    return path


def longrope(pairs: int, factor: float = TARGET / L0) -> dict:
    """Phi-4-mini-like LongRoPE lists of ``pairs`` entries (short near 1, long rising to 60) at ``factor``."""
    return {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.2 * i for i in range(pairs)],
        "long_factor": [1.1 + 59.0 * (i / max(pairs - 1, 1)) ** 2 for i in range(pairs)],
        "original_max_position_embeddings": L0,
        "factor": factor,
    }


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": L0}
LINEAR = {"rope_type": "linear", "factor": 4.0}
