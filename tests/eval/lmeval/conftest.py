"""Shared fixtures of the lm-eval tests: small random Llamas saved with a tokenizer (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.lmeval_run import merging_tokenizer, spanning_tokenizer


@pytest.fixture(scope="session")
def byte_model(make_llama, tmp_path_factory) -> Path:
    """The byte-level random Llama (257 tokens, byte tokenizer) with 512 positions: its training length."""
    return make_llama(tmp_path_factory.mktemp("lmeval") / "byte", positions=512)


def _with_tokenizer(make_llama, folder: Path, tokenizer) -> Path:
    """A random Llama (400 tokens, 512 positions) saved with ``tokenizer`` instead of its own."""
    path = make_llama(folder, positions=512, vocab=400)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).unlink()
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def merging_model(make_llama, tmp_path_factory) -> Path:
    """A random Llama with :func:`merging_tokenizer` (only its tokenizer and config are read by an export)."""
    return _with_tokenizer(make_llama, tmp_path_factory.mktemp("lmeval") / "merging", merging_tokenizer())


@pytest.fixture(scope="session")
def spanning_model(make_llama, tmp_path_factory) -> Path:
    """A random Llama with :func:`spanning_tokenizer` (SentencePiece-style: merges across a space)."""
    return _with_tokenizer(make_llama, tmp_path_factory.mktemp("lmeval") / "spanning", spanning_tokenizer())
