"""Shared pieces for the generator tests: the byte tokenizer, a small BPE tokenizer trained here and a haystack text
(the ``deadline`` that turns a hang into a failure is in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from helpers.families import FAMILIES
from ropekit.model.corpus import heldout_bytes
from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.base import Pieces

#: a haystack text with sentences and code, long enough for 4096-token samples
TEXT = (
    "def walk(tree):\n    for node in tree.children:\n        yield node\n"
    "The river runs past the old mill, and the miller counts his sacks twice. "
) * 400


def _train_bpe(corpus: list[str], vocab: int, family: str = "gpt2"):
    """A BPE tokenizer of ``family`` (:data:`helpers.families.FAMILIES`; default: byte-level, GPT-2's split rule)
    trained on ``corpus``: ``encode`` (bytes → ids, nothing added), with the decoding as its ``decode`` attribute
    (ids → text, special tokens kept, as the lm-eval export decodes)."""
    pytest.importorskip("tokenizers")
    from helpers.families import family_tokenizer

    tokenizer = family_tokenizer(family, corpus, vocab)

    def encode(text: bytes) -> np.ndarray:
        return np.array(tokenizer.encode(text.decode(), add_special_tokens=False).ids, dtype=np.int64)

    encode.decode = lambda ids: tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)
    return encode


@pytest.fixture(scope="session")
def bpe_encode():
    """A byte-level BPE tokenizer (transformers' fast tokenizer) trained on a few lines: multi-byte tokens."""
    corpus = [TEXT[:4000], "The magic number for kiwi is 1234567. What is the magic number? They are VAR ABC"]
    return _train_bpe(corpus, 400)


@pytest.fixture(scope="session")
def train_bpe():
    """The trainer of :func:`_train_bpe` (``train_bpe(corpus, vocab, family)``), for modules that train their own
    tokenizer."""
    return _train_bpe


@pytest.fixture(scope="session")
def text_ids() -> np.ndarray:
    return byte_ids(TEXT.encode())


@dataclass(frozen=True)
class Family:
    """A trained tokenizer of one family (shown by its name alone: hypothesis prints its arguments)."""

    name: str
    encode: Callable[[bytes], np.ndarray] = field(repr=False)
    text: np.ndarray = field(repr=False)
    pieces: Pieces = field(repr=False)


@pytest.fixture(scope="session", params=FAMILIES)
def family(request, train_bpe):
    """One family's tokenizer (:data:`helpers.families.FAMILIES`) trained on the shipped text, that text's ids, and the
    pieces its samples share (as an evaluation's samples share them)."""
    shipped = heldout_bytes().decode()
    encode = train_bpe([shipped[i : i + 4000] for i in range(0, len(shipped), 4000)], 1000, request.param)
    return Family(request.param, encode, encode(shipped.encode()), Pieces(encode, encode.decode))
