"""A tiny random transformers model with a ``config.json``'s RoPE layout: the same head size, rotary layout, layer
types and NoPE layers, with one head, a hidden size of one head and a few layers (what ``extend``'s preservation
check runs; :mod:`ropekit.integrations.hf.preservation`).

The layer count is the shortest prefix of the model's layers that holds every layer type and every RoPE/NoPE flag it
has (at least 2); the per-layer lists transformers' config class reads (``layer_types``, ``no_rope_layers``, filled
from a pattern where the config gives one) are cut to it. Sizes that do not touch the rotation (vocabulary, MLP,
experts, low-rank projections) shrink; ``quantization_config`` and ``auto_map`` are dropped (nothing in a model folder
is executed). Weights are drawn after ``torch.manual_seed(seed)``, so two configs of one architecture get the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: per-layer lists the layer count is cut to, as transformers' config classes name them
PER_LAYER = ("layer_types", "no_rope_layers")
#: sizes that do not touch the rotation → the tiny value (applied where the config has the key)
SHRUNK = {
    "vocab_size": 64,
    "intermediate_size": 32,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "num_local_experts": 2,
    "num_experts": 2,
    "n_routed_experts": 2,
    "num_experts_per_tok": 1,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "first_k_dense_replace": 0,
}
_DROPPED = ("quantization_config", "auto_map", "text_config")
#: token ids set to ``None``: the class defaults (SmolLM3's pad id 128004) lie outside the tiny vocabulary
_NO_TOKENS = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}


def layer_count(read: Any) -> int:
    """The number of leading layers that hold every value of each per-layer list of ``read`` (transformers' config
    object), at least 2 (or the model's count where it has fewer)."""
    total = int(read.num_hidden_layers)
    needed = 2
    for key in PER_LAYER:
        values = list(getattr(read, key, None) or [])[:total]
        for value in set(map(str, values)):
            needed = max(needed, [str(v) for v in values].index(value) + 1)
    return min(needed, total)


def tiny_config(config: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """``config`` (a ``config.json`` dict) cut to ``layers`` layers, one head of the model's head size, and
    :data:`SHRUNK` sizes; its per-layer lists as transformers reads them, cut to ``layers``.

    Raises:
        ValueError: transformers' config class refuses ``config`` (:func:`~ropekit.integrations.hf.transformers_reads.read_config`).
    """
    from ropekit.integrations.hf.transformers_reads import read_config

    read = read_config(config)
    head = getattr(read, "head_dim", None) or read.hidden_size // read.num_attention_heads
    tiny = {key: value for key, value in config.items() if key not in _DROPPED}
    tiny.update({key: value for key, value in SHRUNK.items() if key in config})
    tiny.update(_NO_TOKENS)
    tiny.update(num_hidden_layers=layers, num_attention_heads=1, hidden_size=int(head), dtype="float32")
    if "num_key_value_heads" in config or hasattr(read, "num_key_value_heads"):
        tiny["num_key_value_heads"] = 1
    if "head_dim" in config:
        tiny["head_dim"] = int(head)
    for key in PER_LAYER:
        values = getattr(read, key, None)
        if values:
            tiny[key] = list(values)[:layers]
    return tiny


def tiny_model(config: Mapping[str, Any], layers: int, *, seed: int = 0) -> Any:
    """The float32 causal LM of :func:`tiny_config` (``config``, ``layers``), random weights drawn after
    ``torch.manual_seed(seed)``, in eval mode.

    Raises:
        ValueError: transformers' config class refuses the config, or its model class cannot be built from it.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.transformers_reads import quietly, read_config

    read = read_config(tiny_config(config, layers))
    torch.manual_seed(seed)
    try:
        with quietly():
            return AutoModelForCausalLM.from_config(read, dtype=torch.float32).eval()
    except Exception as error:
        raise ValueError(f"transformers cannot build {type(read).__name__}'s model: {type(error).__name__}") from None
