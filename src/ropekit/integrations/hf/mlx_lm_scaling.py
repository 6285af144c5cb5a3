"""Which MLX-LM model files read no RoPE scaling: MLX-LM 0.32.2 builds each model from
``mlx_lm/models/<model_type>.py`` (after its ``MODEL_REMAPPING``), and these files build ``nn.RoPE`` from the base
alone, never passing ``rope_scaling`` to ``initialize_rope``. For them a scaled config runs as plain RoPE at
``rope_theta`` in MLX-LM (a base change still reaches it). ``tests/integrations/hf/test_mlx_lm_scaling.py`` derives the
table again from the installed mlx_lm's files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: MLX-LM 0.32.2 model files (module names) that build their RoPE without reading ``rope_scaling``
NO_SCALING_FILES = frozenset(
    {
        "Klear", "afm7", "baichuan_m1", "cohere", "cohere2", "dbrx", "ernie4_5", "ernie4_5_moe", "gemma", "gemma2",
        "gemma3n", "glm", "glm4", "glm4_moe", "gpt_neox", "gptj", "helium", "lille-130m", "llama4_text",
        "mimo_v2_flash", "minimax", "mixtral", "olmo", "openelm", "phi", "phi3small", "phixtral", "plamo", "plamo2",
        "plamo3", "qwen", "qwen3_moe", "recurrent_gemma", "stablelm", "starcoder2",
    }
)  # fmt: skip
#: MLX-LM's ``MODEL_REMAPPING`` for the model types whose file is another's
REMAPPED = {"minimax_m2": "minimax", "phi-msft": "phixtral", "mistral": "llama", "xverse": "llama"}


def mlx_file(model_type: str) -> str:
    """The MLX-LM model file (module name) that serves ``model_type``."""
    return REMAPPED.get(model_type, model_type)


def mlx_scaling_gap(config: Mapping[str, Any]) -> str | None:
    """One phrase when ``config`` carries a RoPE scaling (a non-null ``rope_scaling``, or a ``rope_parameters`` whose
    ``rope_type`` is not ``default``) that MLX-LM's file for its model type never reads; else ``None``."""
    model_type = str(config.get("model_type") or "")
    if mlx_file(model_type) not in NO_SCALING_FILES:
        return None
    scaling = config.get("rope_scaling")
    params = config.get("rope_parameters")
    scaled = isinstance(scaling, Mapping) and (scaling.get("type") or scaling.get("rope_type")) not in (None, "default")
    if isinstance(params, Mapping) and params.get("rope_type") not in (None, "default"):
        scaled = True
    if not scaled:
        return None
    return (
        f"its {mlx_file(model_type)}.py reads no rope_scaling (MLX-LM 0.32): it runs plain RoPE at rope_theta, "
        "not this scaling"
    )
