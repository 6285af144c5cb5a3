"""Training text → token windows of the target length.

Documents are tokenized one at a time and joined the way the tokenizer marks document boundaries: its
beginning-of-sequence token when it adds one (``add_special_tokens=True``), and its end-of-sequence token after each
document when it has one and did not already add it. The joined stream is cut into non-overlapping windows of
exactly ``length`` tokens (the last partial window is dropped), so a window may span a boundary but never without
its separator. The tail of the stream is held out for the loss curve and the before/after evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

_TEXT_SUFFIXES = (".txt", ".md", ".jsonl", ".json")


def read_documents(path: str | Path) -> list[str]:
    """The documents of a UTF-8 text file (one document), a ``.jsonl`` file (a ``text`` field per line) or a folder
    of such files (sorted by name).

    Raises:
        FileNotFoundError: no such file or folder.
        ValueError: a file that is not UTF-8 text, a ``.jsonl`` line without a string ``text``, or no text at all.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--text {str(path)!r}: no such file or folder")
    files = (
        sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _TEXT_SUFFIXES) if path.is_dir() else [path]
    )
    documents: list[str] = []
    for file in files:
        documents += list(_documents_of(file))
    if not any(doc.strip() for doc in documents):
        raise ValueError(f"--text {str(path)!r} holds no text (UTF-8 .txt files or .jsonl with a 'text' field)")
    return [doc for doc in documents if doc]


def _documents_of(file: Path) -> Iterator[str]:
    try:
        content = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"--text {str(file)!r} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    if "\x00" in content:
        raise ValueError(f"--text {str(file)!r} looks binary (it contains NUL bytes)")
    if file.suffix != ".jsonl":
        yield content
        return
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"--text {str(file)!r} line {number} is not JSON: {error.msg}") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ValueError(f"--text {str(file)!r} line {number} has no string 'text' field")
        yield record["text"]


def tokenize_documents(tokenizer, documents: list[str]) -> torch.Tensor:
    """One 1-D int64 stream: each document with the tokenizer's own boundary tokens (see the module docstring)."""
    eos = tokenizer.eos_token_id
    pieces: list[int] = []
    for document in documents:
        ids = list(tokenizer(document, add_special_tokens=True)["input_ids"])
        if eos is not None and (not ids or ids[-1] != eos):
            ids.append(eos)
        pieces += ids
    return torch.tensor(pieces, dtype=torch.int64)


@dataclass(frozen=True)
class PackedText:
    """Training windows and held-out tokens.

    Attributes:
        windows: ``(n, length)`` int64 training windows.
        heldout: 1-D int64 held-out tokens (at least ``length + 1``, so one full window can be scored).
        tokens: tokens in the whole stream.
    """

    windows: torch.Tensor
    heldout: torch.Tensor
    tokens: int


def pack(stream: torch.Tensor, length: int, *, heldout_fraction: float = 0.05) -> PackedText:
    """Cut ``stream`` into training windows of ``length`` after holding out its tail.

    The tail held out is ``max(length + 1, heldout_fraction × tokens)`` tokens.

    Raises:
        ValueError: the stream is shorter than one training window plus the held-out tail.
    """
    total = len(stream)
    heldout = max(length + 1, int(heldout_fraction * total))
    train = total - heldout
    if train < length:
        raise ValueError(
            f"--text gives {total:,} tokens; fine-tuning at {length:,} tokens needs at least {length + heldout:,} "
            f"(one training window of {length:,} plus {heldout:,} held out for evaluation)"
        )
    count = train // length
    windows = stream[: count * length].reshape(count, length)  # (windows, length)
    return PackedText(windows, stream[train:].clone(), total)
