"""Reading a GGUF file's RoPE as llama.cpp does, so that ropekit evaluates the model llama.cpp runs.

transformers' GGUF loader maps ``rope.freq_base`` to ``rope_theta`` but drops ``rope.scaling.*`` and the
``rope_freqs`` tensor for the Llama family: a YaRN or Llama 3 GGUF file would load as plain RoPE. ropekit reads those
fields itself (:func:`read_file_rope`, with llama.cpp's defaults) and gives the transformers ``rope_parameters`` that
compute the same frequencies and attention factor (:func:`gguf_rope_parameters`); files whose RoPE uses inputs ropekit
does not model (Phi-3's long/short factor tensors, DeepSeek's YaRN log multiplier) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ropekit.integrations.gguf.llamacpp_rope import LlamaCppRope, llamacpp_frequencies

#: the tensor llama.cpp reads per-pair divisors from (``LLM_TENSOR_ROPE_FREQS``)
ROPE_FREQS = "rope_freqs.weight"
#: tensors and keys of llama.cpp RoPE forms ropekit does not model (Phi-3's LongRoPE lists, DeepSeek's YaRN scale)
_UNMODELLED_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")
_UNMODELLED_KEYS = ("rope.scaling.yarn_log_multiplier",)
#: architectures whose llama.cpp loader reads YaRN's betas from the file
_READS_BETAS = ("grok", "mistral3")


def import_gguf() -> Any:
    """The ``gguf`` package, or a ``ValueError`` saying how to install it."""
    try:
        import gguf
    except ImportError as error:
        raise ValueError("GGUF files need the gguf package: pip install 'ropekit[hf]'") from error
    return gguf


@dataclass(frozen=True)
class FileRope:
    """The RoPE of a GGUF file as llama.cpp reads it.

    Attributes:
        architecture: ``general.architecture`` (the prefix of the RoPE keys).
        rope: llama.cpp's form (base, scaling, ``rope_freqs``).
        context_length: ``{arch}.context_length``.
        sliding: the file declares sliding-window layers (``attention.sliding_window`` > 0).
        unmodelled: RoPE inputs llama.cpp reads that ropekit does not model (empty when fully understood).
    """

    architecture: str
    rope: LlamaCppRope
    context_length: int
    sliding: bool
    unmodelled: tuple[str, ...]


def open_gguf(path: str | Path) -> Any:
    """The ``gguf.GGUFReader`` of ``path``: its metadata and tensor table, parsed once (a vocabulary of 50k tokens
    takes seconds), for the functions here that take ``reader=``.

    Raises:
        ValueError: not a readable GGUF file, or the gguf package is missing.
    """
    gguf = import_gguf()
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError) as error:
        raise ValueError(f"{str(path)!r} is not a readable GGUF file: {error}") from error


def read_file_rope(path: str | Path, *, reader: Any = None) -> FileRope:
    """The RoPE llama.cpp would run for the GGUF file ``path`` (defaults as in llama.cpp's ``load_hparams``), read
    from ``reader`` (its :func:`open_gguf`) where the caller has parsed the file already.

    Raises:
        ValueError: not a readable GGUF file, or the gguf package is missing.
    """
    return _file_rope(open_gguf(path) if reader is None else reader)


def _file_rope(reader: Any) -> FileRope:
    def field(key: str, default: Any = None) -> Any:
        item = reader.fields.get(key)
        return default if item is None else item.contents()

    arch = str(field("general.architecture"))
    key = f"{arch}.".__add__
    context = int(field(key("context_length"), 0) or 0)
    heads = int(field(key("attention.head_count"), 0) or 0)
    head_dim = field(key("attention.key_length")) or (int(field(key("embedding_length"), 0)) // heads if heads else 0)
    n_rot = int(field(key("rope.dimension_count"), head_dim) or 0)
    if n_rot < 2:
        raise ValueError(f"GGUF architecture {arch!r}: cannot tell its rotary dims (no rope.dimension_count)")
    kind = str(field(key("rope.scaling.type"), "linear"))  # llama.cpp's default when the key is absent
    factor = float(field(key("rope.scaling.factor"), 0.0) or field(key("rope.scale_linear"), 0.0) or 0.0)
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    freqs = tensors.get(ROPE_FREQS)
    unmodelled = [name for name in _UNMODELLED_TENSORS if name in tensors]
    unmodelled += [key(name) for name in _UNMODELLED_KEYS if float(field(key(name), 0.0) or 0.0) != 0.0]
    if kind not in ("none", "linear", "yarn"):
        unmodelled.append(f"{key('rope.scaling.type')} = {kind}")
    betas = (32.0, 1.0)
    if arch in _READS_BETAS:
        betas = (
            float(field(key("rope.scaling.yarn_beta_fast"), 32.0)),
            float(field(key("rope.scaling.yarn_beta_slow"), 1.0)),
        )
    rope = LlamaCppRope(
        n_rot=n_rot,
        freq_base=float(field(key("rope.freq_base"), 10000.0)),
        scaling_type=kind if kind in ("none", "linear", "yarn") else "none",
        factor=1.0 if kind == "none" or factor == 0.0 else factor,
        original_context_length=int(field(key("rope.scaling.original_context_length"), 0) or context) or None,
        attn_factor=float(field(key("rope.scaling.attn_factor"), 1.0)),
        freq_factors=None if freqs is None else tuple(float(x) for x in np.asarray(freqs.data, dtype=np.float64)),
        beta_fast=betas[0],
        beta_slow=betas[1],
    )
    sliding = int(field(key("attention.sliding_window"), 0) or 0) > 0
    return FileRope(arch, rope, context, sliding, tuple(unmodelled))


def _is_plain(rope: LlamaCppRope) -> bool:
    scaled = rope.scaling_type != "none" and rope.factor != 1.0
    return not scaled and rope.freq_factors is None and rope.attn_factor == 1.0


def gguf_rope_parameters(path: str | Path, *, reader: Any = None) -> dict[str, Any] | None:
    """transformers ``rope_parameters`` computing what llama.cpp computes for the GGUF file ``path`` (read from
    ``reader`` where given, as :func:`read_file_rope`).

    ``None`` for plain RoPE (what transformers' loader already gives). Linear and YaRN without per-pair factors are
    written as themselves; anything else (``rope_freqs``, an extra attention factor on linear) as ``longrope`` with
    one factor list θ_i/θ'_i and an explicit attention factor, which means the same at every length.

    Raises:
        ValueError: the file's RoPE uses inputs ropekit does not model, or is not a readable GGUF file.
    """
    from ropekit.config import RopeConfig
    from ropekit.hf_format import to_hf_dict
    from ropekit.scaling import LinearScaling, LongRopeScaling, YarnScaling

    file = read_file_rope(path, reader=reader)
    if file.unmodelled:
        raise ValueError(
            f"{Path(path).name}: llama.cpp's RoPE for this file uses {', '.join(file.unmodelled)}, which ropekit does "
            "not model; refusing to evaluate a different model"
        )
    rope = file.rope
    if _is_plain(rope):
        return None
    original = rope.original_context_length or file.context_length
    if rope.freq_factors is None and rope.scaling_type == "linear" and rope.attn_factor == 1.0:
        spec: Any = LinearScaling(factor=rope.factor)
    elif rope.freq_factors is None and rope.scaling_type == "yarn":
        spec = YarnScaling(
            factor=max(rope.factor, 1.0),
            original_max_position_embeddings=original,
            beta_fast=rope.beta_fast,
            beta_slow=rope.beta_slow,
            attention_factor=llamacpp_frequencies(rope).attention_factor if rope.attn_factor != 1.0 else None,
        )
    else:
        theirs = llamacpp_frequencies(rope)
        factors = tuple(
            float(x)
            for x in np.asarray(llamacpp_frequencies(LlamaCppRope(rope.n_rot, rope.freq_base)).inv_freq)
            / theirs.inv_freq
        )
        spec = LongRopeScaling(
            short_factor=factors,
            long_factor=factors,
            original_max_position_embeddings=original,
            attention_factor=theirs.attention_factor,
        )
    return to_hf_dict(RopeConfig(rope.n_rot, base=rope.freq_base, scaling=spec))


def apply_gguf_rope(config: Any, path: str | Path, *, reader: Any = None) -> Any:
    """Give a transformers config loaded from the GGUF file ``path`` the RoPE llama.cpp runs (in place; returned).

    Works on a ``PretrainedConfig`` or a plain ``config.json`` dict; a plain-RoPE file leaves it unchanged. ``reader``:
    the file's :func:`open_gguf`, where the caller has parsed it already.

    Raises:
        ValueError: as :func:`gguf_rope_parameters`.
    """
    params = gguf_rope_parameters(path, reader=reader)
    if params is None:
        return config
    is_dict = isinstance(config, dict)
    current = (config.get("rope_parameters") if is_dict else getattr(config, "rope_parameters", None)) or {}
    if any(isinstance(value, dict) for value in current.values()):  # keyed by layer type: llama.cpp scales full only
        params = {**current, "full_attention": params}
    if is_dict:
        config.pop("rope_scaling", None)
        config["rope_parameters"] = params
    else:
        config.rope_parameters = params
    return config
