"""A GGUF file's ``config.json`` dict as transformers' GGUF loader builds it, read from the header alone.

transformers builds a GGUF file's config by decoding every field, the 50k-token vocabulary included, and then
loading the model class's config (which imports torch): seconds of CPU to learn a head size. For the architectures in
:data:`HEADER_ARCHITECTURES` the same keys are read here from the header (:mod:`ropekit.integrations.gguf.header`,
vocabulary skipped), with transformers' key mapping (``transformers/integrations/ggml.py``, ``GGUF_CONFIG_MAPPING``)
and its config class's defaults for the keys ropekit reads (RoPE, shapes, layout); ``tests/integrations/hf/
test_gguf_config.py`` checks each against transformers' own config. Other architectures return ``None``, and
:func:`ropekit.integrations.hf.load.load_config` takes transformers' path for them.
"""

from __future__ import annotations

from typing import Any

from ropekit.integrations.gguf.fields import (
    MAX_HEAD_DIM,
    MAX_LENGTH,
    arch_key,
    context_length_of,
    float_value,
    int_value,
    keys,
    text_value,
)
from ropekit.integrations.gguf.header import GGUFHeader, SkippedArray
from ropekit.integrations.gguf.read_rope import architecture_of

#: architectures whose transformers config this module reproduces (``llama`` as transformers reads it: a file whose
#: ``general.name`` mentions Mistral becomes a Mistral config there, and takes transformers' path)
HEADER_ARCHITECTURES = ("llama",)
#: the Llama config's defaults where a file leaves a key out (transformers' ``LlamaConfig``; llama.cpp itself
#: refuses a file without the shapes)
_LLAMA_DEFAULTS = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
#: the output projection's tensor; without it the input embedding is tied to the output (transformers' rule)
_OUTPUT = "output.weight"
#: tokenizer keys transformers copies into the config
_TOKEN_IDS = {
    "bos_token_id": "BOS_ID",
    "eos_token_id": "EOS_ID",
    "unk_token_id": "UNK_ID",
    "pad_token_id": "PAD_ID",
}


def gguf_config(header: GGUFHeader) -> dict[str, Any] | None:
    """The ``config.json`` keys transformers gives the GGUF file of ``header`` (its RoPE as the file states it,
    before :func:`~ropekit.integrations.gguf.read_rope.apply_gguf_rope`), or ``None`` for an architecture outside
    :data:`HEADER_ARCHITECTURES`.

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) a key of the wrong type or out of
            range, zero heads, or heads that do not divide the embedding (each names the key and its value).
    """
    k = keys()
    arch = architecture_of(header)
    name = text_value(header, k.General.NAME) or ""
    if arch not in HEADER_ARCHITECTURES or "mistral" in name.lower():
        return None
    llm, attention = k.LLM, k.Attention
    defaults = _LLAMA_DEFAULTS
    hidden = int_value(header, arch_key(llm.EMBEDDING_LENGTH, arch), defaults["hidden_size"], low=1)
    heads = int_value(header, arch_key(attention.HEAD_COUNT, arch), defaults["num_attention_heads"], low=1)
    # transformers reads the head size from rope.dimension_count (never key_length), else hidden_size // heads
    head_dim = int_value(header, arch_key(k.Rope.DIMENSION_COUNT, arch), low=2, high=MAX_HEAD_DIM) or hidden // heads
    config: dict[str, Any] = {
        "architectures": None,
        "model_type": arch,
        "vocab_size": _vocab_size(header, arch) or defaults["vocab_size"],
        "hidden_size": hidden,
        "intermediate_size": int_value(
            header, arch_key(llm.FEED_FORWARD_LENGTH, arch), defaults["intermediate_size"], low=1, high=MAX_LENGTH
        ),
        "num_hidden_layers": int_value(header, arch_key(llm.BLOCK_COUNT, arch), defaults["num_hidden_layers"], low=1),
        "num_attention_heads": heads,
        "num_key_value_heads": int_value(header, arch_key(attention.HEAD_COUNT_KV, arch), heads, low=1),
        "head_dim": head_dim,
        "max_position_embeddings": context_length_of(
            header, arch_key(llm.CONTEXT_LENGTH, arch), defaults["max_position_embeddings"]
        ),
        "rms_norm_eps": float_value(header, arch_key(attention.LAYERNORM_RMS_EPS, arch), defaults["rms_norm_eps"]),
        "rope_parameters": {
            "rope_theta": float_value(header, arch_key(k.Rope.FREQ_BASE, arch), defaults["rope_theta"]),
            "rope_type": "default",
        },
        "tie_word_embeddings": header.tensor(_OUTPUT) is None,
    }
    for config_key, name_in_keys in _TOKEN_IDS.items():
        value = int_value(header, getattr(k.Tokenizer, name_in_keys), high=MAX_LENGTH)
        if value is not None:
            config[config_key] = value
    return config


def _vocab_size(header: GGUFHeader, arch: str) -> int | None:
    """``{arch}.vocab_size``, else the length of ``tokenizer.ggml.tokens`` (transformers' rule), read without
    decoding the vocabulary."""
    k = keys()
    size = int_value(header, arch_key(k.LLM.VOCAB_SIZE, arch), high=MAX_LENGTH)
    if size is not None:
        return size
    tokens = header.values.get(k.Tokenizer.LIST)
    if isinstance(tokens, SkippedArray):
        return tokens.count
    return len(tokens) if isinstance(tokens, list) else None
