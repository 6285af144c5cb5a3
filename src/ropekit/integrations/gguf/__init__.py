"""GGUF files (llama.cpp's format) and llama.cpp's RoPE: reading, checking and writing them.

The ``gguf`` package is imported inside the functions that need it; optional extras ``hf`` and ``gguf``.

* :mod:`~ropekit.integrations.gguf.header` — a GGUF file's metadata and tensor table, every size bounded by the file
  before it is used, the vocabulary skipped (milliseconds for a 50k-token model).
* :mod:`~ropekit.integrations.gguf.fields` — typed reads of its keys (gguf-py's ``Keys``), a bad value refused by name.
* :mod:`~ropekit.integrations.gguf.file` — whether a file is a whole GGUF file
  (:func:`~ropekit.integrations.gguf.file.check_gguf`, before anything reads it) and what it holds (its quantisation).
* :mod:`~ropekit.integrations.gguf.llamacpp_rope` — llama.cpp's RoPE (what a GGUF file's metadata and llama.cpp's
  load-time flags mean) against ropekit's scaling.
* :mod:`~ropekit.integrations.gguf.read_rope` — a GGUF file's RoPE as llama.cpp reads it, and the transformers
  ``rope_parameters`` that compute the same.
* :mod:`~ropekit.integrations.gguf.write_rope` — a copy of a GGUF file whose RoPE metadata makes llama.cpp compute a
  ropekit scaling (``extend --out x.gguf``).

A GGUF file is loaded as a transformers model by :mod:`ropekit.integrations.hf.load` (its config, for the
architectures :mod:`ropekit.integrations.hf.gguf_config` knows, from the header alone); ``extend``'s GGUF output
and llama.cpp's flags for ``extend`` and ``plan`` are :mod:`ropekit.cli.extend_gguf`. The llama-cpp-python version
checked is in :data:`ropekit._versions.CHECKED`.
"""

__all__ = [
    "fields",
    "file",
    "header",
    "llamacpp_rope",
    "read_rope",
    "write_rope",
]
