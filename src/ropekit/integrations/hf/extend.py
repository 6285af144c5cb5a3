"""Write a model with a new RoPE as a checkpoint that transformers loads natively (no ropekit needed).

The native form itself (which ``rope_parameters`` give exactly ropekit's frequencies, and which methods cannot be
written) is :mod:`ropekit.integrations.hf.native_rope`; reading the model's config is
:mod:`ropekit.integrations.hf.model_config`. This module writes the folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ropekit.integrations.hf.load import load_model, transformers_config
from ropekit.integrations.hf.model_config import (
    extended_config,
    first_scaled_type,
    original_length_of,
    rope_of,
    scaled_layer_types,
)
from ropekit.integrations.hf.native_rope import extended_length
from ropekit.integrations.hf.preservation import Request, check_preserved
from ropekit.scaling.registry import ScalingConfig

#: files that are the old model's weights or config; everything else in the folder is copied as is.
_NOT_COPIED = {"config.json"}


def written_names(model: str | Path) -> list[str]:
    """The files ``extend`` writes into its output folder for ``model``, as paths relative to it: a folder's files
    and ``config.json`` (a GGUF model's other files are known once transformers saved them)."""
    source = Path(model)
    names = {"config.json"}
    if source.is_dir():
        for item in source.iterdir():
            if item.name in _NOT_COPIED:
                continue
            found = [item] if not item.is_dir() else [p for p in item.rglob("*") if not p.is_dir()]
            names.update(str(p.relative_to(source)) for p in found)
    return sorted(names)


def write_config(out: Path, config: Mapping[str, Any]) -> None:
    """Write ``config.json`` (sorted keys, as transformers does)."""
    (out / "config.json").write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n")


def save_extended(model, tokenizer, out: Path, config: Mapping[str, Any], *, source: Path | None = None) -> None:
    """Save ``model``'s weights (safetensors) and ``tokenizer`` into ``out`` and write ``config``.

    ``source``: a model folder whose other files (tokenizer, generation config) are copied when no tokenizer is
    given. Keys that ``config`` leaves ``None`` but ``save_pretrained`` filled (``architectures`` and ``dtype`` of a
    model read from a GGUF file) keep the saved value.
    """
    model.save_pretrained(out, safe_serialization=True)
    saved = json.loads((out / "config.json").read_text()) if (out / "config.json").is_file() else {}
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    elif source is not None and source.is_dir():
        for item in source.iterdir():
            if item.is_file() and item.name not in _NOT_COPIED and not (out / item.name).exists():
                shutil.copy2(item, out / item.name)
    filled = {key: value for key, value in saved.items() if config.get(key) is None and value is not None}
    write_config(out, {**config, **filled})


@dataclass(frozen=True)
class ExtendResult:
    """What :func:`extend` wrote: the folder, its config, and one note per (layer type's) RoPE."""

    out: Path
    config: dict[str, Any]
    notes: list[str]


def extend(
    model: str | Path,
    scaling: ScalingConfig | None,
    out: str | Path,
    *,
    target_length: int | None = None,
    original_length: int | None = None,
    layer_types: Sequence[str] | None = None,
    force: bool = False,
    extra_config: Mapping[str, Any] | None = None,
) -> ExtendResult:
    """Copy ``model`` to ``out`` with a ``config.json`` giving it ``scaling`` natively.

    A folder is copied file by file (weights untouched) and its ``config.json`` rewritten; a ``.gguf`` file is
    dequantised through transformers and saved as safetensors with its tokenizer. Everything is checked first;
    the folder is written beside ``out`` and its files renamed into ``out`` at the end (:mod:`ropekit._output`), so an
    error or Ctrl-C leaves an existing ``out`` as it was; files ``out`` holds that the copy does not write are left
    alone, and an ``out`` that is, holds or lies inside ``model`` is refused.

    Args:
        model: a transformers model folder or a ``.gguf`` file.
        scaling: the method (``None``: plain RoPE at the model's base, dropping a native scaling).
        out: the new folder.
        target_length: ``max_position_embeddings`` to write; default: the original length times the method's
            ``factor`` (the original length for methods without one).
        original_length: the pre-training length the factor is relative to (default: from the config).
        layer_types: for per-layer-type models, which layer types to scale (see :func:`extended_config`).
        force: replace the files of ``out`` that the copy writes (refused otherwise).
        extra_config: keys added to the written ``config.json`` that transformers ignores and engines read (Qwen's
            ``dual_chunk_attention_config``: :mod:`ropekit.integrations.hf.dual_chunk_config`).

    Raises:
        FileExistsError: ``out`` holds files the copy writes and ``force`` is false, or it is a file.
        FileNotFoundError: no model at ``model``, or no parent folder for ``out``.
        ValueError: ``out`` overlaps ``model``; not a RoPE model, a folder without weights, a target not above
            the original length or below the model's current one, a ``dual_chunk_attention_config`` in
            ``extra_config`` beside a scaling (vLLM and SGLang would run plain RoPE), a method transformers cannot
            express or the model's config class would not load, or a written model that is not the source with
            ``scaling`` (measured from transformers' forward: :mod:`~ropekit.integrations.hf.preservation`); all
            checked on the staged folder before anything is published.
    """
    from ropekit._output import check_output, staged_output
    from ropekit.integrations.hf.dual_chunk_config import refuse_beside_a_scaling
    from ropekit.integrations.hf.input_checks import check_not_shorter, check_weights
    from ropekit.integrations.hf.transformers_reads import as_transformers_reads

    source = Path(model)
    check_output(out, [("model", source)], names=written_names(source), force=force)
    shipped = transformers_config(source)
    refuse_disagreeing_keys(shipped)
    config = as_transformers_reads(shipped)  # every key kept, the RoPE as transformers reads it
    rope = rope_of(config, first_scaled_type(config, layer_types))
    if source.suffix != ".gguf":
        check_weights(source)
    original = int(original_length) if original_length else original_length_of(config, rope)
    target = extended_length(scaling, original, target_length)
    if target < original:
        raise ValueError(f"target_length must be >= the original length {original}, got {target}")
    check_not_shorter(config, rope, scaling, original, target)
    new_config, notes = extended_config(config, scaling, target_length=target, layer_types=layer_types)
    new_config.update(extra_config or {})
    refuse_beside_a_scaling(new_config)
    notes = [note for note in notes if not (extra_config and note.startswith(tuple(extra_config)))]
    with staged_output(out, force=force) as staged:
        if source.suffix == ".gguf":
            loaded, tokenizer = load_model(source)
            save_extended(loaded, tokenizer, staged, new_config)
        else:
            _copy_folder(source, staged)
            write_config(staged, new_config)
        check_loads(staged)
        written = json.loads((staged / "config.json").read_text())  # the file, as every reader will see it
        request = Request(scaling, scaled_layer_types(config, layer_types), original)
        unchecked = check_preserved(config, written, request)
    return ExtendResult(Path(out), new_config, notes + ([unchecked] if unchecked else []))


def _copy_folder(source: Path, staged: Path) -> None:
    """Every file and folder of ``source`` but its config into ``staged``, as they are."""
    for item in source.iterdir():
        if item.name in _NOT_COPIED:
            continue
        if item.is_dir():
            shutil.copytree(item, staged / item.name)
        else:
            shutil.copy2(item, staged / item.name)


def refuse_disagreeing_keys(config: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming both values where ``config``'s ``rope_parameters`` and an older key restating it
    (``rope_theta``, ``rope_scaling``, ``rotary_emb_base``, ...) disagree: transformers 5 runs the first, MLX-LM,
    llama.cpp's converter and transformers 4.x the second, so no extension of it means one thing."""
    from ropekit.integrations.hf.restated_keys import disagreements

    found = disagreements(config)
    if found:
        raise ValueError(
            f"{config.get('model_type') or 'the model'}'s config.json disagrees with itself: {'; '.join(found)} "
            "(transformers 5 reads rope_parameters, MLX-LM and transformers 4.x the older key); make them agree first"
        )


def check_loads(folder: Path) -> None:
    """Raise ``ValueError`` unless transformers' config class for the model type and its ``AutoConfig`` load
    ``folder``'s written ``config.json`` (a model type transformers does not know is not checked): the last check
    before a staged folder is published."""
    from ropekit.integrations.hf.transformers_reads import quietly, read_config

    written = json.loads((folder / "config.json").read_text())
    try:
        if read_config(written) is not None:
            from transformers import AutoConfig

            with quietly():
                AutoConfig.from_pretrained(folder)
    except Exception as error:
        model_type = written.get("model_type")
        raise ValueError(f"{model_type}: the written config.json does not load ({error}); nothing written") from None
