"""transformers models: their configs, loading, ropekit's methods inside them, and their output head.

Heavy imports (torch, transformers) happen inside the modules, never here; optional extra ``hf``.

* :mod:`~ropekit.integrations.hf.model_config` — what a transformers config says about its RoPE (the layer types a
  method scales, the original length, whether it has RoPE) and the ``config.json`` of the same model with a new RoPE.
* :mod:`~ropekit.integrations.hf.load` — a model, its ``config.json`` and its tokenizer, loaded offline from a folder or
  a ``.gguf`` file.
* :mod:`~ropekit.integrations.hf.gguf_config` — a GGUF file's ``config.json`` as transformers builds it, read from the
  header alone (no vocabulary, no transformers) for the architectures it is checked on.
* :mod:`~ropekit.integrations.hf.native_rope` — the native transformers form of any RoPE (what ``extend``, ``finetune``
  and a patched model's config write).
* :mod:`~ropekit.integrations.hf.extend` — ``ropekit extend``: a copy of a model folder or ``.gguf`` file with a new
  RoPE in its ``config.json``, loaded back by transformers before it is published; what it and ``finetune`` read is
  checked first by :mod:`~ropekit.integrations.hf.input_checks` (weights, tokenizer, a target not shorter than the
  model's context).
* :mod:`~ropekit.integrations.hf.legacy_keys` — the older ``rope_theta`` / ``rope_scaling`` keys written beside
  ``rope_parameters``.
* :mod:`~ropekit.integrations.hf.patch_rope` — ropekit's scaling methods inside transformers models
  (:func:`~ropekit.integrations.hf.patch_rope.apply_scaling` swaps the rotary modules).
* :mod:`~ropekit.integrations.hf.patch_attention` — the training-free attention methods inside transformers models
  (:func:`~ropekit.integrations.hf.patch_attention.apply_attention`).
* :mod:`~ropekit.integrations.hf.attention_layouts` — the attention layouts that change what those two must do
  (DeepSeek's softmax-scale term, multi-head latent attention, attention sinks, half-width rotary tables).
* :mod:`~ropekit.integrations.hf.rope_layers` — which layers rotate q and k (NoPE layers: SmolLM3, Llama 4).
* :mod:`~ropekit.integrations.hf.llama4_context` — Llama 4's own long-context settings (attention temperature, chunked
  local attention).
* :mod:`~ropekit.integrations.hf.dual_chunk_config` — Qwen's ``dual_chunk_attention_config`` and ropekit's
  ``dual_chunk`` method, each from the other.
* :mod:`~ropekit.integrations.hf.model_layout` — a model's whole RoPE layout from its config, as ``inspect --model``
  shows it.
* :mod:`~ropekit.integrations.hf.output_head` — the output head and the chunked cross-entropy, for evaluation and
  training.

What a transformers RoPE dict means, as plain dicts, is in the core (which never imports this package):
:mod:`ropekit.hf_format` (``RopeConfig`` and ``rope_parameters``, each way) and :mod:`ropekit.scaling._hf_numbers`
(numbers read from a config dict, each error naming its key). The transformers version these modules are checked
against is :data:`ropekit._versions.CHECKED`.

The two patching functions are also importable from the package itself (``from ropekit.integrations.hf import
apply_scaling, apply_attention``), loaded on first use.
"""

from typing import Any

__all__ = [
    "attention_layouts",
    "dual_chunk_config",
    "extend",
    "gguf_config",
    "input_checks",
    "legacy_keys",
    "llama4_context",
    "load",
    "model_config",
    "model_layout",
    "native_rope",
    "output_head",
    "patch_attention",
    "patch_rope",
    "rope_layers",
]

#: functions importable from the package, and the module each lives in (imported on first use: it loads torch)
_FUNCTIONS = {"apply_scaling": "patch_rope", "apply_attention": "patch_attention"}


def __getattr__(name: str) -> Any:
    """``apply_scaling`` and ``apply_attention`` from their modules, on first use."""
    if name in _FUNCTIONS:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_FUNCTIONS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
