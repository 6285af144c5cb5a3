"""The versions of the engines ropekit's behaviour is checked against, in one place.

Docstrings that describe another engine's behaviour ("transformers quirk: …", llama.cpp's metadata, MLX-LM's and
vLLM's RoPE) describe these versions; pyproject.toml pins the same ones, and ``tests/test_versions.py`` checks that
the installed packages are these where they are installed.
"""

#: package name → the version checked
CHECKED = {
    "transformers": "5.18.0",
    "llama-cpp-python": "0.3.36",
    "mlx-lm": "0.32.2",
    "vllm": "0.33.0",
}
