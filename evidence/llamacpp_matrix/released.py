"""What llama.cpp needs of a tiny model that its config class's defaults do not give, per architecture, as the
family's released checkpoints have it.

The matrix builds each architecture from its config class's defaults (:func:`matrix.tiny_folder`). Where llama.cpp's
converter or llama.cpp itself refuses that model, or aborts on it, the cause is a default no release ships (a
sliding window with no sliding layer, no expert routed, every layer of one kind in a family that llama.cpp builds
from two) or a size the release has and the shrunk model lost (a vocabulary padded to a multiple of 8, as many
key/value heads as query heads). Each entry gives those keys as config-class arguments (kept as given, as
:mod:`shipped`'s are), says what llama.cpp requires and where the released checkpoint has it, and names the
tokenizer the family ships (a SentencePiece ``tokenizer.model``, or the byte-level BPE of
``tests/helpers/llamacpp_convert.py``). A RoPE key is here only where the converter reads a legacy key the release
ships (Bamba's ``attn_rotary_emb``) or the class's default has no RoPE at all (Granite 4.0); a family's shipped RoPE
parameters are :mod:`shipped`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: one layer of each kind, in the order the released pattern starts (3 sliding : 1 full, cut to two layers)
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]
#: granite-4.0-micro's layer kinds as its config.json spells them (every layer attention)
GRANITE_ATTENTION = ["attention", "attention"]


@dataclass(frozen=True)
class Released:
    """One architecture's keys for llama.cpp.

    Attributes:
        keys: config-class arguments (a composite config's text part under ``text_config``).
        why: what llama.cpp (or its converter) requires, and where the released checkpoint has it.
        tokenizer: ``"bytes"`` (byte-level BPE, ``tokenizer.json``) or ``"sentencepiece"`` (``tokenizer.model``).
        spelled: keys written into the saved ``config.json`` as the release spells them, where transformers reads
            the release's spelling and saves its own, which the converter does not read the same.
    """

    keys: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    tokenizer: str = "bytes"
    spelled: dict[str, Any] = field(default_factory=dict)


#: Llama 4's layers as llama.cpp builds them: it fixes the pattern (a period of 4), so a model of two layers has no
#: full layer, its non-chunked cache none, and llama.cpp aborts (GGML_ASSERT "tensor buffer not set")
LLAMA4_LAYERS = {"num_hidden_layers": 4}
LLAMA4_WHY = (
    "llama.cpp fixes Llama 4's layers as 3 chunked + 1 full (a period of 4); Llama-4-Scout ships 48 layers, every "
    "4th full and NoPE"
)

#: Gemma 3's text model as llama.cpp builds it: one period of its layer pattern, and its attention scale
GEMMA3_TEXT = {"num_hidden_layers": 6, "query_pre_attn_scalar": 16}
GEMMA3_WHY = (
    "Gemma 3 ships a SentencePiece tokenizer.model, whose vocabulary the converter pads to vocab_size as it keeps "
    "the embedding (from a tokenizer.json it pads the vocabulary but cuts the embedding to the tokenizer's count, "
    "and llama.cpp refuses the two lengths); llama.cpp fixes the layers as "
    "5 sliding + 1 full (gemma3.cpp: load_swa_pattern(ml, 6)) and scales q by head_dim^-1/2, as google/gemma-3-1b-pt "
    "ships (26 layers, sliding_window_pattern 6, query_pre_attn_scalar 256 = head_dim)"
)

RELEASED: dict[str, Released] = {
    "bamba": Released(
        {"vocab_size": 304, "attn_rotary_emb": 8},
        "the converter pads a hybrid's vocabulary to a multiple of 8 and llama.cpp then wants the embedding as long, "
        "and it writes rope.dimension_count only from the legacy attn_rotary_emb (without it llama.cpp rotates the "
        "whole head, transformers half); ibm-ai-platform/Bamba-9B ships vocab_size 128256 and attn_rotary_emb 64 of "
        "a 128 head (here 8 of 16)",
    ),
    "granitemoehybrid": Released(
        {
            "num_hidden_layers": 2,
            "layer_types": GRANITE_ATTENTION,
            "position_embedding_type": "rope",
            "vocab_size": 304,
        },
        "the class's defaults are all Mamba layers and no RoPE (llama.cpp aborts on a hybrid with no attention "
        "layer: GGML_ASSERT buffer); the class's RoPE release, ibm-granite/granite-4.0-micro, ships attention "
        "layers only, position_embedding_type rope and vocab_size 100352 (the converter pads the vocabulary to a "
        "multiple of 8 and llama.cpp wants the embedding as long). Its layer_types are spelled 'attention' in its "
        "config.json: transformers saves 'full_attention', which the converter takes for Mamba layers",
        spelled={"layer_types": GRANITE_ATTENTION},
    ),
    "olmoe": Released(
        {"num_key_value_heads": 4},
        "llama.cpp's OLMoE normalises k over n_embd (as many key/value heads as query heads); "
        "allenai/OLMoE-1B-7B-0924 ships 16 key/value heads for 16 query heads",
    ),
    "phi": Released(
        {"num_key_value_heads": 4, "intermediate_size": 256},
        "llama.cpp's phi2 has no grouped keys (k and v n_embd wide) and an MLP 4 x n_embd wide; microsoft/phi-2 "
        "ships no num_key_value_heads (32 for its 32 heads) and intermediate_size 10240 (4 x 2560)",
    ),
    "exaone_moe": Released(
        {"scoring_func": "sigmoid"},
        "llama.cpp requires exaone-moe.expert_gating_func, which the converter writes from scoring_func; "
        "K-EXAONE-236B-A23B ships scoring_func sigmoid (its config as TensorRT-LLM's test_modeling_exaone_moe.py "
        "copies it), the gate transformers' ExaoneMoe applies",
    ),
    "deepseek_v2": Released(
        {"num_experts_per_tok": 2},
        "llama.cpp asserts experts used > 0 where there are experts; the class's default is None, "
        "deepseek-ai/DeepSeek-V2-Lite ships 6 of 64",
    ),
    "deepseek_v3": Released(
        {"n_group": 2, "topk_group": 1},
        "llama.cpp asserts fewer expert groups than experts, a whole number of experts per group and fewer groups "
        "used than groups; deepseek-ai/DeepSeek-V3 ships 8 groups of 32 experts, 4 used (here 2 groups of 2, 1 used)",
    ),
    "lfm2": Released(
        {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"]},
        "with no short-convolution layer llama.cpp's recurrent cache has no layer and it aborts (GGML_ASSERT "
        "buffer); LiquidAI/LFM2-1.2B ships 10 conv layers and 6 attention layers (full_attn_idxs 2, 5, 8, ...)",
    ),
    "llama4": Released({"text_config": LLAMA4_LAYERS}, LLAMA4_WHY),
    "llama4_text": Released(LLAMA4_LAYERS, LLAMA4_WHY),
    "mellum": Released(
        {"num_hidden_layers": 2, "layer_types": SLIDING_THEN_FULL},
        "the converter writes the sliding window whenever sliding_window is set, and llama.cpp then asserts a "
        "sliding layer; Mellum 2 ships 3 sliding : 1 full layers (window 1024; SGLang's "
        "test_mellum2_layer_types_are_hybrid_swa)",
    ),
    "gemma3": Released({"text_config": GEMMA3_TEXT}, GEMMA3_WHY, "sentencepiece"),
    "gemma3_text": Released(GEMMA3_TEXT, GEMMA3_WHY, "sentencepiece"),
}
