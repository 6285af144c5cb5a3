"""Evaluation (and training) text from the user's own files, as one stream of token ids or packed windows.

Accepted: a UTF-8 text file (one document), a ``.jsonl`` file (one JSON object per line with a ``text`` string,
one document each), or a folder of such files (every non-hidden file below it, in sorted path order). Documents
are tokenized one at a time and joined with the model's separator (its tokenizer's end-of-sequence token), so
no window runs from one document into the next without one.

Typical use::

    text = read_text("corpus/")                         # validates: missing, empty, binary, bad JSON
    tokens = tokenize(text, model.encode, model.separator)
    require_tokens(tokens, 8193)                        # long enough for one window of 8192 + its target
    windows = packed_windows(tokens.ids, 8192)          # (n, 8192), consecutive, the remainder dropped

``sha256`` identifies the text exactly: for one file it is the file's own sha256 (what ``sha256sum`` prints);
for a folder, the sha256 of the lines ``<relative path>\\0<file sha256>\\n`` over its files in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ropekit.errors import InvalidArgument, MissingFile

#: the name results record for the shipped held-out text
SHIPPED = "shipped held-out text (ropekit/data/heldout.txt)"


@dataclass(frozen=True)
class EvalText:
    """Documents read from a path (UTF-8 bytes each), with the source's sha256.

    Attributes:
        source: the path as given, or :data:`SHIPPED`.
        documents: one entry per document, UTF-8 encoded.
        sha256: see the module docstring.
    """

    source: str
    documents: tuple[bytes, ...]
    sha256: str

    @property
    def nbytes(self) -> int:
        return sum(len(d) for d in self.documents)


@dataclass(frozen=True)
class TokenizedText:
    """An :class:`EvalText` as one 1-D stream of int64 token ids (documents joined with the separator)."""

    source: str
    sha256: str
    ids: torch.Tensor

    @property
    def tokens(self) -> int:
        return len(self.ids)

    def describe(self) -> dict[str, object]:
        """What results record about the text: source, sha256, token count."""
        return {"source": self.source, "sha256": self.sha256, "tokens": self.tokens}


def _decode(data: bytes, where: str) -> str:
    if b"\x00" in data:
        message = f"text {where} looks binary (it holds NUL bytes); give UTF-8 text or .jsonl"
        raise InvalidArgument("text", where, message=message)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        message = f"text {where} is not UTF-8 text (invalid byte at offset {error.start}); give UTF-8 text or .jsonl"
        raise InvalidArgument("text", where, message=message) from None


def _documents_of(path: Path, data: bytes, where: str) -> list[bytes]:
    text = _decode(data, where)
    if path.suffix.lower() != ".jsonl":  # .JSONL too
        return [data] if text.strip() else []
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InvalidArgument(
                "text", where, message=f"text {where} line {number} is not JSON: {error.msg}"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            message = f'text {where} line {number} needs a "text" string field, got {line[:60]!r}'
            raise InvalidArgument("text", where, message=message)
        if record["text"].strip():
            documents.append(record["text"].encode("utf-8"))
    return documents


def read_text(path: str | Path) -> EvalText:
    """Read a text file, a ``.jsonl`` file or a folder of them (see the module docstring); nothing is tokenized.

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``text``) the path does not exist.
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``text``) it is empty, binary, not UTF-8, a
            folder without files, or a ``.jsonl`` line without ``text``.
    """
    root = Path(path)
    if not root.exists():
        raise MissingFile("text", str(root), message=f"text {str(root)!r} does not exist")
    if root.is_dir():
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        if not files:
            raise InvalidArgument("text", str(root), message=f"text {str(root)!r} is a folder without files")
    else:
        files = [root]
    documents: list[bytes] = []
    listing = hashlib.sha256()
    digest = ""
    for file in files:
        data = file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        relative = file.relative_to(root).as_posix() if root.is_dir() else file.name
        listing.update(f"{relative}\0{digest}\n".encode())
        documents += _documents_of(file, data, repr(str(file)))
    if not documents:
        raise InvalidArgument("text", str(root), message=f"text {str(root)!r} is empty (no non-blank text)")
    return EvalText(str(root), tuple(documents), listing.hexdigest() if root.is_dir() else digest)


def shipped_text() -> EvalText:
    """The shipped held-out text (one document; sha256 of its bytes, as recorded before ``--text`` existed)."""
    from ropekit.model.corpus import heldout_bytes

    data = heldout_bytes()
    return EvalText(SHIPPED, (data,), hashlib.sha256(data).hexdigest())


def tokenize(text: EvalText, encode: Callable[[bytes], torch.Tensor], separator: Sequence[int] = ()) -> TokenizedText:
    """Token ids of every document, joined with ``separator`` ids between documents.

    Args:
        encode: UTF-8 bytes → 1-D int64 ids (an evaluation model's ``encode``, or a tokenizer wrapped so).
        separator: ids put between consecutive documents (e.g. ``[tokenizer.eos_token_id]``).
    """
    between = torch.tensor(list(separator), dtype=torch.int64)
    parts: list[torch.Tensor] = []
    for index, document in enumerate(text.documents):
        if index:
            parts.append(between)
        parts.append(torch.as_tensor(encode(document), dtype=torch.int64))
    return TokenizedText(text.source, text.sha256, torch.cat(parts))


def require_tokens(text: TokenizedText, needed: int) -> TokenizedText:
    """``text`` if it has at least ``needed`` tokens.

    Raises:
        ValueError: it is shorter, naming the source, its token count and what is needed.
    """
    if text.tokens < needed:
        raise ValueError(
            f"text {text.source!r} has {text.tokens} tokens; the longest length asked for needs at least {needed} "
            "(give more text or ask for shorter lengths)"
        )
    return text


def packed_windows(ids: torch.Tensor, length: int, *, stride: int | None = None) -> torch.Tensor:
    """Consecutive windows of ``length`` tokens from a 1-D stream, the incomplete remainder dropped.

    Args:
        stride: start of each window after the previous one (default ``length``: no overlap).

    Shapes:
        ids ``(n,)`` → ``(windows, length)`` (a view when possible).

    Raises:
        ValueError: ``length`` or ``stride`` < 1, or fewer than ``length`` tokens.
    """
    step = length if stride is None else stride
    if length < 1 or step < 1:
        raise ValueError(f"length and stride must be >= 1, got length={length}, stride={step}")
    if ids.dim() != 1 or len(ids) < length:
        raise ValueError(f"ids must be 1-D with at least length={length} tokens, got shape {tuple(ids.shape)}")
    return ids.unfold(0, length, step)  # (windows, length)


def token_windows(
    path: str | Path, encode: Callable[[bytes], torch.Tensor], separator: Sequence[int], length: int
) -> torch.Tensor:
    """``packed_windows`` of a path's documents in one call: ``(windows, length)`` int64.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_text`, or fewer than ``length`` tokens.
    """
    tokens = require_tokens(tokenize(read_text(path), encode, separator), length)
    return packed_windows(tokens.ids, length)
