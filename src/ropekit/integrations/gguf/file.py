"""GGUF files (llama.cpp's format) as transformers models, dequantised (optional ``gguf`` extra; imported lazily).

transformers reads a GGUF file's metadata as a config and dequantises its tensors into an ordinary
``*ForCausalLM`` (``from_pretrained(folder, gguf_file=name)``); its tokenizer comes from the same file. This
module checks that a file is a whole GGUF file before anything reads it (:func:`check_gguf`) and says what the file
holds (its quantisation), for the report; the loading arguments are :func:`ropekit.integrations.hf.load.source_of`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ropekit.errors import InvalidArgument, MissingFile

#: the first four bytes of every GGUF file, and the format versions the ``gguf`` reader understands
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)


def check_gguf(path: str | Path, option: str = "model") -> Any:
    """``path`` if it is a whole GGUF file: the magic, a known version, a header that parses, and tensor data that
    fits in the file (a download cut short fails here, not deep inside transformers).

    Args:
        path: the ``.gguf`` file.
        option: the argument it came from, which the errors name and carry.

    Returns:
        The file's ``gguf.GGUFReader`` (its metadata and tensor table, read once).

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``option``) no such file.
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``option``) empty, not a GGUF file, an unknown
            version, or truncated/damaged (says which); or the ``gguf`` package is missing.
    """
    path = Path(path)
    where = f"{option} {str(path)!r}"
    if not path.is_file():
        raise MissingFile(option, str(path), message=f"{where}: no such GGUF file")
    size = path.stat().st_size
    if size == 0:
        raise InvalidArgument(option, str(path), message=f"{where} is empty (0 bytes), not a GGUF file")
    with path.open("rb") as handle:
        head = handle.read(8)
    if head[:4] != GGUF_MAGIC:
        message = f"{where} is not a GGUF file (it starts with {head[:4]!r}, a GGUF file with {GGUF_MAGIC!r})"
        raise InvalidArgument(option, str(path), message=message)
    version = int.from_bytes(head[4:8], "little") if len(head) == 8 else None
    if version not in GGUF_VERSIONS:
        message = f"{where}: GGUF version {version} is not supported (known: {list(GGUF_VERSIONS)})"
        raise InvalidArgument(option, str(path), message=message)
    try:
        import gguf
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError, OverflowError) as error:
        message = (
            f"{where} is truncated or damaged ({size:,} bytes; its header or tensor table does not parse: {error})"
        )
        raise InvalidArgument(option, str(path), message=message) from None
    needed = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if needed > size:
        message = f"{where} is truncated: it holds {size:,} bytes, its tensors need {needed:,}"
        raise InvalidArgument(option, str(path), message=message)
    return reader


def gguf_info(path: str | Path, *, reader: Any = None) -> dict[str, Any]:
    """What a GGUF file holds: its name, size, architecture, quantisation and tensor types.

    ``quantisation`` is the file type llama.cpp records (``general.file_type``, e.g. ``MOSTLY_Q4_1``: most
    tensors in Q4_1); ``tensor_types`` counts tensors per storage type (e.g. ``{"Q4_1": 210, "F32": 61}``).
    ``reader``: :func:`check_gguf`'s result where the caller has checked the file already (else checked here).

    Raises:
        ValueError: the ``gguf`` package is missing, or the file is not a GGUF file.
    """
    try:
        import gguf
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    path = Path(path)
    reader = check_gguf(path) if reader is None else reader

    def field(key: str) -> Any:
        item = reader.fields.get(key)
        return None if item is None else item.contents()

    file_type = field("general.file_type")
    try:
        quantisation = gguf.LlamaFileType(int(file_type)).name if file_type is not None else None
    except ValueError:
        quantisation = f"file_type {file_type}"
    tensor_types = Counter(tensor.tensor_type.name for tensor in reader.tensors)
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "architecture": field("general.architecture"),
        "quantisation": quantisation,
        "tensor_types": dict(tensor_types.most_common()),
    }
