"""GGUF out: a copy of a GGUF file whose RoPE metadata makes llama.cpp compute a ropekit scaling.

The tensors are copied byte for byte (same quantisation, no dequantisation); only RoPE metadata changes — the
architecture's ``rope.freq_base``, ``rope.scaling.{type,factor,original_context_length,attn_factor}`` and
``context_length`` — and, for per-pair methods, the ``rope_freqs`` tensor (F32, n_rot/2 divisors of θ_i). What each
field means to llama.cpp is in :mod:`ropekit.integrations.gguf.llamacpp_rope`.

Models with sliding-window layers (Gemma 3): llama.cpp scales only the other layers (``get_rope_freq_scale`` gives
the sliding layers ``freq_scale`` 1 and their own base ``rope.freq_base_swa``), and YaRN then leaves them unchanged,
as transformers does for ``rope_parameters`` keyed by layer type with the scaling on ``full_attention``. The
attention factor and ``rope_freqs``, though, would reach every layer, so there only the named forms with their own
attention factor are written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ropekit.integrations.gguf.file import check_gguf
from ropekit.integrations.gguf.llamacpp_rope import ROPE_FREQS_ARCHITECTURES, LlamaCppRope, to_llamacpp
from ropekit.integrations.gguf.read_rope import ROPE_FREQS, FileRope, architecture_of, import_gguf, read_file_rope


def gguf_form(
    file: FileRope,
    scaling: Any,
    *,
    layer_types: Sequence[str] | None = None,
) -> LlamaCppRope:
    """The llama.cpp form that gives ``file``'s model ``scaling`` (replacing its own), or why there is none.

    Args:
        file: the source file's RoPE (:func:`read_file_rope`); its base and rotary dims are kept.
        scaling: a ropekit scaling config, or ``None`` for plain RoPE.
        layer_types: for models with sliding-window layers, the layer types to scale: only ``full_attention``
            (the default), as llama.cpp never scales sliding layers.

    Raises:
        ValueError: the method cannot be expressed for this file (the message says why).
    """
    from ropekit.config import RopeConfig

    if file.unmodelled:
        raise ValueError(
            f"the file's RoPE uses {', '.join(file.unmodelled)}, which ropekit does not model; it cannot rewrite it"
        )
    rope = RopeConfig(file.rope.n_rot, base=file.rope.freq_base, scaling=scaling)
    if file.sliding:
        extra = sorted(set(layer_types or ("full_attention",)) - {"full_attention"})
        if extra:
            raise ValueError(
                f"layer_types {extra}: llama.cpp never scales sliding-window layers (they keep freq_scale 1 and "
                "rope.freq_base_swa); only full_attention can be scaled in a GGUF file"
            )
    form = to_llamacpp(rope, rope_freqs=file.architecture in ROPE_FREQS_ARCHITECTURES and not file.sliding, betas=False)
    original = None if scaling is None else scaling.stated_original_length()
    if form.original_context_length is None and original:
        form = dataclasses.replace(form, original_context_length=int(original))  # informative: YaRN is off
    if file.sliding and (form.freq_factors is not None or form.attn_factor != 1.0):
        raise ValueError(
            f"{scaling.rope_type} here needs an attention factor or per-pair factors, which llama.cpp would apply to "
            "the sliding-window layers too; use linear, yarn with its own attention factor, or a base change"
        )
    return form


def write_gguf(
    source: str | Path,
    out: str | Path,
    form: LlamaCppRope,
    *,
    context_length: int,
    force: bool = False,
) -> Path:
    """Copy ``source`` to ``out`` with ``form`` as its RoPE and ``context_length``; tensors byte for byte.

    The source is checked first (:func:`~ropekit.integrations.gguf.file.check_gguf`: every size within the file), so
    gguf-py's reader, which copies it, reads only a file whose counts are bounded. The file is written beside ``out``
    and renamed into place when complete (:func:`ropekit._output.staged_file`), so an interrupted write leaves any
    old ``out`` as it was.

    Raises:
        FileExistsError: ``out`` exists and ``force`` is false, or it is not a regular file.
        ValueError: ``out`` is ``source``, or ``source`` is not a whole GGUF file.
    """
    from ropekit._output import check_output, staged_file

    gguf = import_gguf()
    source, out = Path(source), Path(out)
    if out.exists() and source.exists() and os.path.samefile(out, source):
        raise ValueError(f"out {str(out)!r} is the source model; choose a new file")
    check_output(out, kind="file", force=force)
    arch = architecture_of(check_gguf(source))
    reader = gguf.GGUFReader(str(source))
    with staged_file(out, force=force) as partial:
        _write(gguf, reader, partial, arch, form, context_length)
    return out


def _write(gguf: Any, reader: Any, partial: Path, arch: str, form: LlamaCppRope, context_length: int) -> None:
    """The GGUF file at ``partial``: ``reader``'s keys and tensors with ``form`` as its RoPE."""
    keys = gguf.Keys
    rope_prefix = keys.Rope.FREQ_BASE.format(arch=arch).removesuffix("freq_base")  # "{arch}.rope."
    # which dims rotate, and how (M-RoPE's sections), is the model's, not its scaling: llama.cpp refuses an M-RoPE
    # architecture without its sections (Qwen3-VL, Qwen3.5, Qwen3.8-Flash-Next)
    structure = (keys.Rope.DIMENSION_COUNT, keys.Rope.DIMENSION_COUNT_SWA, keys.Rope.DIMENSION_SECTIONS)
    kept_rope = {key.format(arch=arch) for key in (*structure, keys.Rope.FREQ_BASE_SWA)}
    rewritten = {keys.LLM.CONTEXT_LENGTH.format(arch=arch), keys.General.ARCHITECTURE}
    writer = gguf.GGUFWriter(str(partial), arch, endianess=reader.endianess)
    try:
        for field in reader.fields.values():
            name = field.name
            if name.startswith("GGUF.") or name in rewritten:
                continue
            if name.startswith(rope_prefix) and name not in kept_rope:
                continue  # every RoPE key is rewritten below (a stale one would change what llama.cpp computes)
            sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub_type)
        writer.add_context_length(int(context_length))
        writer.add_rope_freq_base(float(form.freq_base))
        writer.add_rope_scaling_type(gguf.RopeScalingType(form.scaling_type))
        if form.scaling_type != "none":
            writer.add_rope_scaling_factor(float(form.factor))
        if form.original_context_length is not None:
            writer.add_rope_scaling_orig_ctx_len(int(form.original_context_length))
        if form.attn_factor != 1.0:
            writer.add_rope_scaling_attn_factors(float(form.attn_factor))
        kept = [tensor for tensor in reader.tensors if tensor.name != ROPE_FREQS]
        factors = None if form.freq_factors is None else np.asarray(form.freq_factors, dtype=np.float32)
        if factors is not None:
            writer.add_tensor_info(
                ROPE_FREQS, factors.shape, factors.dtype, factors.nbytes, gguf.GGMLQuantizationType.F32
            )
        for tensor in kept:
            writer.add_tensor_info(
                tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        if factors is not None:
            writer.write_tensor_data(factors)
        for tensor in kept:
            writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    finally:
        writer.close()


@dataclass(frozen=True)
class GGUFResult:
    """What :func:`extend_gguf` wrote: the file, llama.cpp's form of the RoPE, and the context length."""

    out: Path
    form: LlamaCppRope
    context_length: int
    architecture: str


def extend_gguf(
    model: str | Path,
    scaling: Any,
    out: str | Path,
    *,
    target_length: int | None = None,
    original_length: int | None = None,
    layer_types: Sequence[str] | None = None,
    force: bool = False,
) -> GGUFResult:
    """Copy the GGUF file ``model`` to ``out`` with ``scaling`` in its RoPE metadata (tensors byte for byte).

    Args:
        model: a ``.gguf`` file.
        scaling: a ropekit scaling config (``None``: plain RoPE at the file's base, dropping its own scaling).
        out: the new ``.gguf`` file.
        target_length: ``context_length`` to write; default the original length times the method's factor (the
            original length for methods without one).
        original_length: the pre-training length the factor is relative to; default the method's
            ``original_max_position_embeddings``, else the file's ``rope.scaling.original_context_length``, else its
            ``context_length``. llama.cpp takes ``context_length`` as the trained length, so a file that is already
            extended says its pre-training length only in ``original_context_length``, as a folder's config says it
            in its scaling's ``original_max_position_embeddings``.
        layer_types: see :func:`gguf_form`.
        force: overwrite an existing ``out``.

    Raises:
        ValueError: the method cannot be expressed in llama.cpp for this file (the message says why).
        FileExistsError: ``out`` exists and ``force`` is false.
    """
    from ropekit.integrations.hf.native_rope import extended_length

    file = read_file_rope(model)
    form = gguf_form(file, scaling, layer_types=layer_types)
    original = int(
        original_length
        or (scaling and scaling.stated_original_length())
        or file.rope.original_context_length
        or file.context_length
    )
    target = extended_length(scaling, original, target_length)
    path = write_gguf(model, out, form, context_length=target, force=force)
    return GGUFResult(path, form, target, file.architecture)
