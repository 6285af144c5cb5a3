"""Whether a file is a whole GGUF file (llama.cpp's format), and what it holds.

:func:`check_gguf` runs before anything else reads a ``.gguf`` file (ropekit, gguf-py or transformers): it reads the
header with every size bounded by the file (:mod:`~ropekit.integrations.gguf.header`), so a download cut short or a
hostile file is refused in one line, not deep inside another reader. :func:`gguf_info` says what the file holds (its
quantisation), for the report; the loading arguments are :func:`ropekit.integrations.hf.load.source_of`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ropekit.integrations.gguf.header import GGUFHeader, read_header


def check_gguf(path: str | Path, option: str = "model") -> GGUFHeader:
    """The header of ``path`` if it is a whole GGUF file: the magic, a known version, a header whose every count
    fits in the file, and tensor data that fits in the file (a download cut short fails here).

    Args:
        path: the ``.gguf`` file.
        option: the argument it came from, which the errors name and carry.

    Returns:
        The file's :class:`~ropekit.integrations.gguf.header.GGUFHeader` (its metadata and tensor table, read once).

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``option``) no such file.
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``option``) empty, not a GGUF file, an unknown
            version, or truncated/damaged (says which key or tensor); or the ``gguf`` package is missing.
    """
    return read_header(path, option)


def gguf_info(path: str | Path, *, reader: GGUFHeader | None = None) -> dict[str, Any]:
    """What a GGUF file holds: its name, size, architecture, quantisation and tensor types.

    ``quantisation`` is the file type llama.cpp records (``general.file_type``, e.g. ``MOSTLY_Q4_1``: most
    tensors in Q4_1); ``tensor_types`` counts tensors per storage type (e.g. ``{"Q4_1": 210, "F32": 61}``).
    ``reader``: :func:`check_gguf`'s result where the caller has checked the file already (else checked here).

    Raises:
        ValueError: the ``gguf`` package is missing, or the file is not a GGUF file.
    """
    from gguf.constants import GGMLQuantizationType, Keys, LlamaFileType

    path = Path(path)
    header = check_gguf(path) if reader is None else reader
    file_type = header.values.get(Keys.General.FILE_TYPE)
    try:
        quantisation = LlamaFileType(int(file_type)).name if file_type is not None else None
    except (ValueError, TypeError):
        quantisation = f"file_type {file_type}"
    tensor_types = Counter(GGMLQuantizationType(tensor.ggml_type).name for tensor in header.tensors)
    return {
        "file": path.name,
        "bytes": header.size,
        "architecture": header.values.get(Keys.General.ARCHITECTURE),
        "quantisation": quantisation,
        "tensor_types": dict(tensor_types.most_common()),
    }
