"""The tokenizer of a served model, read locally so that a server is sent the same token ids as every other engine:
the model's GGUF file (llama.cpp's tokenizer, no weights loaded) or its transformers folder (the tokenizer and
``config.json``, which is what vLLM and SGLang serve from).

Each gives the evaluation what it needs without weights: ``encode``/``detokenize``, the RoPE and training length
from the model's own metadata, the separator and stop tokens, :meth:`as_text` (text that re-tokenises to given ids,
for a server that takes prompts only as text) and :meth:`fingerprint` (a SHA-256 of the tokenizer's content, which
the answer journal keys on).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import torch

__all__ = ["GGUFVocab", "TransformersVocab", "served_vocab"]

#: the files of a transformers folder that decide its tokenization (those present are hashed)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)


def served_vocab(model: str | Path) -> GGUFVocab | TransformersVocab:
    """The tokenizer of ``model``: a ``.gguf`` file or a transformers folder (with ``config.json`` and a tokenizer).

    Raises:
        FileNotFoundError: no such file or folder, or a folder without ``config.json``.
        ValueError: a folder without a tokenizer, or what reading the file or folder refuses.
    """
    path = Path(model)
    if path.suffix.lower() == ".gguf":
        return GGUFVocab(path)
    if path.is_dir():
        return TransformersVocab(path)
    raise FileNotFoundError(f"{str(path)!r} is neither a .gguf file nor a transformers model folder")


def gguf_tokenizer_sha256(path: Path) -> str:
    """SHA-256 of a GGUF file's ``tokenizer.*`` metadata (each key/value pair's bytes as the file holds them, in the
    file's order): the tokenizer's content, without hashing gigabytes of weights."""
    from ropekit.integrations.gguf.read_rope import open_gguf

    header = open_gguf(path)
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for name, (start, end) in header.spans.items():
            if name.startswith("tokenizer."):
                handle.seek(start)
                digest.update(handle.read(end - start))
    return digest.hexdigest()


class GGUFVocab:
    """A GGUF file's tokenizer, RoPE and training length (llama.cpp's reading, no weights loaded)."""

    def __init__(self, path: Path) -> None:
        from ropekit.eval.backends.llamacpp import LlamaCppEvalModel

        self.model = LlamaCppEvalModel(path)
        self.path = path
        self.train_length, self.rope = self.model.train_length, self.model.rope
        self.native_scaling = self.model.native_scaling
        self.separator, self.stop_tokens = self.model.separator, self.model.stop_tokens

    def encode(self, text: bytes) -> torch.Tensor:
        return self.model.encode(text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.model.detokenize(tokens)

    def as_text(self, ids: list[int]) -> str | None:
        """Text that llama.cpp tokenizes (special tokens parsed, as servers do) to exactly ``ids``, else ``None``."""
        vocab = self.model.vocab
        text = vocab.detokenize(ids, special=True)
        if vocab.tokenize(text, add_bos=False, special=True) != ids:
            return None
        try:
            return text.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            return None

    def fingerprint(self) -> str:
        return gguf_tokenizer_sha256(self.path)

    def describe(self) -> dict[str, Any]:
        return {"gguf": self.model.describe()["gguf"]}

    def close(self) -> None:
        self.model.close()


class TransformersVocab:
    """A transformers folder's tokenizer, RoPE and training length (``config.json``; no weights loaded)."""

    def __init__(self, path: Path) -> None:
        from ropekit.eval.model_support import tokenizer_stops
        from ropekit.integrations.hf.load import load_config, load_tokenizer
        from ropekit.integrations.hf.model_config import original_length_of, rope_of

        config = load_config(path)
        self.tokenizer = load_tokenizer(path)
        if self.tokenizer is None:
            raise ValueError(
                f"{str(path)!r} has no tokenizer (the server's prompts are tokenized with the model's own)"
            )
        self.path = path
        native = rope_of(config)
        self.native_scaling = native.scaling
        self.rope = dataclasses.replace(native, scaling=None)
        self.train_length = original_length_of(config, native)
        self.stop_tokens = tokenizer_stops(self.tokenizer)
        self.separator = sorted(self.stop_tokens)[:1] or self.encode(b"\n\n").tolist()

    def encode(self, text: bytes) -> torch.Tensor:
        from ropekit.eval.model_support import tokenizer_ids

        return tokenizer_ids(self.tokenizer, text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def as_text(self, ids: list[int]) -> str | None:
        """Text that the tokenizer (special tokens parsed, none added, as servers tokenize a completion prompt
        after the BOS they add) turns into exactly ``ids``, else ``None``."""
        text = self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        again = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return text if list(again) == list(ids) else None

    def fingerprint(self) -> str:
        """SHA-256 of the tokenizer files the folder holds (:data:`TOKENIZER_FILES`, by name and content)."""
        digest = hashlib.sha256()
        for name in TOKENIZER_FILES:
            file = self.path / name
            if file.is_file():
                digest.update(name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
        return digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        return {"folder": str(self.path)}

    def close(self) -> None:
        pass
