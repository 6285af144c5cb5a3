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

from ropekit.errors import InvalidArgument
from ropekit.integrations.gguf.fields import (
    LOCAL_KEYS,
    MAX_HEAD_DIM,
    MAX_LENGTH,
    arch_key,
    context_length_of,
    float_value,
    int_value,
    keys,
    text_value,
)
from ropekit.integrations.gguf.file import check_gguf
from ropekit.integrations.gguf.header import GGUFHeader
from ropekit.integrations.gguf.llamacpp_rope import LlamaCppRope, llamacpp_frequencies

#: the tensor llama.cpp reads per-pair divisors from (gguf-py's ``TENSOR_NAMES[MODEL_TENSOR.ROPE_FREQS]``, a weight;
#: spelled here because ``gguf`` is optional and this module's importers need the name, checked against gguf-py in
#: tests/integrations/gguf/test_header.py)
ROPE_FREQS = "rope_freqs.weight"
#: tensors of llama.cpp RoPE forms ropekit does not model (Phi-3's LongRoPE lists: ``ROPE_FACTORS_LONG``/``_SHORT``)
_UNMODELLED_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")
#: architectures whose llama.cpp loader reads YaRN's betas from the file
_READS_BETAS = ("grok", "mistral3")
#: the scaling types ropekit models (llama.cpp's ``LLAMA_ROPE_SCALING_TYPE`` names)
_MODELLED_TYPES = ("none", "linear", "yarn")
#: ggml's F32 type (``GGMLQuantizationType.F32``), the only type llama.cpp accepts for ``rope_freqs``
_F32 = 0


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


def open_gguf(path: str | Path) -> GGUFHeader:
    """The header of the GGUF file ``path`` (its metadata and tensor table, every size checked against the file;
    the vocabulary is skipped), for the functions here that take ``reader=``.

    Raises:
        ValueError: not a whole GGUF file (the message names the key or tensor), or the gguf package is missing.
    """
    return check_gguf(path)


def read_file_rope(path: str | Path, *, reader: GGUFHeader | None = None) -> FileRope:
    """The RoPE llama.cpp would run for the GGUF file ``path`` (defaults as in llama.cpp's ``load_hparams``), read
    from ``reader`` (its :func:`open_gguf`) where the caller has read the header already.

    Raises:
        ValueError: not a whole GGUF file, a RoPE key of the wrong type or out of range (an
            :class:`~ropekit.errors.InvalidArgument` naming the key and its value), or the gguf package is missing.
    """
    return _file_rope(open_gguf(path) if reader is None else reader)


def architecture_of(header: GGUFHeader) -> str:
    """``general.architecture``: a name of letters, digits, ``_`` and ``-`` (it prefixes every model key).

    Raises:
        ValueError: absent, or not such a name (an :class:`~ropekit.errors.InvalidArgument` naming the key).
    """
    key = keys().General.ARCHITECTURE
    arch = text_value(header, key)
    if not arch or not all(c.isascii() and (c.isalnum() or c in "_-") for c in arch) or len(arch) > 64:
        message = f"model {str(header.path)!r}: GGUF key {key!r} = {arch!r}: must name an architecture (e.g. 'llama')"
        raise InvalidArgument("model", str(header.path), message=message)
    return arch


def head_dim_of(header: GGUFHeader, arch: str) -> int | None:
    """The head size llama.cpp uses: ``attention.key_length``, else ``embedding_length / head_count`` (``None``
    when the file says neither).

    Raises:
        ValueError: a key of the wrong type, zero heads, or an embedding not divisible by the heads (each names the
            key and its value).
    """
    k = keys()
    head_dim = int_value(header, arch_key(k.Attention.KEY_LENGTH, arch), low=1, high=MAX_HEAD_DIM)
    if head_dim is not None:
        return head_dim
    heads_key = arch_key(k.Attention.HEAD_COUNT, arch)
    if isinstance(header.values.get(heads_key), list):
        return None  # per-layer head counts: the head size must come from key_length
    heads = int_value(header, heads_key, low=1)
    width = int_value(header, arch_key(k.LLM.EMBEDDING_LENGTH, arch), low=1)
    if heads is None or width is None:
        return None
    if width % heads:
        message = (
            f"model {str(header.path)!r}: GGUF key {arch_key(k.LLM.EMBEDDING_LENGTH, arch)!r} = {width} is not a "
            f"multiple of {heads_key!r} = {heads}"
        )
        raise InvalidArgument("model", str(header.path), message=message)
    if width // heads > MAX_HEAD_DIM:
        message = (
            f"model {str(header.path)!r}: GGUF keys {arch_key(k.LLM.EMBEDDING_LENGTH, arch)!r} = {width} and "
            f"{heads_key!r} = {heads} give a head size of {width // heads:,}, above {MAX_HEAD_DIM:,}"
        )
        raise InvalidArgument("model", str(header.path), message=message)
    return width // heads


def _file_rope(header: GGUFHeader) -> FileRope:
    k = keys()
    arch = architecture_of(header)
    rope_key = {name: arch_key(value, arch) for name, value in vars(k.Rope).items() if name.isupper()}
    rope_key["SCALE_LINEAR"] = arch_key(LOCAL_KEYS["rope.scale_linear"], arch)
    context = context_length_of(header, arch_key(k.LLM.CONTEXT_LENGTH, arch), 0)
    n_rot = int_value(header, rope_key["DIMENSION_COUNT"], low=2, high=MAX_HEAD_DIM)
    n_rot = head_dim_of(header, arch) if n_rot is None else n_rot
    if not n_rot or n_rot % 2:
        shown = "absent (and no head size)" if not n_rot else f"= {n_rot}"
        message = (
            f"model {str(header.path)!r}: GGUF key {rope_key['DIMENSION_COUNT']!r} {shown}: the rotary dims must "
            "be an even number >= 2"
        )
        raise InvalidArgument("model", str(header.path), message=message)
    kind = text_value(header, rope_key["SCALING_TYPE"], "linear")  # llama.cpp's default when the key is absent
    factor = _factor(header, rope_key["SCALING_FACTOR"]) or _factor(header, rope_key["SCALE_LINEAR"])
    unmodelled = [name for name in _UNMODELLED_TENSORS if header.tensor(name) is not None]
    if float_value(header, rope_key["SCALING_YARN_LOG_MUL"], 0.0, positive=False) != 0.0:
        unmodelled.append(rope_key["SCALING_YARN_LOG_MUL"])
    if kind not in _MODELLED_TYPES:
        unmodelled.append(f"{rope_key['SCALING_TYPE']} = {kind}")
    betas = (32.0, 1.0)
    if arch in _READS_BETAS:
        betas = (
            float_value(header, rope_key["SCALING_YARN_BETA_FAST"], 32.0),
            float_value(header, rope_key["SCALING_YARN_BETA_SLOW"], 1.0),
        )
    original = context_length_of(header, rope_key["SCALING_ORIG_CTX_LEN"], 0)
    rope = LlamaCppRope(
        n_rot=n_rot,
        freq_base=float_value(header, rope_key["FREQ_BASE"], 10000.0),
        scaling_type=kind if kind in _MODELLED_TYPES else "none",
        factor=1.0 if kind == "none" or factor == 0.0 else factor,
        original_context_length=original or context or None,
        attn_factor=float_value(header, rope_key["SCALING_ATTN_FACTOR"], 1.0),
        freq_factors=_freq_factors(header, n_rot),
        beta_fast=betas[0],
        beta_slow=betas[1],
    )
    window = header.values.get(arch_key(k.Attention.SLIDING_WINDOW, arch))
    if isinstance(window, list):  # per-layer windows
        sliding = any(type(w) is int and w > 0 for w in window)
    else:
        sliding = (int_value(header, arch_key(k.Attention.SLIDING_WINDOW, arch), 0, high=MAX_LENGTH) or 0) > 0
    return FileRope(arch, rope, context, sliding, tuple(unmodelled))


def _factor(header: GGUFHeader, key: str) -> float:
    """A scaling factor s (0: not set, as llama.cpp reads it); a negative one is refused, not read as 1."""
    return float_value(header, key, 0.0, zero=True)


def _freq_factors(header: GGUFHeader, n_rot: int) -> tuple[float, ...] | None:
    """The ``rope_freqs`` tensor: ``n_rot / 2`` float32 divisors, finite and > 0 (``None`` without the tensor)."""
    info = header.tensor(ROPE_FREQS)
    if info is None:
        return None
    if info.ggml_type != _F32 or info.shape != (n_rot // 2,):
        message = (
            f"model {str(header.path)!r}: tensor {ROPE_FREQS!r} has shape {list(info.shape)} and ggml type "
            f"{info.ggml_type}; llama.cpp needs F32 ({_F32}) of shape [{n_rot // 2}] (rotary dims / 2)"
        )
        raise InvalidArgument("model", str(header.path), message=message)
    values = np.fromfile(header.path, dtype="<f4", count=n_rot // 2, offset=header.data_start + info.offset)
    if not (np.isfinite(values).all() and (values > 0).all()):
        message = f"model {str(header.path)!r}: tensor {ROPE_FREQS!r} holds a value that is not finite and > 0"
        raise InvalidArgument("model", str(header.path), message=message)
    return tuple(float(x) for x in values.astype(np.float64))


def _is_plain(rope: LlamaCppRope) -> bool:
    scaled = rope.scaling_type != "none" and rope.factor != 1.0
    return not scaled and rope.freq_factors is None and rope.attn_factor == 1.0


def gguf_rope_parameters(path: str | Path, *, reader: GGUFHeader | None = None) -> dict[str, Any] | None:
    """transformers ``rope_parameters`` computing what llama.cpp computes for the GGUF file ``path`` (read from
    ``reader`` where given, as :func:`read_file_rope`).

    ``None`` for plain RoPE (what transformers' loader already gives). Otherwise :func:`file_rope_config`'s form.

    Raises:
        ValueError: the file's RoPE uses inputs ropekit does not model, or is not a readable GGUF file.
    """
    from ropekit.hf_format import to_hf_dict

    file = read_file_rope(path, reader=reader)
    if _is_plain(file.rope) and not file.unmodelled:
        return None
    return to_hf_dict(file_rope_config(file, path))


def file_rope_config(file: FileRope, path: str | Path, head_dim: int | None = None) -> Any:
    """The :class:`~ropekit.config.RopeConfig` computing what llama.cpp computes for ``file`` (the GGUF file
    ``path``'s :func:`read_file_rope`), whatever its architecture: llama.cpp reads ``{arch}.rope.*`` the same way for
    every one. Linear and YaRN without per-pair factors are themselves; anything else (``rope_freqs``, an extra
    attention factor on linear) ``longrope`` with one factor list θ_i/θ'_i and an explicit attention factor, which
    means the same at every length. ``head_dim``: the head size, when more dims than the rotary ones pass through.

    Raises:
        ValueError: the file's RoPE uses inputs ropekit does not model.
    """
    from ropekit.config import RopeConfig
    from ropekit.scaling import LinearScaling, LongRopeScaling, YarnScaling

    if file.unmodelled:
        raise ValueError(
            f"{Path(path).name}: llama.cpp's RoPE for this file uses {', '.join(file.unmodelled)}, which ropekit does "
            "not model; refusing to evaluate a different model"
        )
    rope = file.rope
    head = max(head_dim or rope.n_rot, rope.n_rot)
    if _is_plain(rope):
        return RopeConfig(head, base=rope.freq_base, rotary_dim=rope.n_rot)
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
    return RopeConfig(head, base=rope.freq_base, rotary_dim=rope.n_rot, scaling=spec)


def gguf_model_rope(path: str | Path) -> tuple[Any, int]:
    """``(RopeConfig, original length)`` of the GGUF file ``path`` from its header alone, for any architecture: the
    RoPE llama.cpp runs (:func:`file_rope_config`) and the length its scaling is relative to
    (``rope.scaling.original_context_length``, else ``context_length``). What ``extend`` rewrites in a GGUF file needs
    nothing else, so it needs no transformers support for the architecture.

    Raises:
        ValueError: not a readable GGUF file, a RoPE key out of range, RoPE inputs ropekit does not model, or no
            context length (each an :class:`~ropekit.errors.InvalidArgument` about ``model`` naming the key).
    """
    header = open_gguf(path)
    file = read_file_rope(path, reader=header)
    original = file.rope.original_context_length
    if not original:
        key = arch_key(keys().LLM.CONTEXT_LENGTH, file.architecture)
        message = f"model {str(path)!r}: GGUF key {key!r} is absent or 0: the file says no length to extend from"
        raise InvalidArgument("model", str(path), message=message)
    try:
        rope = file_rope_config(file, path, head_dim_of(header, file.architecture))
    except ValueError as error:
        raise InvalidArgument("model", str(path), message=f"model {str(path)!r}: {error}") from None
    return rope, int(original)


def unrecorded_original_length(path: str | Path, *, reader: GGUFHeader | None = None) -> str | None:
    """Why the GGUF file ``path`` does not say its pre-training length, or ``None`` when it does.

    A file whose RoPE is already scaled by per-pair factors (the ``rope_freqs`` tensor: llama.cpp's converter bakes
    Llama 3's scaling into it, Llama 3.1 and Apertus among them) without ``rope.scaling.original_context_length``
    has lost the length that scaling was relative to (the converter writes no key for Llama 3's
    ``original_max_position_embeddings``); its ``context_length`` is the extended length. A method relative to an
    original length (YaRN's correction range) read from it would be relative to another length than the same
    model's transformers folder says.

    Raises:
        ValueError: as :func:`read_file_rope`.
    """
    header = open_gguf(path) if reader is None else reader
    file = read_file_rope(path, reader=header)
    key = arch_key(keys().Rope.SCALING_ORIG_CTX_LEN, file.architecture)
    if file.rope.freq_factors is None or context_length_of(header, key, 0):
        return None
    return (
        f"{Path(path).name}'s RoPE is scaled by its {ROPE_FREQS!r} tensor (as llama.cpp's converter writes Llama 3's "
        f"scaling) and the file has no {key!r}, so its pre-training length is unknown (its context_length is the "
        "extended one)"
    )


def apply_gguf_rope(config: Any, path: str | Path, *, reader: GGUFHeader | None = None) -> Any:
    """Give a transformers config loaded from the GGUF file ``path`` the RoPE llama.cpp runs (in place; returned).

    Works on a ``PretrainedConfig`` or a plain ``config.json`` dict; a plain-RoPE file leaves it unchanged. ``reader``:
    the file's :func:`open_gguf`, where the caller has read it already.

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
