"""Small random transformers models built in code (nothing downloaded): the one factory of the tests.

:func:`random_hf_config` builds an architecture's config from a few sizes and any config keys, :func:`random_hf_model`
the model from it after seeding torch, :func:`random_hf_folder` saves one (with :func:`byte_tokenizer` on request).
Config keys given by name win over the sizes; a size given as ``None`` is left to the architecture's own default
(``head_dim``: the config's, which is ``hidden // heads`` for most and 256 for Gemma).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

#: architecture → (transformers config class, model class)
ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "llama4": ("Llama4TextConfig", "Llama4ForCausalLM"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "cohere": ("CohereConfig", "CohereForCausalLM"),
    "glm": ("GlmConfig", "GlmForCausalLM"),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM"),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM"),
    "granite": ("GraniteConfig", "GraniteForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM"),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "ministral3": ("Ministral3Config", "Ministral3ForCausalLM"),
}

#: the config key of each size; GPT-2 names its own, and has no key for the MLP width (4 × hidden) or grouped KV heads
SIZE_KEYS = {
    "vocab": "vocab_size",
    "hidden": "hidden_size",
    "intermediate": "intermediate_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads",
    "head_dim": "head_dim",
    "positions": "max_position_embeddings",
}
OWN_SIZE_KEYS = {
    "gpt_neox": SIZE_KEYS | {"kv_heads": None},
    "gpt2": SIZE_KEYS
    | {"hidden": "n_embd", "layers": "n_layer", "heads": "n_head", "positions": "n_positions"}
    | {"intermediate": None, "kv_heads": None},
}


def random_hf_config(
    arch: str = "llama",
    *,
    vocab: int | None = 300,
    hidden: int | None = 64,
    intermediate: int | None = 128,
    layers: int | None = 2,
    heads: int | None = 4,
    kv_heads: int | None = 2,
    head_dim: int | None = None,
    positions: int | None = 128,
    **config,
):
    """The transformers config of ``arch`` (a key of :data:`ARCHITECTURES`) with these sizes and ``config``: by
    default 2 layers, hidden size 64, MLP 128, 4 heads and 2 KV heads, a 300-token vocabulary, 128 positions."""
    import transformers

    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {sorted(ARCHITECTURES)}, got {arch!r}")
    sizes = dict(
        vocab=vocab,
        hidden=hidden,
        intermediate=intermediate,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        positions=positions,
    )
    keys = OWN_SIZE_KEYS.get(arch, SIZE_KEYS)
    settings = {keys[name]: value for name, value in sizes.items() if value is not None and keys[name] is not None}
    # a copy: the config keeps the very dicts it is given, which later scaling may rewrite
    return getattr(transformers, ARCHITECTURES[arch][0])(**copy.deepcopy(settings | config))


def random_hf_model(
    arch: str = "llama",
    *,
    seed: int = 0,
    scale: float | None = None,
    scale_stacked: bool = False,
    dtype: torch.dtype = torch.float32,
    **sizes,
):
    """A random ``arch`` model of :func:`random_hf_config` ``(arch, **sizes)``, built after ``torch.manual_seed(seed)``,
    in ``dtype`` and in training mode, as torch builds modules. ``scale`` multiplies every matrix (with
    ``scale_stacked``, the stacked expert matrices of mixture-of-experts layers too): random init gives near-uniform
    logits, larger weights let positions and logit transforms move them."""
    import transformers

    config = random_hf_config(arch, **sizes)
    torch.manual_seed(seed)
    model = getattr(transformers, ARCHITECTURES[arch][1])(config).to(dtype)
    if scale is not None:
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() == 2 or (scale_stacked and parameter.dim() > 2):
                    parameter.mul_(scale)
    return model


def random_hf_folder(path: Path, arch: str = "llama", *, tokenizer: bool = False, **options) -> Path:
    """:func:`random_hf_model` ``(arch, **options)`` saved to ``path`` (with :func:`byte_tokenizer` if
    ``tokenizer``); returns ``path``."""
    random_hf_model(arch, **options).save_pretrained(path)
    if tokenizer:
        byte_tokenizer().save_pretrained(path)
    return path


#: config beyond the sizes for one model of each final-logit transform transformers applies after its output head
#: (Cohere multiplies, Granite divides, Gemma 2 and 3 soft-cap, Llama has none), set so that leaving the transform
#: out moves the loss by far more than the tests' tolerances
LOGIT_TRANSFORMS = {
    "cohere": {"logit_scale": 0.25},
    "granite": {"logits_scaling": 4.0},
    "gemma2": {"final_logit_softcapping": 0.5, "sliding_window": 16},
    "gemma3": {
        "final_logit_softcapping": 0.5,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "llama": {},
}


def byte_tokenizer():
    """A byte-level BPE tokenizer without merges: 256 byte tokens + ``<|endoftext|>`` (id 256)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    vocab["<|endoftext|>"] = 256
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


#: the original (pre-training) length of the byte-level Llama
ORIGINAL = 64


def byte_llama(**overrides) -> dict:
    """The options of the byte-level Llama of ``llama_dir`` / ``make_llama`` / ``llama_config`` (tests/conftest.py):
    the factory's sizes with the byte vocabulary and its end-of-text id, trained at :data:`ORIGINAL` positions,
    then ``overrides`` (config keys or sizes)."""
    options = {
        "vocab": 257,
        "positions": ORIGINAL,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "eos_token_id": 256,
        "bos_token_id": 256,
        "tie_word_embeddings": False,
    }
    return options | overrides
