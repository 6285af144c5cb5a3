"""What an engine's model class for the architecture does with the configuration, beyond its rotary module.

vLLM's and SGLang's probes report what their model file passes to ``get_rope``
(:mod:`ropekit.engines.source_reader`); :func:`class_verdict` turns what the file drops into the reasons a row
cannot express the configuration, naming the file. MLX-LM's model files are read here, where MLX-LM is installed:
:func:`mlx_reads_scaling` says whether the architecture's file reads any scaling key at all.
"""

from __future__ import annotations

import functools
from typing import Any

from ropekit.engines.probe import EngineRow

#: the words an MLX-LM model file that reads a scaling names (its config key or the helpers that read it)
MLX_SCALING_WORDS = ("rope_scaling", "rope_parameters", "scaling_config", "initialize_rope", "SuScaledRoPE")


def scaled(params: dict[str, Any]) -> bool:
    """Whether transformers' rope dict of the compared layer scales anything (a ``rope_type`` other than plain)."""
    return params.get("rope_type", "default") != "default"


def class_verdict(engine: str, reply: dict[str, Any], params: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The reasons ``engine``'s model class cannot express ``params`` (transformers' rope dict) on ``config``,
    from its probe's ``reply`` (``model_file``, ``line``, ``scaling``, ``dual_chunk``); empty where it can."""
    call = f"get_rope at line {reply['line']}" if reply.get("line") else "its recorded get_rope call"
    where = f"{reply.get('model_file')} ({call})"
    kind = params.get("rope_type", "default")
    reasons = []
    if reply.get("scaling") is False and scaled(params):
        reasons.append(f"{engine}'s {where} passes no scaling to get_rope: it runs plain RoPE, not {kind}")
    if reply.get("dual_chunk") and config.get("dual_chunk_attention_config") and scaled(params):
        reasons.append(
            f"{engine}'s {where} passes dual_chunk_attention_config, and with one {engine} builds "
            f"DualChunkRotaryEmbedding from the base alone: no {kind}"
        )
    return reasons


def pairing_reason(engine: str, reply: dict[str, Any], interleaved: bool) -> list[str]:
    """Why ``engine``'s model file rotates other pairs than transformers does (``interleaved``: transformers
    rotates (2i, 2i + 1)), where it does and loads the q/k weights as they are; empty otherwise."""
    neox = reply.get("neox")
    if neox is None or reply.get("permutes_qk") or neox != interleaved:
        return []
    theirs, ours = ("(i, i + d/2)", "(2i, 2i + 1)") if neox else ("(2i, 2i + 1)", "(i, i + d/2)")
    return [
        f"{engine}'s {reply.get('model_file')} rotates pairs {theirs} (is_neox_style={neox}) and loads q/k weights "
        f"as they are, where transformers rotates pairs {ours}"
    ]


def backend_row(engine: str, version: str | None, config: dict[str, Any], where: str) -> EngineRow:
    """The row of an architecture ``engine`` serves only through its Transformers backend."""
    arch = (config.get("architectures") or ["this architecture"])[0]
    detail = (
        f"{engine} has no model class of its own for {arch}: it serves it through its Transformers backend, which "
        "runs transformers' own RoPE code (the reference itself; nothing of the engine's to compare)"
    )
    return EngineRow(engine, version, "same", detail, where, {"backend": "transformers"})


def mlx_model_file(model_type: str) -> str | None:
    """The source path of MLX-LM's model file for ``model_type`` (its remapping applied), ``None`` without one."""
    import importlib.util

    try:
        from mlx_lm.utils import MODEL_REMAPPING
    except ImportError:
        return None
    name = MODEL_REMAPPING.get(model_type, model_type)
    spec = importlib.util.find_spec(f"mlx_lm.models.{name}")
    return None if spec is None else spec.origin


#: the words an MLX-LM model file that rotates part of the head names (its config keys or derived widths)
MLX_PARTIAL_WORDS = ("partial_rotary_factor", "rotary_dim", "rope_dim", "rotary_pct", "rotary_emb_dim", "rope_head_dim")


@functools.cache
def mlx_source(model_type: str) -> tuple[str | None, str]:
    """``(its name as mlx_lm/models/<file>, its text)`` of MLX-LM's model file for ``model_type``; ``(None, "")``
    without one. Read once a process: a row asks it whether the file reads a scaling, a partial width, and its
    pairing."""
    from pathlib import Path

    path = mlx_model_file(model_type)
    if path is None:
        return None, ""
    return f"mlx_lm/models/{Path(path).name}", Path(path).read_text(encoding="utf-8")


def mlx_reads_partial(model_type: str) -> tuple[str | None, bool]:
    """``(MLX-LM's model file for model_type, whether it reads a partial rotary width)``: a file that names none of
    :data:`MLX_PARTIAL_WORDS` rotates the whole head. ``(None, True)`` without a file."""
    return _names_any(model_type, MLX_PARTIAL_WORDS)


def mlx_reads_scaling(model_type: str) -> tuple[str | None, bool]:
    """``(MLX-LM's model file for model_type, whether it reads any scaling)``: a file that names none of
    :data:`MLX_SCALING_WORDS` builds its RoPE from the base alone. ``(None, True)`` without a file."""
    return _names_any(model_type, MLX_SCALING_WORDS)


def _names_any(model_type: str, words: tuple[str, ...]) -> tuple[str | None, bool]:
    name, source = mlx_source(model_type)
    return (None, True) if name is None else (name, any(word in source for word in words))
