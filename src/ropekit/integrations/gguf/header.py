"""A GGUF file's header (metadata and tensor table), read with every size bounded by the file before it is used.

The reader walks the key/value section and the tensor table from a memory map: each count and length is checked
against the bytes left in the file (and against the format's own limits) before anything is allocated or looped
over, so a damaged or hostile file costs at most one pass over its own bytes and is refused in one line naming the
key. What is decoded into Python values is bounded by bytes, not by counts: an array is decoded only when it is
short (:data:`MAX_DECODED_ITEMS`), holds no arrays, and fits in what is left of one budget for the whole header
(:data:`MAX_DECODED_BYTES`, strings included); anything else (the vocabulary: ``tokenizer.ggml.tokens``, ``merges``,
``scores``; arrays of arrays, which no RoPE key is) is skipped by its lengths, kept as its type and length, and a
header with more keys, tensors or walked strings and arrays than any model has is refused
(:data:`MAX_KEYS`, :data:`MAX_TENSORS`, :data:`MAX_WALKED_ITEMS`). So a hostile file costs at most a few seconds and
a few tens of megabytes whatever its size, and the RoPE and architecture keys of a 50k-token model are read in
milliseconds. A key or tensor name given twice is refused, as llama.cpp refuses it. Every other reader in ropekit
(gguf-py's ``GGUFReader`` for a copy, transformers for a model) runs only on a file this reader has accepted, so its
work is bounded by the same checks.

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
#: the most bytes of the file decoded into Python values over the whole header (key and tensor names, strings, array
#: contents); a value beyond what is left is skipped, a name refused. The keys ropekit reads take under a kilobyte, a
#: chat template tens of kilobytes, the names of 50,000 tensors two megabytes
MAX_DECODED_BYTES = 1 << 24
#: the most strings and arrays held inside arrays that the reader walks to skip them (a vocabulary and its merges:
#: under a million each), so that skipping costs seconds at most
MAX_WALKED_ITEMS = 1 << 24
#: the most keys and tensors a header may declare: models carry tens of keys and thousands of tensors
MAX_KEYS = 1 << 16
MAX_TENSORS = 1 << 18
#: the format's limits: a key's length (gguf spec), ggml's GGML_MAX_DIMS, and how deep arrays of arrays may nest
MAX_KEY_BYTES = 65535
MAX_DIMS = 4
MAX_NESTING = 4
#: struct formats of the scalar value types (GGUFValueType: UINT8 … FLOAT64, STRING = 8, ARRAY = 9)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: the fewest bytes one item of each type takes (a string: its length; an array: its item type and count)
_MIN_BYTES = {**{kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_U64 = struct.Struct("<Q")
_ARRAY_HEAD = struct.Struct("<IQ")


@dataclass(frozen=True)
class SkippedArray:
    """An array left undecoded (longer than :data:`MAX_DECODED_ITEMS`, holding arrays, or beyond
    :data:`MAX_DECODED_BYTES`): its item type and length."""

    item_type: int
    count: int


@dataclass(frozen=True)
class SkippedString:
    """A string left undecoded (beyond what is left of :data:`MAX_DECODED_BYTES`): its length in bytes."""

    length: int


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
        values: key → value (int, float, bool, str, list, :class:`SkippedArray` or :class:`SkippedString`), in file
            order.
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
            raise InvalidArgument(option, str(path), message=_version_refusal(where, head[4:8]))
        sizes = _quant_sizes()
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return _parse(_Cursor(view), path, size, version, sizes)
        except _Damaged as error:
            message = f"{where} is truncated or damaged ({size:,} bytes): {error}"
            raise InvalidArgument(option, str(path), message=message) from None


def _version_refusal(where: str, raw: bytes) -> str:
    """Why the version bytes ``raw`` are refused: unknown, or a known version written big-endian (whose every number
    then reads byte-swapped here, as in llama.cpp on a little-endian machine)."""
    if len(raw) < 4:
        return f"{where}: the file ends inside the GGUF version ({len(raw)} of 4 bytes)"
    version, swapped = int.from_bytes(raw, "little"), int.from_bytes(raw, "big")
    if swapped in GGUF_VERSIONS:
        return (
            f"{where} is a big-endian GGUF file (version {swapped} byte-swapped), which is not supported: "
            "llama.cpp and ropekit read little-endian GGUF files (convert it with gguf-py's gguf_convert_endian.py)"
        )
    return f"{where}: GGUF version {version} is not supported (known: {list(GGUF_VERSIONS)})"


def _quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type → (elements per block, bytes per block), from gguf-py's table."""
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError as error:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'ropekit[hf]'") from error
    return {int(kind): (int(block), int(nbytes)) for kind, (block, nbytes) in GGML_QUANT_SIZES.items()}


class _Cursor:
    """Reads little-endian values from a memory map, refusing any read past its end; it keeps the header's budgets
    (:data:`MAX_DECODED_BYTES` left to decode, :data:`MAX_WALKED_ITEMS` left to walk)."""

    def __init__(self, view: mmap.mmap) -> None:
        self.view, self.pos, self.end = view, 0, len(view)
        self.decodable, self.walkable = MAX_DECODED_BYTES, MAX_WALKED_ITEMS

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

    def spend(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more may be decoded (and if so, count them against the budget)."""
        if nbytes > self.decodable:
            return False
        self.decodable -= nbytes
        return True

    def walk(self, count: int, key: str) -> None:
        """Count ``count`` strings or arrays walked for ``key`` against the budget, refusing past it."""
        self.walkable -= count
        if self.walkable < 0:
            raise _Damaged(
                f"array {key!r} takes the strings and arrays held in arrays past {MAX_WALKED_ITEMS:,} (a model's "
                "vocabulary and merges hold under a million each)"
            )


def _parse(cursor: _Cursor, path: Path, size: int, version: int, sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    cursor.pos = 8
    tensor_count = _bounded(cursor.count("the tensor count", 24), MAX_TENSORS, "the tensor count")  # >= 24 bytes each
    kv_count = _bounded(cursor.count("the key/value count", 13), MAX_KEYS, "the key/value count")  # >= 13 bytes each
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
        _spend_name(cursor, raw, f"key {index}")
        if key in values:
            raise _Damaged(
                f"key {key!r} is given twice (key {index} and an earlier one); llama.cpp refuses such a file"
            )
        kind = cursor.unpack("<I", f"the type of key {key!r}")
        types[key] = kind
        values[key] = _value(cursor, kind, key)
        spans[key] = (start, cursor.pos)
    tensors = tuple(_tensor(cursor, index, sizes) for index in range(tensor_count))
    names = set()
    for info in tensors:
        if info.name in names:
            raise _Damaged(f"tensor {info.name!r} is given twice; llama.cpp refuses such a file")
        names.add(info.name)
    alignment = values.get("general.alignment", 32)
    if type(alignment) is not int or alignment <= 0 or alignment % 8:
        raise _Damaged(f"key 'general.alignment' = {alignment!r}: must be a positive multiple of 8")
    data_start = -(-cursor.pos // alignment) * alignment
    for info in tensors:
        if data_start + info.offset + info.nbytes > size:
            raise _Damaged(f"tensor {info.name!r} needs the bytes up to {data_start + info.offset + info.nbytes:,}")
    return GGUFHeader(path, size, version, values, types, tensors, data_start, spans)


def _spend_name(cursor: _Cursor, raw: bytes, what: str) -> None:
    if not cursor.spend(len(raw)):
        raise _Damaged(f"the names up to {what} take more than {MAX_DECODED_BYTES:,} bytes (a model's: kilobytes)")


def _bounded(number: int, limit: int, what: str) -> int:
    if number > limit:
        raise _Damaged(f"{what} is {number:,}, above {limit:,} (more than any model's header holds)")
    return number


def _value(cursor: _Cursor, kind: int, key: str) -> Any:
    """The value of ``key`` (type ``kind``) at the cursor: decoded, or skipped (:class:`SkippedString`,
    :class:`SkippedArray`) where decoding it would pass a budget."""
    if kind in _SCALARS:
        return cursor.unpack(_SCALARS[kind], f"key {key!r}")
    if kind == _STRING:
        length = cursor.count(f"key {key!r}'s length", 1)
        if not cursor.spend(length):
            cursor.skip(length, f"key {key!r}")
            return SkippedString(length)
        return _utf8(cursor.take(length, f"key {key!r}"), key)
    if kind != _ARRAY:
        raise _Damaged(f"key {key!r} has value type {kind}, which GGUF does not define")
    item, count = _array_head(cursor, key)
    start = cursor.pos
    if item in _SCALARS:
        nbytes = count * _MIN_BYTES[item]
        cursor.skip(nbytes, f"array {key!r}")
        if count <= MAX_DECODED_ITEMS and cursor.spend(nbytes):
            return list(struct.unpack_from(f"<{count}{_SCALARS[item][1:]}", cursor.view, start))
        return SkippedArray(item, count)
    _walk(cursor, item, count, key, 1)
    if item == _STRING and count <= MAX_DECODED_ITEMS and cursor.spend(cursor.pos - start):
        end, cursor.pos = cursor.pos, start
        strings = [_utf8(cursor.text(f"a string in array {key!r}"), key) for _ in range(count)]
        cursor.pos = end
        return strings
    return SkippedArray(item, count)


def _utf8(raw: bytes, key: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged(f"key {key!r} = {bytes(raw[:60])!r} is not UTF-8") from None


def _array_head(cursor: _Cursor, key: str) -> tuple[int, int]:
    """An array's item type and length, the length bounded by the bytes left."""
    item = cursor.unpack("<I", f"the item type of key {key!r}")
    if item not in _MIN_BYTES:
        raise _Damaged(f"key {key!r} is an array of value type {item}, which GGUF does not define")
    return item, cursor.count(f"the length of array {key!r}", _MIN_BYTES[item])


def _walk(cursor: _Cursor, item: int, count: int, key: str, depth: int) -> None:
    """Move the cursor past ``count`` items of type ``item`` (strings or arrays) by their lengths, decoding nothing;
    every length is checked against the file's end, and every item counts against :data:`MAX_WALKED_ITEMS`."""
    if item == _ARRAY and depth >= MAX_NESTING:
        raise _Damaged(f"key {key!r} nests arrays more than {MAX_NESTING} deep")
    cursor.walk(count, key)
    if item == _STRING:
        view, end, pos = cursor.view, cursor.end, cursor.pos
        for _ in range(count):  # the hot loop of a vocabulary: one unpack per string
            if pos + 8 > end:
                break
            pos += 8 + _U64.unpack_from(view, pos)[0]
        else:
            if pos <= end:
                cursor.pos = pos
                return
        raise _Damaged(f"a string in array {key!r} runs past the end of the file (offset {min(pos, end):,})")
    for _ in range(count):
        inner, inner_count = _array_head(cursor, key)
        if inner in _SCALARS:
            cursor.skip(inner_count * _MIN_BYTES[inner], f"array {key!r}")
        else:
            _walk(cursor, inner, inner_count, key, depth + 1)


def _tensor(cursor: _Cursor, index: int, sizes: dict[int, tuple[int, int]]) -> TensorInfo:
    raw = cursor.text(f"the name of tensor {index}", MAX_KEY_BYTES)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged(f"the name of tensor {index} ({bytes(raw[:60])!r}) is not UTF-8") from None
    _spend_name(cursor, raw, f"tensor {name!r}")
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
