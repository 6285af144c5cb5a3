"""GGUF files (llama.cpp's format) as transformers models, dequantised (optional ``gguf`` extra; imported lazily).

transformers reads a GGUF file's metadata as a config and dequantises its tensors into an ordinary
``*ForCausalLM`` (``from_pretrained(folder, gguf_file=name)``); its tokenizer comes from the same file. This
module says how to ask for that and what the file holds (its quantisation), for the report.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any


def gguf_options(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """``(folder, {"gguf_file": name})``: the ``from_pretrained`` arguments that load ``path``."""
    path = Path(path)
    return path.parent, {"gguf_file": path.name}


def gguf_info(path: str | Path) -> dict[str, Any]:
    """What a GGUF file holds: its name, size, architecture, quantisation and tensor types.

    ``quantisation`` is the file type llama.cpp records (``general.file_type``, e.g. ``MOSTLY_Q4_1``: most
    tensors in Q4_1); ``tensor_types`` counts tensors per storage type (e.g. ``{"Q4_1": 210, "F32": 61}``).

    Raises:
        ValueError: the ``gguf`` package is missing, or the file is not a GGUF file.
    """
    try:
        import gguf
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    path = Path(path)
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError) as error:
        raise ValueError(f"{str(path)!r} is not a readable GGUF file: {error}") from error

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
