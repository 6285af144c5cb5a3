"""The one layer that knows transformers and GGUF (imported inside functions; optional extras ``hf`` and ``gguf``).

* :mod:`~ropekit.integrations.hf_config` — what a transformers config says about its RoPE (layer types, the original
  length, "has RoPE", the layer types a method scales), how a model, its config and its tokenizer are loaded offline,
  and the config of a model with a new RoPE; :mod:`~ropekit.integrations.native` the native transformers form of
  any RoPE; :mod:`~ropekit.integrations.rope_layers` which layers rotate q and k (NoPE layers: SmolLM3, Llama 4).
* :mod:`~ropekit.integrations.hf` — ropekit's scaling methods inside transformers models (patching the rotary
  modules); :mod:`~ropekit.integrations.hf_attention` the training-free attention methods;
  :mod:`~ropekit.integrations.hf_mscale` the attention layouts that change what those two must do (DeepSeek's
  softmax-scale term, multi-head latent attention, attention sinks, half-width rotary tables).
* :mod:`~ropekit.integrations.layout` — a model's whole RoPE layout from its config, as ``inspect --model`` shows it.
* :mod:`~ropekit.integrations.head` — the output head and the chunked cross-entropy, for evaluation and training.
* :mod:`~ropekit.integrations.gguf`, :mod:`~ropekit.integrations.gguf_read`, :mod:`~ropekit.integrations.gguf_rope`
  and :mod:`~ropekit.integrations.gguf_write` — GGUF files: loading, llama.cpp's RoPE, and writing it back.
"""

__all__ = [
    "gguf",
    "gguf_read",
    "gguf_rope",
    "gguf_write",
    "head",
    "hf",
    "hf_attention",
    "hf_config",
    "hf_mscale",
    "layout",
    "native",
    "rope_layers",
]
