"""The one layer that knows transformers and GGUF (imported inside functions; optional extras ``hf`` and ``gguf``).

* :mod:`~ropekit.integrations.hf` — transformers models: what their configs say about RoPE, loading them offline,
  ropekit's scaling and attention methods inside them, their output head.
* :mod:`~ropekit.integrations.gguf` — GGUF files: checking them, llama.cpp's RoPE, reading it and writing it back.
* :mod:`~ropekit.integrations.resolve` — one scaling from a method's name, a factor, a target length, a new base or the
  planner: the rules the CLI and the Python API share.

Each package's docstring says which module holds what. The plain-dict transformers format (no transformers import)
is in the core, which never imports this layer: :mod:`ropekit.hf_format` and :mod:`ropekit.scaling._hf_numbers`.
"""

__all__ = [
    "gguf",
    "hf",
    "resolve",
]
