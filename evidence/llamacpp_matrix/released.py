"""What llama.cpp's converter reads from a released checkpoint's folder that a tiny model built from its config class's
defaults lacks, per architecture: the config-class arguments the release has (:data:`BUILD`), the legacy keys its
``config.json`` carries beside what transformers 5 writes (:data:`CONFIG`), its tensor names where transformers saves
others (:data:`TENSORS`), a SentencePiece ``tokenizer.model`` (:data:`SENTENCEPIECE`) and the special tokens its
tokenizer has (:data:`TOKENS`). Each entry says what the converter (``conversion/<file>.py`` beside llama.cpp's
``convert_hf_to_gguf.py``) or llama.cpp requires and where the released checkpoint has it; :data:`UNCONVERTIBLE` says
why a family's release cannot be converted here at all.

Every value a legacy key takes is read from the tiny model's own ``config.json`` (``rotary_pct`` is its
``partial_rotary_factor``), so transformers, ropekit and the converter read one model
(``tests/test_llamacpp_released.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Qwen3.8-Flash-Next's attention (head 256, a quarter rotated, M-RoPE sections 11/11/10: the QSA index head must
#: hold the rotated dims), its QSA indexer and a two-layer cut of its layer pattern (config-class arguments)
QWEN4_EXP_TEXT = {
    "head_dim": 256,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10_000_000,
        "partial_rotary_factor": 0.25,
        "mrope_interleaved": True,
        "mrope_section": [11, 11, 10],
    },
    "num_hidden_layers": 2,
    "layer_types": ["linear_attention", "full_attention"],
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
}

#: config-class arguments the released checkpoints have, given to ``tiny_folder`` (kept, never shrunk), and where a
#: family's random init would hide the rotation, the init that shows it
BUILD: dict[str, dict[str, Any]] = {
    # bitnet.py maps no output tensor (llama.cpp's BitNet reads the tied embedding); microsoft/bitnet-b1.58-2B-4T's
    # config.json has tie_word_embeddings: true
    "bitnet": {"tie_word_embeddings": True},
    # falcon.py reads num_kv_heads from FalconConfig, which sets it to the head count where config.json has none
    # (tiiuae/falcon-7b), though multi_query computes one key/value head (the fused qkv's layout the converter
    # reorders); llama.cpp's Falcon takes the feed-forward width as 4 x hidden, as FalconConfig derives it where
    # config.json has no ffn_hidden_size (falcon-7b), but the class's default is 4 x 4544
    "falcon": {"num_kv_heads": 1, "ffn_hidden_size": 4 * 64},
    # not a release key but the random init: HY-V4's initializer_range 0.006 leaves a tiny random model's attention
    # near uniform, so RoPE moves its logits by 7e-6 (linear x4), far under the matrix's tolerance and no verdict
    # would test the rotation; at the usual 0.02 linear x4 moves them by 0.054
    "hy_v4": {"initializer_range": 0.02},
    # qwen4exp.py writes the QSA indexer's sizes (None in the class's defaults) and reads full-attention layers, which
    # the defaults cut to two layers lack: Qwen/Qwen3.8-Flash-Next's indexer (4 heads, 1 key head, head 128,
    # budget 2048, ratio 4) and one recurrent and one attention layer of its 3:1 pattern
    "qwen4_exp_text": QWEN4_EXP_TEXT,
    "qwen4_exp": {"text_config": QWEN4_EXP_TEXT},
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
    # llama.cpp's vocabulary loader sets attributes on <|endoftext|> by name for a model named phi3 (and throws
    # where it is missing): microsoft/Phi-3-mini-4k-instruct's added tokens, ids 32000-32010 in this order
    "phi3": (
        "<|endoftext|>",
        "<|assistant|>",
        "<|placeholder1|>",
        "<|placeholder2|>",
        "<|placeholder3|>",
        "<|placeholder4|>",
        "<|system|>",
        "<|end|>",
        "<|placeholder5|>",
        "<|placeholder6|>",
        "<|user|>",
    ),
}

#: families whose released tokenizer is SentencePiece (``tokenizer.model``), which the converter reads
SENTENCEPIECE = {
    # phi.py's Phi3MiniModel.set_vocab reads tokenizer.model (microsoft/Phi-3-mini-4k-instruct ships Llama 2's)
    "phi3",
}


#: DeepSeek-V4's compress ratio of each attention layer type (transformers' configuration_deepseek_v4.py)
_COMPRESS_RATIO = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _leading(types: list[str], kind: str) -> int:
    return next((i for i, t in enumerate(types) if t != kind), len(types))


def _rotary_pct(config: dict[str, Any]) -> float:
    return float(config["rope_parameters"].get("partial_rotary_factor", 1.0))


def _rotary_dim(config: dict[str, Any]) -> int:
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return int(head * _rotary_pct(config))


#: legacy keys released ``config.json`` files carry (key → its value, from the tiny model's config)
CONFIG: dict[str, dict[str, Callable[[dict[str, Any]], Any]]] = {
    # gptneox.py reads rotary_pct; EleutherAI/pythia-* config.json ship rotary_pct 0.25 (transformers 5 writes
    # rope_parameters.partial_rotary_factor instead)
    "gpt_neox": {"rotary_pct": _rotary_pct},
    # command_r.py's Cohere2Model reads rotary_pct; CohereLabs/c4ai-command-r7b-12-2024's config.json ships 1.0
    "cohere2": {"rotary_pct": _rotary_pct},
    # glm.py's Glm4MoeModel (Solar-Open's converter) rotates half the head unless the config says otherwise (GLM-4.5's
    # share); upstage/Solar-Open-100B's config.json ships partial_rotary_factor 1.0 (transformers' default for it)
    "solar_open": {"partial_rotary_factor": _rotary_pct},
    # minimax.py's MiniMaxM2Model reads rotary_dim; MiniMaxAI/MiniMax-M2's config.json ships rotary_dim 64 of
    # head_dim 128; llama.cpp aborts building the MoE graph without a gating function, which the converter reads from
    # scoring_func: the release ships "sigmoid" (transformers' MiniMaxM2 routes by sigmoid)
    "minimax_m2": {"rotary_dim": _rotary_dim, "scoring_func": lambda c: "sigmoid"},
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
    # deepseek.py's DeepseekV2Model (GLM-4.7-Flash's converter) counts the leading dense layers from
    # first_k_dense_replace, which zai-org/GLM-4.7-Flash's config.json ships (transformers 5 writes mlp_layer_types)
    "glm4_moe_lite": {"first_k_dense_replace": lambda c: _leading(c["mlp_layer_types"], "dense")},
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


#: tensor names as the release has them (regex → replacement on transformers' saved names): transformers 5 saves
#: these families under names its own loading maps back but the release never had, and the converter maps the release's
TENSORS: dict[str, tuple[tuple[str, str], ...]] = {
    # hy_v4.py and gguf-py map tencent's HY-V4 names (model.hc_head.hc_head_*, model.layers.N.hc_attn_layer.hc_pre.hc_*,
    # mlp.gate_proj); transformers' WeightRenaming(r"\.hc_pre\.hc_", ".hc_") and (r"\.linear_gate", ".gate_proj"),
    # reversed on save, put hc_pre before the first "hc_" and rename every gate_proj, the MLP's too
    "hy_v4": (
        (r"^model\.hc_pre\.hc_head\.", "model.hc_head."),
        (r"\.hc_pre\.(hc_(?:attn|mlp)_layer)\.(hc_(?:fn|base|scale))$", r".\1.hc_pre.\2"),
        (r"\.mlp\.(shared_experts\.)?linear_gate\.", r".mlp.\1gate_proj."),
    ),
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
    family's released folder has that the converter reads: :data:`CONFIG`'s keys, :data:`TENSORS`' names, a
    SentencePiece tokenizer (:data:`SENTENCEPIECE`) and :data:`TOKENS`."""
    keys = CONFIG.get(model_type, {})
    if keys:
        path = folder / "config.json"
        config = json.loads(path.read_text())
        config |= {key: value(config) for key, value in keys.items()}
        path.write_text(json.dumps(config, indent=2) + "\n")
    if model_type in TENSORS:
        _rename(folder / "model.safetensors", TENSORS[model_type])
    if model_type in SENTENCEPIECE:
        from helpers.llamacpp_convert import sentencepiece_tokenizer

        sentencepiece_tokenizer(folder)
    if model_type in TOKENS:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_special_tokens({"additional_special_tokens": list(TOKENS[model_type])})
        tokenizer.save_pretrained(folder)


def _rename(path: Path, rules: tuple[tuple[str, str], ...]) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(path)
    renamed = {}
    for name, tensor in tensors.items():
        for pattern, replacement in rules:
            name = re.sub(pattern, replacement, name)
        renamed[name] = tensor
    save_file(renamed, path, metadata={"format": "pt"})
