"""Helpers shared by test files, imported as ``helpers.<module>`` (``tests/`` is on pytest's ``pythonpath``):
small random transformers models (:mod:`helpers.hf_models`), synthetic GGUF files (:mod:`helpers.gguf_files`),
the port of llama.cpp's RoPE arithmetic (:mod:`helpers.llamacpp_port`) and llama-cpp-python's server on loopback
(:mod:`helpers.llama_server`)."""
