"""Typed reads of a GGUF header's keys: a value of the wrong type or out of range is a one-line error naming the key.

Key names are gguf-py's (``gguf.constants.Keys``, formatted with the architecture: :func:`arch_key`), imported inside
the functions (``gguf`` is optional); :data:`LOCAL_KEYS` holds the one llama.cpp reads that gguf-py does not name.
"""

from __future__ import annotations

import math
from typing import Any

from ropekit._costs import MAX_LENGTH as LONGEST_LENGTH
from ropekit.errors import InvalidArgument
from ropekit.integrations.gguf.header import GGUFHeader, SkippedArray, SkippedString

#: keys llama.cpp reads that gguf-py's ``Keys`` lacks (``LLM_KV_ROPE_SCALE_LINEAR`` in llama.cpp's ``llama-arch.cpp``)
LOCAL_KEYS = {"rope.scale_linear": "{arch}.rope.scale_linear"}
#: the largest count any size key may hold here (rotary dims, heads, layers): far above any model, far below a size
#: that would exhaust memory when something is allocated per unit
MAX_COUNT = 1 << 20
#: the largest head size or rotary dim a key may hold (models use 64…256; MLA heads 576)
MAX_HEAD_DIM = 4096
#: the largest length (a window, a size) a key may hold: llama.cpp stores it as uint32
MAX_LENGTH = (1 << 32) - 1
#: the longest context a file may declare (``context_length``, ``rope.scaling.original_context_length``): ropekit's
#: longest length (2^30 tokens), far above any model's and far below the uint32 values a damaged file holds
MAX_CONTEXT_LENGTH = LONGEST_LENGTH


def keys() -> Any:
    """gguf-py's ``Keys`` (its ``General``, ``LLM``, ``Attention`` and ``Rope`` key names)."""
    try:
        from gguf.constants import Keys
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    return Keys


def arch_key(template: str, arch: str) -> str:
    """A per-architecture key (``Keys.Rope.FREQ_BASE`` → ``llama.rope.freq_base``)."""
    return template.format(arch=arch)


def _refuse(header: GGUFHeader, key: str, value: Any, allowed: str) -> InvalidArgument:
    if isinstance(value, SkippedArray):
        shown = f"an array of {value.count:,} items"
    elif isinstance(value, SkippedString):
        shown = f"a string of {value.length:,} bytes (not decoded: beyond the header's budget)"
    else:
        shown = repr(value)
    if len(shown) > 80 and not isinstance(value, SkippedString):
        shown = shown[:77] + "..."
    message = f"model {str(header.path)!r}: GGUF key {key!r} = {shown}: {allowed}"
    return InvalidArgument("model", str(header.path), message=message)


def text_value(header: GGUFHeader, key: str, default: str | None = None) -> str | None:
    """The string at ``key`` (``default`` when absent).

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) the value is not a string.
    """
    value = header.values.get(key, default)
    if value is not None and not isinstance(value, str):
        raise _refuse(header, key, value, "must be a string")
    return value


def int_value(
    header: GGUFHeader, key: str, default: int | None = None, *, low: int = 0, high: int = MAX_COUNT
) -> int | None:
    """The integer at ``key`` (``default`` when absent), in ``low``…``high``.

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) not one integer, or out of range.
    """
    value = header.values.get(key)
    if value is None:
        return default
    if type(value) is not int or not low <= value <= high:
        raise _refuse(header, key, value, f"must be one integer from {low:,} to {high:,}")
    return value


def float_value(
    header: GGUFHeader, key: str, default: float | None = None, *, positive: bool = True, zero: bool = False
) -> float | None:
    """The number at ``key`` as a float (``default`` when absent): finite, and > 0 where ``positive`` (0 allowed
    too where ``zero``, llama.cpp's "not set").

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) not one finite number, or not in
            range.
    """
    value = header.values.get(key)
    if value is None:
        return default
    number = float(value) if type(value) in (int, float) else math.nan
    in_range = number > 0 or (zero and number == 0) or not positive
    if not math.isfinite(number) or not in_range:
        rule = "must be one finite number" + (" > 0" if positive else "") + (" (or 0: not set)" if zero else "")
        raise _refuse(header, key, value, rule)
    return number


def context_length_of(header: GGUFHeader, key: str, default: int | None = None) -> int | None:
    """A context length the file declares at ``key`` (``{arch}.context_length`` or
    ``{arch}.rope.scaling.original_context_length``; ``default`` when absent), at most :data:`MAX_CONTEXT_LENGTH`:
    the one reading both the RoPE and the config take, so a refusal names the file's key, never a flag.

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) not one integer, or longer than
            any context ropekit handles.
    """
    value = header.values.get(key)
    if value is None:
        return default
    if type(value) is int and value > MAX_CONTEXT_LENGTH:
        raise _refuse(
            header,
            key,
            value,
            f"a context longer than {MAX_CONTEXT_LENGTH:,} tokens (ropekit's longest length) is not a model's; the "
            "file is damaged or hostile",
        )
    return int_value(header, key, default, high=MAX_CONTEXT_LENGTH)
