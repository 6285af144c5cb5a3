"""Small random models with the RoPE of real architectures' public ``config.json`` files (nothing downloaded).

Each entry keeps the model's public RoPE keys as its hub config writes them (the older keys ``rope_theta`` and
``rope_scaling``, or ``rope_parameters`` where the hub config has those: Ministral 3) and its lengths, on a model
of 2 layers (Gemma 3: 6, its sliding-window pattern), hidden size 64 and head size 16, so that the frequencies run
at the real base and lengths on a tiny model. Phi-3's lists have the head's 8 entries, shaped like the public 48
(short near 1, long rising to about 64).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from helpers.hf_models import random_hf_model

_PHI3_SHORT = [1.0, 1.02, 1.05, 1.1, 1.2, 1.4, 1.7, 2.0]
_PHI3_LONG = [1.07, 1.42, 3.01, 11.13, 38.6, 57.29, 63.42, 64.19]

#: name → (architecture, sizes and non-RoPE keys, the hub config's RoPE keys)
REAL = {
    "llama3.1": ("llama", {}, {
        "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
    }),
    "qwen2.5-yarn": ("qwen2", {}, {
        "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    }),
    "deepseek-v3": ("deepseek_v3", {
        "heads": 2, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1,
        "topk_group": 1, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16,
        "v_head_dim": 16, "first_k_dense_replace": 2,
    }, {
        "max_position_embeddings": 163840, "rope_theta": 10000.0,
        "rope_scaling": {"type": "yarn", "factor": 40.0, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096},
    }),
    "gpt-oss": ("gpt_oss", {"num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": 16}, {
        "max_position_embeddings": 131072, "rope_theta": 150000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False},
    }),
    "phi3-longrope": ("phi3", {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}, {
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": _PHI3_SHORT, "long_factor": _PHI3_LONG},
    }),
    "gemma3": ("gemma3", {"layers": 6, "sliding_window": 16, "query_pre_attn_scalar": 16}, {
        "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }),
    "ministral3": ("ministral3", {}, {
        "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1,
                            "original_max_position_embeddings": 16384},
    }),
}  # fmt: skip


def real_folder(name: str, path: Path) -> Path:
    """A random model of :data:`REAL` ``[name]`` saved to ``path``, its config.json holding the hub's RoPE keys."""
    arch, sizes, rope = REAL[name]
    keys = {"head_dim": 16, "vocab": 97, "tie_word_embeddings": False} | sizes
    if arch == "deepseek_v3":
        keys.pop("head_dim")  # its head size is qk_rope_head_dim + qk_nope_head_dim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = random_hf_model(arch, seed=0, scale=4.0, **keys, **_as_parameters(rope))
    model.save_pretrained(path)
    config = json.loads((path / "config.json").read_text())
    config = {key: value for key, value in config.items() if key not in ("rope_parameters", "rope_scaling")}
    (path / "config.json").write_text(json.dumps(config | rope, indent=2, sort_keys=True))
    return path


def _as_parameters(rope: dict) -> dict:
    """The hub keys as transformers 5's ``rope_parameters`` (to build the model; the saved config gets the hub's)."""
    if "rope_parameters" in rope:
        return rope
    scaling = {("rope_type" if key == "type" else key): value for key, value in rope["rope_scaling"].items()}
    other = {key: value for key, value in rope.items() if key not in ("rope_scaling", "rope_theta")}
    if "rope_local_base_freq" in other:  # Gemma 3: one RoPE per layer type
        local = other.pop("rope_local_base_freq")
        other.pop("sliding_window_pattern")
        full = scaling | {"rope_theta": rope["rope_theta"]}
        sliding = {"rope_type": "default", "rope_theta": local}
        return other | {"rope_parameters": {"full_attention": full, "sliding_attention": sliding}}
    return other | {"rope_parameters": scaling | {"rope_theta": rope["rope_theta"]}}
