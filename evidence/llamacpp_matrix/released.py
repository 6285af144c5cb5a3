"""What llama.cpp's converter reads from a released checkpoint's folder that a tiny model built from its config class's
defaults lacks: per architecture, the config-class arguments the release has (:data:`BUILD`), the legacy keys its
``config.json`` carries beside what transformers 5 writes (:data:`CONFIG`), and the special tokens its tokenizer has
(:data:`TOKENS`). Each entry says what the converter (``conversion/<file>.py`` of llama.cpp's
``convert_hf_to_gguf.py``) requires and where the released checkpoint has it.

Every value a legacy key takes is read from the tiny model's own ``config.json`` (``rotary_pct`` is its
``partial_rotary_factor``), so transformers, ropekit and the converter read one model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: config-class arguments the released checkpoints have, given to ``tiny_folder`` (kept, never shrunk)
BUILD: dict[str, dict[str, Any]] = {
    # bitnet.py maps no output tensor (llama.cpp's BitNet reads the tied embedding); microsoft/bitnet-b1.58-2B-4T's
    # config.json has tie_word_embeddings: true
    "bitnet": {"tie_word_embeddings": True},
    # falcon.py reads num_kv_heads from FalconConfig, which sets it to the head count where config.json has none
    # (tiiuae/falcon-7b); multi_query computes one key/value head (the fused qkv's layout the converter reorders)
    "falcon": {"num_kv_heads": 1},
}

#: GLM-4's added tokens (zai-org/glm-4-9b-chat-hf tokenizer_config.json, ids 151329-151338 in this order)
GLM4_TOKENS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
)

#: special tokens the family's tokenizer has, added after the 257 byte tokens
TOKENS: dict[str, tuple[str, ...]] = {
    # chatglm.py's set_vocab (GlmForCausalLM) looks up <|endoftext|> and <|user|>
    "glm": GLM4_TOKENS,
    # glm.py's Glm4Model.set_vocab looks up <|endoftext|> and <|user|>
    "glm4": GLM4_TOKENS,
    # base.py's _set_vocab_glm (Glm4Moe, Glm4MoeLite, GlmMoeDsa) looks up [gMASK], <|user|>, <|endoftext|>,
    # <|observation|>: GLM-4.5/4.7/5's tokenizer has GLM-4's added tokens
    "glm4_moe": GLM4_TOKENS,
    "glm4_moe_lite": GLM4_TOKENS,
    "glm_moe_dsa": GLM4_TOKENS,
    # glm.py's SolarOpenModel.set_vocab looks up <|endoftext|>, <unk>, <|startoftext|> (upstage/Solar-Open-100B's
    # tokenizer_config.json added tokens)
    "solar_open": ("<unk>", "<|startoftext|>", "<|endoftext|>"),
}

#: families whose released tokenizer is SentencePiece (``tokenizer.model``), which the converter reads
SENTENCEPIECE = {
    # phi.py's Phi3MiniModel.set_vocab reads tokenizer.model (microsoft/Phi-3-mini-4k-instruct ships Llama 2's)
    "phi3",
}


#: DeepSeek-V4's compress ratio of each attention layer type (transformers' configuration_deepseek_v4.py)
_COMPRESS_RATIO = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _rotary_pct(config: dict[str, Any]) -> float:
    return float(config["rope_parameters"].get("partial_rotary_factor", 1.0))


def _rotary_dim(config: dict[str, Any]) -> int:
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return int(head * _rotary_pct(config))


#: legacy keys released ``config.json`` files carry (key → value from the tiny config, or ``None``: a key the
#: release does not have, which the converter would read instead of the class's derived value)
CONFIG: dict[str, dict[str, Callable[[dict[str, Any]], Any] | None]] = {
    # gptneox.py reads rotary_pct; EleutherAI/pythia-* config.json ship rotary_pct 0.25 (transformers 5 writes
    # rope_parameters.partial_rotary_factor instead)
    "gpt_neox": {"rotary_pct": _rotary_pct},
    # command_r.py's Cohere2Model reads rotary_pct; CohereLabs/c4ai-command-r7b-12-2024's config.json ships 1.0
    "cohere2": {"rotary_pct": _rotary_pct},
    # minimax.py's MiniMaxM2Model reads rotary_dim; MiniMaxAI/MiniMax-M2's config.json ships rotary_dim 64 of
    # head_dim 128
    "minimax_m2": {"rotary_dim": _rotary_dim},
    # mimo.py reads the sliding layers' sizes, the layer pattern (1 = sliding) and the router's method as
    # XiaomiMiMo/MiMo-V2-Flash's config.json ships them (swa_* equal to the full layers' but the key/value heads)
    "mimo_v2_flash": {
        "hybrid_layer_pattern": lambda c: [int(t == "sliding_attention") for t in c["layer_types"]],
        "swa_head_dim": lambda c: c["head_dim"],
        "swa_v_head_dim": lambda c: c["v_head_dim"],
        "swa_num_attention_heads": lambda c: c["num_attention_heads"],
        "swa_num_key_value_heads": lambda c: c["num_key_value_heads"],
        "topk_method": lambda c: "noaux_tc",
        "layernorm_epsilon": lambda c: c["rms_norm_eps"],
    },
    # hunyuan.py reads per-layer lists: tencent/Hunyuan-A13B-Instruct's config.json ships moe_intermediate_size,
    # moe_topk and num_shared_expert one entry a layer (experts as wide as the shared MLP, transformers' one size)
    "hunyuan_v1_moe": {
        "moe_intermediate_size": lambda c: [c["intermediate_size"]] * c["num_hidden_layers"],
        "moe_topk": lambda c: [c["moe_topk"]] * c["num_hidden_layers"],
        "num_shared_expert": lambda c: [1] * c["num_hidden_layers"],
    },
    # deepseek.py's DeepseekV4Model reads config.json's legacy keys, which transformers 5 folds into layer_types /
    # mlp_layer_types: deepseek-ai/DeepSeek-V4-Flash's config.json ships compress_ratios (0 sliding, 4, 128 per
    # layer) and num_hash_layers
    "deepseek_v4": {
        "compress_ratios": lambda c: [_COMPRESS_RATIO[t] for t in c["layer_types"]],
        "num_hash_layers": lambda c: c["mlp_layer_types"].count("hash_moe"),
    },
}


#: why the converter cannot convert a family's released layout here (with the installed transformers), beside its
#: error line: each was read in the converter's file and checked on a config.json as the release ships it
UNCONVERTIBLE: dict[str, str] = {
    "gpt_neox": "gptneox.py reads hparams['rotary_pct'], and transformers 5's GPTNeoXConfig folds Pythia's "
    "rotary_pct into rope_parameters: AutoConfig(...).to_dict(), which the converter reads, has none",
    "mimo_v2_flash": "mimo.py reads rope_parameters['partial_rotary_factor'] at the top level, and transformers 5's "
    "MiMoV2FlashConfig splits MiMo-V2-Flash's rope keys per layer type (full_attention / sliding_attention)",
    "deepseek_v4": "deepseek.py reads DeepSeek-V4-Flash's own tensor layout (layers.N.ffn.gate.tid2eid, FP4 experts "
    "with their .scale tensors, no 'model.' prefix), not the names and float experts transformers saves",
    "hunyuan_v1_moe": "hunyuan.py reads the tokenizer's tiktoken mergeable_ranks, which only Hunyuan-A13B's own "
    "tokenization_hy.py provides (code in the model folder, run with trust_remote_code: never run here)",
    "deepseek_v32": "deepseek.py asserts tokenizer.add_bos_token, which transformers 5 leaves False for a tokenizer "
    "with tokenizer.json (it drops tokenizer_config.json's add_bos_token: true, as DeepSeek-V3.2-Exp ships it)",
    "bitnet": "the converter maps 1bitLLM's BitNet names (inner_attn_ln, ffn_layernorm), not transformers' "
    "attn_sub_norm / ffn_sub_norm (microsoft/bitnet-b1.58-2B-4T's names)",
}


def dress(model_type: str, folder: Path) -> None:
    """Give the tiny model in ``folder`` (built by ``tiny_folder``, with ``byte_tokenizer``'s tokenizer) what the
    family's released folder has that the converter reads: :data:`CONFIG`'s keys and :data:`TOKENS`."""
    keys = CONFIG.get(model_type, {})
    if keys:
        path = folder / "config.json"
        config = json.loads(path.read_text())
        for key, value in keys.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value(config)
        path.write_text(json.dumps(config, indent=2) + "\n")
    if model_type in SENTENCEPIECE:
        from helpers.llamacpp_convert import sentencepiece_model

        sentencepiece_model(folder)
    if model_type in TOKENS:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_special_tokens({"additional_special_tokens": list(TOKENS[model_type])})
        tokenizer.save_pretrained(folder)
