"""What makes a tiny random model the architecture as released, for llama.cpp's column, and why a row still differs.

The engines matrix builds each architecture from its config class's defaults (``matrix.tiny_folder``). Where a
default, a cut to 2 layers or transformers' random initialisation gives a model no released checkpoint looks like,
and llama.cpp (which runs what checkpoints ship) then computes another model, the tiny model takes the released
value here (:data:`KEYS`, :data:`ROUTERS`), each with why and where the release has it. What still differs for a
reason that is llama.cpp's own is :data:`EXPLAINED`, printed beside the verdict in ``summary.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: keys given to ``tiny_folder`` (kept, not shrunk): the released value where the class default or the 2-layer cut
#: makes another model than the family's
KEYS: dict[str, dict[str, Any]] = {
    # OLMo 3 scales only its full-attention layers (transformers: rope_parameters keyed by layer type; llama.cpp's
    # olmo2 graph gives sliding layers plain RoPE); the 2-layer cut of the shipped 3-sliding-1-full pattern
    # (allenai/Olmo-3-7B-Instruct layer_types) keeps no full layer, so one of each (the converter writes the list)
    "olmo3": {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]},
    # the converter writes no layer pattern for Laguna: llama.cpp's laguna loader takes layer 0 of every 4 as full
    # and the rest as sliding (its own base and rotary dims) whenever sliding_window > 0, as Laguna-XS.2 ships; the
    # class default pairs sliding_window 512 with every layer full
    "laguna": {"num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"]},
    # llama.cpp's qwen3moe always renormalises the top-k expert weights; Qwen/Qwen3-30B-A3B ships norm_topk_prob
    # true (the config class's default is false)
    "qwen3_moe": {"norm_topk_prob": True},
    # transformers' AFMoE router always renormalises the top-k scores; llama.cpp does so only when the file says
    # expert_weights_norm, which the converter writes from route_norm, a key arcee-ai's Trinity configs ship (true);
    # llama.cpp's afmoe always scales the embeddings by sqrt(hidden) (MuP), as the Trinity configs' mup_enabled true
    "afmoe": {"route_norm": True, "mup_enabled": True},
    # llama.cpp's gemma2 scales queries by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the 27B only);
    # google/gemma-2-2b and -9b ship query_pre_attn_scalar = head_dim (256); the tiny head is 16
    "gemma2": {"query_pre_attn_scalar": 16},
}

#: parameter names (suffixes) transformers initialises to zeros that a released checkpoint has trained: an all-zero
#: router ties every expert for every token, and transformers' topk and llama.cpp's argsort break the tie by
#: different indices; filled as transformers initialises the other linear layers (normal, std initializer_range)
ROUTERS: dict[str, str] = {
    "ernie4_5_moe": "mlp.gate.weight",  # Ernie4_5_MoeTopKRouter.weight = zeros
    "afmoe": "mlp.router.gate.weight",
    "laguna": "mlp.gate.weight",
}

#: why llama.cpp's row is not ``same`` for an architecture as released, with the measurement
EXPLAINED: dict[str, str] = {
    "gpt_oss": (
        "GPT-OSS ships YaRN with truncate: false; llama.cpp always rounds YaRN's correction range (floor/ceil) and "
        "the converter drops the key: the source is same (1.1e-4) built with truncate: true; extend writes "
        "truncating YaRN on both sides, so its cells are same"
    ),
    "ministral3": (
        "extend refuses the GGUF file, rightly: llama.cpp's mistral3 reads rope.scaling.yarn_log_multiplier (the "
        "converter's mscale_all_dim, replacing YaRN's 1 + 0.1 ln s) and attention.temperature_scale "
        "(llama_4_scaling_beta), whose length is rope.scaling.original_context_length; ropekit models neither, so a "
        "rewritten RoPE would move the temperature's length too"
    ),
}


def trained_routers(model_type: str, folder: Path) -> None:
    """Give the saved tiny model at ``folder`` random values for :data:`ROUTERS`' all-zero router (seeded)."""
    suffix = ROUTERS.get(model_type)
    if suffix is None:
        return
    import json

    import torch
    from safetensors.torch import load_file, save_file

    std = json.loads((folder / "config.json").read_text()).get("initializer_range", 0.02)
    generator = torch.Generator().manual_seed(0)
    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(path)
        for name in sorted(tensors):
            if name.endswith(suffix) and not tensors[name].any():
                tensors[name] = torch.randn(tensors[name].shape, generator=generator).to(tensors[name].dtype) * std
        save_file(tensors, path, metadata={"format": "pt"})
