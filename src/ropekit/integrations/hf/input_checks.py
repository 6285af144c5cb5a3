"""Checks of what ``extend`` and ``finetune`` read, run before anything is written or loaded.

Each raises a ``ValueError`` that names ``--model`` and says what to give instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument
from ropekit.scaling.registry import ScalingConfig

#: file names that hold a transformers model's weights (one of them must be in a folder ``extend`` copies)
_WEIGHTS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json", "pytorch_model*.bin.index.json")


def check_weights(folder: Path) -> None:
    """Refuse a model folder without weights (its copy would not load).

    Raises:
        ValueError: no ``*.safetensors`` / ``pytorch_model*.bin`` (or their index) in ``folder``.
    """
    if not any(any(folder.glob(pattern)) for pattern in _WEIGHTS):
        message = (
            f"model {str(folder)!r} holds no weights (no *.safetensors or pytorch_model*.bin file); its copy "
            "would not load: give the folder save_pretrained wrote"
        )
        raise InvalidArgument("model", str(folder), message=message)


def check_not_shorter(
    config: Mapping[str, Any], native: RopeConfig, scaling: ScalingConfig | None, original: int, target: int
) -> None:
    """Refuse a scaled target shorter than the context an already-extended model has (its native scaling's
    ``max_position_embeddings``): the factor is relative to the original length, not to the current one.

    Args:
        config: the model's config dict.
        native: the model's own RoPE (with its native scaling, if any).
        scaling: the method asked for (``None``: drop the native scaling, which may shrink the context).
        original: the original (pre-training) length the factor is relative to.
        target: the length to write.

    Raises:
        ValueError: the model has a native scaling, ``scaling`` is given, and ``target`` is below the config's
            ``max_position_embeddings``.
    """
    current = int(config.get("max_position_embeddings") or 0)
    if native.scaling is not None and scaling is not None and target < current:
        factor = scaling.stated_factor()
        how = f" (the original length {original:,} × factor {factor:g})" if factor else ""
        raise InvalidArgument(
            "model",
            current,
            leads=True,
            message=f"model: already extended to {current:,} tokens (max_position_embeddings, {native.scaling.rope_type} "
            f"scaling); the target {target:,}{how} would shrink it. The factor is relative to the original length "
            f"{original:,}: ask for a factor of at least {current / original:g}, or a target of at least {current:,}",
        )


def check_tokenizer(model: Path) -> None:
    """Refuse a model folder without tokenizer files (a ``.gguf`` file carries its own tokenizer).

    Raises:
        ValueError: none of ``tokenizer.json``, ``tokenizer.model``, ``vocab.json``, ... is in the folder.
    """
    from ropekit.integrations.hf.load import TOKENIZER_FILES, has_tokenizer

    if not has_tokenizer(model):
        raise InvalidArgument(
            "model",
            str(model),
            message=f"model {str(model)!r} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); fine-tuning reads "
            "the text with the model's own tokenizer: copy them into the folder (tokenizer.save_pretrained)",
        )
