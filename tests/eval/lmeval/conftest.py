"""Shared fixtures of the lm-eval tests: small random Llamas saved with a tokenizer (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.families import family_transformers_tokenizer
from helpers.lmeval_run import merging_tokenizer, spanning_tokenizer


@pytest.fixture(scope="session")
def byte_model(make_llama, tmp_path_factory) -> Path:
    """The byte-level random Llama (257 tokens, byte tokenizer) with 512 positions: its training length."""
    return make_llama(tmp_path_factory.mktemp("lmeval") / "byte", positions=512)


def _with_tokenizer(make_llama, folder: Path, tokenizer) -> Path:
    """A random Llama (at least 400 tokens, 512 positions) saved with ``tokenizer`` instead of its own."""
    path = make_llama(folder, positions=512, vocab=max(400, len(tokenizer)), eos_token_id=tokenizer.eos_token_id)
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


@pytest.fixture(scope="session")
def family_model(make_llama, tmp_path_factory):
    """``family_model(name)``: a random Llama (512 positions) saved with a tokenizer of the family ``name``
    (:mod:`helpers.families`) trained on the shipped text; one per family and session."""
    from ropekit.model.corpus import heldout_bytes

    made: dict[str, Path] = {}

    def model(name: str) -> Path:
        if name not in made:
            shipped = heldout_bytes().decode()
            tokenizer = family_transformers_tokenizer(
                name, [shipped[i : i + 4000] for i in range(0, len(shipped), 4000)], 1000
            )
            made[name] = _with_tokenizer(make_llama, tmp_path_factory.mktemp("lmeval") / name, tokenizer)
        return made[name]

    return model
