"""Tiny GGUF files written byte by byte (the format's layout, not gguf-py's writer), so a test can state any count.

A value is ``(type, payload)``: the GGUF value type number and its encoded bytes; :func:`u32`, :func:`f32`,
:func:`text` and :func:`array` build the usual ones, and :func:`raw_array` an array whose stated length is anything.
"""

from __future__ import annotations

import struct
from pathlib import Path

#: GGUF value types (GGUFValueType)
UINT8, UINT32, FLOAT32, STRING, ARRAY = 0, 4, 6, 8, 9
#: ggml's F32 tensor type
F32 = 0


def _string(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def u32(value: int) -> tuple[int, bytes]:
    return UINT32, struct.pack("<I", value)


def f32(value: float) -> tuple[int, bytes]:
    return FLOAT32, struct.pack("<f", value)


def text(value: str | bytes) -> tuple[int, bytes]:
    return STRING, _string(value.encode() if isinstance(value, str) else value)


def array(values: list[float]) -> tuple[int, bytes]:
    """An array of float32."""
    return ARRAY, struct.pack("<IQ", FLOAT32, len(values)) + b"".join(struct.pack("<f", v) for v in values)


def raw_array(item_type: int, count: int, items: bytes = b"") -> tuple[int, bytes]:
    """An array that states ``count`` items of ``item_type`` and holds ``items`` (which may be fewer)."""
    return ARRAY, struct.pack("<IQ", item_type, count) + items


def llama_keys(**overrides: tuple[int, bytes] | None) -> dict[str, tuple[int, bytes]]:
    """A small Llama header: 2 heads of 64 dims, 2 layers, base 10000, context 512 (an override of ``None`` drops
    the key; keys are given without the ``llama.`` prefix, except ``general.*``)."""
    keys = {
        "general.architecture": text("llama"),
        "general.name": text("tiny"),
        "context_length": u32(512),
        "embedding_length": u32(128),
        "block_count": u32(2),
        "feed_forward_length": u32(256),
        "attention.head_count": u32(2),
        "attention.head_count_kv": u32(1),
        "rope.dimension_count": u32(64),
        "rope.freq_base": f32(10000.0),
    }
    for name, value in overrides.items():
        name = name.replace("__", ".")
        if value is None:
            keys.pop(name, None)
        else:
            keys[name] = value
    return {(k if k.startswith(("general.", "tokenizer.")) else f"llama.{k}"): v for k, v in keys.items()}


def gguf_bytes(
    keys: dict[str | bytes, tuple[int, bytes]],
    tensors: dict[str, tuple[tuple[int, ...], bytes]] | None = None,
    *,
    tensor_count: int | None = None,
) -> bytes:
    """A GGUF v3 file: ``keys`` (name → value) and F32 ``tensors`` (name → (shape in ggml order, data)), the data
    aligned to 32 bytes; ``tensor_count`` states another count than the tensors given."""
    tensors = tensors or {}
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors) if tensor_count is None else tensor_count, len(keys))
    for name, (kind, payload) in keys.items():
        out += _string(name.encode() if isinstance(name, str) else name) + struct.pack("<I", kind) + payload
    offset, data = 0, b""
    for name, (shape, content) in tensors.items():
        out += _string(name.encode()) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        out += struct.pack("<IQ", F32, offset)
        padded = content + b"\0" * (-len(content) % 32)
        data += padded
        offset += len(padded)
    out += b"\0" * (-len(out) % 32)
    return out + data


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path
