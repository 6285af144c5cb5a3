"""A model's fingerprint: one SHA-256 that changes when the model's config, tokenizer or weights change, read in
seconds whatever the model's size.

What is hashed, file by file (a folder's own files, sorted by name, hidden ones left out; a ``.gguf`` file alone):
the name and size, then

* a file up to :data:`WHOLE` bytes (``config.json``, tokenizer files, indexes): every byte;
* a ``.safetensors`` file: its header (every tensor's name, dtype, shape and offsets) and, for every tensor, its
  first and last :data:`SAMPLE` bytes, so any tensor a fine-tune changed changes the fingerprint;
* a ``.gguf`` file: its header (metadata and tensor table, :func:`ropekit.integrations.gguf.header.read_header`)
  and each tensor's first and last :data:`SAMPLE` bytes;
* any other file: its first :data:`WHOLE` bytes and :data:`SPREAD` evenly spaced pieces of :data:`SAMPLE` bytes.

Nothing in the folder is executed or imported; a file whose header does not parse is hashed as "any other file".
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fingerprint"]

#: files up to this size are hashed whole; others have this much of their start hashed
WHOLE = 1 << 20
#: bytes hashed at each end of every tensor (and in each piece of an unknown large file)
SAMPLE = 4096
#: evenly spaced pieces hashed from a large file of no known format
SPREAD = 64
#: a safetensors header longer than this is not read as one (the format's own limit is 100 MB)
MAX_HEADER = 100_000_000


def fingerprint(path: str | Path) -> str:
    """The SHA-256 (hex) of the model at ``path`` (a folder or a file), as the module docstring says.

    Raises:
        OSError: a file that cannot be read.
    """
    path = Path(path)
    digest = hashlib.sha256()
    own = [p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")] if path.is_dir() else [path]
    files = sorted(own)
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.name if path.is_dir() else ''}\0{size}\0".encode())
        with file.open("rb") as handle:
            for start, count in _regions(file, size):
                handle.seek(start)
                digest.update(handle.read(count))
    return digest.hexdigest()


def _regions(file: Path, size: int) -> list[tuple[int, int]]:
    """``(start, bytes)`` to hash in ``file``."""
    if size <= WHOLE:
        return [(0, size)]
    known = None
    if file.suffix == ".safetensors":
        known = _safetensors_regions(file, size)
    elif file.suffix == ".gguf":
        known = _gguf_regions(file)
    if known is not None:
        return known
    step = max(1, (size - SAMPLE) // SPREAD)
    return [(0, WHOLE), *((min(i * step, size - SAMPLE), SAMPLE) for i in range(SPREAD + 1))]


def _ends(start: int, count: int) -> Iterator[tuple[int, int]]:
    """The first and last :data:`SAMPLE` bytes of ``count`` bytes at ``start`` (all of them when few)."""
    if count <= 2 * SAMPLE:
        yield start, count
    else:
        yield start, SAMPLE
        yield start + count - SAMPLE, SAMPLE


def _safetensors_regions(file: Path, size: int) -> list[tuple[int, int]] | None:
    """The header and each tensor's ends; ``None`` when the header does not read as safetensors."""
    with file.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if not 0 < length <= min(MAX_HEADER, size - 8):
            return None
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, ValueError):
            return None
    regions = [(0, 8 + length)]
    if not isinstance(header, dict):
        return None
    for name in sorted(header):
        entry = header[name]
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if name == "__metadata__" or not (isinstance(offsets, list) and len(offsets) == 2):
            continue
        begin, end = offsets
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= size - 8 - length):
            return None
        regions.extend(_ends(8 + length + begin, end - begin))
    return regions


def _gguf_regions(file: Path) -> list[tuple[int, int]] | None:
    """The header and each tensor's ends; ``None`` when the header does not read."""
    from ropekit.integrations.gguf.header import read_header

    try:
        header = read_header(file)
    except (OSError, ValueError):
        return None
    regions = [(0, header.data_start)]
    for info in header.tensors:
        regions.extend(_ends(header.data_start + info.offset, info.nbytes))
    return regions
