"""A GGUF file's header (metadata and tensor table), read with every size bounded by the file before it is used.

The reader walks the key/value section and the tensor table from a memory map: each count and length is checked
against the bytes left in the file (and against the format's own limits) before anything is allocated or looped
over, so a damaged or hostile file costs at most one pass over its own bytes and is refused in one line naming the
key. Large arrays (the vocabulary: ``tokenizer.ggml.tokens``, ``merges``, ``scores``) are skipped, not decoded: the
RoPE and architecture keys of a 50k-token model are read in milliseconds. Every other reader in ropekit (gguf-py's
``GGUFReader`` for a copy, transformers for a model) runs only on a file this reader has accepted, so its work is
bounded by the same checks.

The layout (GGUF v2/v3, little-endian): ``GGUF``, version (u32), tensor count (u64), key/value count (u64); per
key a string (u64 length + UTF-8), a value type (u32) and the value (an array is item type u32, count u64, items);
per tensor a name, its dimension count (u32), dimensions (u64 each), its ggml type (u32) and data offset (u64); the
tensor data from the next multiple of ``general.alignment``.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ropekit.errors import InvalidArgument, MissingFile

#: the first four bytes of every GGUF file, and the format versions this reader (and gguf-py's) understands
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
#: arrays longer than this are skipped (their type and length kept), not decoded: a vocabulary is never needed here
MAX_DECODED_ITEMS = 1024
#: the format's limits: a key's length (gguf spec), ggml's GGML_MAX_DIMS, and how deep arrays of arrays may nest
MAX_KEY_BYTES = 65535
MAX_DIMS = 4
MAX_NESTING = 4
#: struct formats of the scalar value types (GGUFValueType: UINT8 … FLOAT64, STRING = 8, ARRAY = 9)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: the fewest bytes one item of each type takes (a string: its length; an array: its item type and count)
_MIN_BYTES = {**{kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}


@dataclass(frozen=True)
class SkippedArray:
    """An array left undecoded (longer than :data:`MAX_DECODED_ITEMS`): its item type and length."""

    item_type: int
    count: int


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table: ``shape`` in GGUF order (ggml's ``ne``, fastest dimension first)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file declares, read by :func:`read_header`.

    Attributes:
        path: the file.
        size: its length in bytes.
        version: the GGUF format version.
        values: key → value (int, float, bool, str, list, or :class:`SkippedArray`), in file order.
        types: key → its GGUF value type (an array: ``9``).
        tensors: the tensor table, in file order.
        data_start: where tensor data begins (tensor offsets count from here).
        spans: key → the byte range ``(start, end)`` its key/value pair takes in the file (a skipped array's
            content included), so a caller can hash a field's raw bytes without decoding it.
    """

    path: Path
    size: int
    version: int
    values: dict[str, Any] = field(repr=False)
    types: dict[str, int] = field(repr=False)
    tensors: tuple[TensorInfo, ...] = field(repr=False)
    data_start: int = 0
    spans: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)

    def tensor(self, name: str) -> TensorInfo | None:
        """The tensor called ``name``, or ``None``."""
        return next((info for info in self.tensors if info.name == name), None)


class _Damaged(Exception):
    """A header that does not parse; the message says where (turned into an InvalidArgument by read_header)."""


def read_header(path: str | Path, option: str = "model") -> GGUFHeader:
    """The header of the GGUF file ``path``, every size checked against the file before use.

    Args:
        path: the ``.gguf`` file.
        option: the argument it came from, which the errors name and carry.

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``option``) no such file.
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``option``) empty, not a GGUF file, an unknown
            version, a key that is not UTF-8, a count or length larger than the file, tensor data beyond its end
            (each says which key or tensor and its value); or the ``gguf`` package is missing.
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
        sizes = _quant_sizes()
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return _parse(_Cursor(view), path, size, version, sizes)
        except _Damaged as error:
            message = f"{where} is truncated or damaged ({size:,} bytes): {error}"
            raise InvalidArgument(option, str(path), message=message) from None


def _quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type → (elements per block, bytes per block), from gguf-py's table."""
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    return {int(kind): (int(block), int(nbytes)) for kind, (block, nbytes) in GGML_QUANT_SIZES.items()}


class _Cursor:
    """Reads little-endian values from a memory map, refusing any read past its end."""

    def __init__(self, view: mmap.mmap) -> None:
        self.view, self.pos, self.end = view, 0, len(view)

    def left(self) -> int:
        return self.end - self.pos

    def take(self, count: int, what: str) -> bytes:
        if count > self.left():
            raise _Damaged(f"{what} needs {count:,} bytes at offset {self.pos:,}, the file has {self.left():,} left")
        data = self.view[self.pos : self.pos + count]
        self.pos += count
        return data

    def skip(self, count: int, what: str) -> None:
        if count > self.left():
            raise _Damaged(f"{what} needs {count:,} bytes at offset {self.pos:,}, the file has {self.left():,} left")
        self.pos += count

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, what: str, item_bytes: int) -> int:
        """A u64 count of items of at least ``item_bytes`` each, refused when they cannot fit in the bytes left."""
        number = self.unpack("<Q", what)
        if number * item_bytes > self.left():
            raise _Damaged(
                f"{what} is {number:,}, which needs at least {number * item_bytes:,} bytes; the file has "
                f"{self.left():,} left"
            )
        return number

    def text(self, what: str, limit: int | None = None) -> bytes:
        length = self.count(f"{what}'s length", 1)
        if limit is not None and length > limit:
            raise _Damaged(f"{what}'s length is {length:,} bytes, above the format's limit of {limit:,}")
        return self.take(length, what)


def _parse(cursor: _Cursor, path: Path, size: int, version: int, sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    cursor.pos = 8
    tensor_count = cursor.count("the tensor count", 24)  # a tensor entry takes at least 24 bytes
    kv_count = cursor.count("the key/value count", 13)  # a key/value pair takes at least 13 bytes
    values: dict[str, Any] = {}
    types: dict[str, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    for index in range(kv_count):
        start = cursor.pos
        raw = cursor.text(f"key {index}", MAX_KEY_BYTES)
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Damaged(f"key {index} ({bytes(raw[:60])!r}) is not UTF-8") from None
        kind = cursor.unpack("<I", f"the type of key {key!r}")
        types[key] = kind
        values[key] = _value(cursor, kind, key, 0)
        spans[key] = (start, cursor.pos)
    tensors = tuple(_tensor(cursor, index, sizes) for index in range(tensor_count))
    alignment = values.get("general.alignment", 32)
    if type(alignment) is not int or alignment <= 0 or alignment % 8:
        raise _Damaged(f"key 'general.alignment' = {alignment!r}: must be a positive multiple of 8")
    data_start = -(-cursor.pos // alignment) * alignment
    for info in tensors:
        if data_start + info.offset + info.nbytes > size:
            raise _Damaged(f"tensor {info.name!r} needs the bytes up to {data_start + info.offset + info.nbytes:,}")
    return GGUFHeader(path, size, version, values, types, tensors, data_start, spans)


def _value(cursor: _Cursor, kind: int, key: str, depth: int) -> Any:
    if kind in _SCALARS:
        return cursor.unpack(_SCALARS[kind], f"key {key!r}")
    if kind == _STRING:
        raw = cursor.text(f"key {key!r}")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Damaged(f"key {key!r} = {bytes(raw[:60])!r} is not UTF-8") from None
    if kind != _ARRAY:
        raise _Damaged(f"key {key!r} has value type {kind}, which GGUF does not define")
    if depth >= MAX_NESTING:
        raise _Damaged(f"key {key!r} nests arrays more than {MAX_NESTING} deep")
    item = cursor.unpack("<I", f"the item type of key {key!r}")
    if item not in _MIN_BYTES:
        raise _Damaged(f"key {key!r} is an array of value type {item}, which GGUF does not define")
    count = cursor.count(f"the length of array {key!r}", _MIN_BYTES[item])
    if count <= MAX_DECODED_ITEMS:
        return [_value(cursor, item, key, depth + 1) for _ in range(count)]
    if item in _SCALARS:
        cursor.skip(count * _MIN_BYTES[item], f"array {key!r}")
    else:  # strings and arrays have lengths of their own: walk them (bounded: each takes >= 8 bytes)
        for _ in range(count):
            _skip(cursor, item, key, depth + 1)
    return SkippedArray(item, count)


def _skip(cursor: _Cursor, kind: int, key: str, depth: int) -> None:
    if kind == _STRING:
        length = cursor.count(f"a string in array {key!r}", 1)
        cursor.skip(length, f"a string in array {key!r}")
    elif kind == _ARRAY:
        _value(cursor, kind, key, depth)
    else:
        cursor.skip(_MIN_BYTES[kind], f"array {key!r}")


def _tensor(cursor: _Cursor, index: int, sizes: dict[int, tuple[int, int]]) -> TensorInfo:
    raw = cursor.text(f"the name of tensor {index}", MAX_KEY_BYTES)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged(f"the name of tensor {index} ({bytes(raw[:60])!r}) is not UTF-8") from None
    dims = cursor.unpack("<I", f"the dimension count of tensor {name!r}")
    if not 1 <= dims <= MAX_DIMS:
        raise _Damaged(f"tensor {name!r} has {dims} dimensions (ggml allows 1 to {MAX_DIMS})")
    shape = tuple(cursor.unpack("<Q", f"the shape of tensor {name!r}") for _ in range(dims))
    ggml_type = cursor.unpack("<I", f"the type of tensor {name!r}")
    offset = cursor.unpack("<Q", f"the offset of tensor {name!r}")
    if ggml_type not in sizes:
        raise _Damaged(f"tensor {name!r} has ggml type {ggml_type}, which gguf-py does not know")
    block, block_bytes = sizes[ggml_type]
    if shape[0] % block:
        raise _Damaged(f"tensor {name!r}: its first dimension {shape[0]} is not a multiple of its block size {block}")
    elements = 1
    for dim in shape:
        elements *= dim
    return TensorInfo(name, shape, ggml_type, offset, elements // block * block_bytes)
