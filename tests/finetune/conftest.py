"""Small random transformers models and a byte-level tokenizer, built in code (nothing downloaded). Every test in
this folder gets the ``hf`` marker (``tests/conftest.py``), so all of them skip without transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

#: the original (pre-training) length of the small models
ORIGINAL = 64


def byte_tokenizer():
    """A byte-level BPE tokenizer without merges: 256 byte tokens + ``<|endoftext|>`` (id 256)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    vocab["<|endoftext|>"] = 256
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def save_llama(path: Path, *, seed: int = 0, rope_parameters: dict | None = None, **overrides) -> Path:
    """A random 2-layer Llama (head_dim 16) with the byte tokenizer, saved to ``path``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    settings = dict(
        vocab_size=257,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=ORIGINAL,
        rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 10000.0},
        eos_token_id=256,
        bos_token_id=256,
        tie_word_embeddings=False,
    )
    settings.update(overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**settings)).float()
    with torch.no_grad():  # random init gives near-uniform logits; larger weights make differences visible
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(4.0)
    model.save_pretrained(path)
    byte_tokenizer().save_pretrained(path)
    return path


def write_text(path: Path, documents: int = 60, seed: int = 0) -> Path:
    """A deterministic toy corpus: short documents of repeated arithmetic patterns, one per line in a .jsonl."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(documents):
        start, step = rng.randrange(100), rng.randrange(1, 9)
        text = " ".join(str(start + k * step) for k in range(rng.randrange(20, 60)))
        lines.append(json.dumps({"text": f"count by {step}: {text}."}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory) -> Path:
    return save_llama(tmp_path_factory.mktemp("llama") / "model")


@pytest.fixture(scope="session")
def text_file(tmp_path_factory) -> Path:
    return write_text(tmp_path_factory.mktemp("text") / "corpus.jsonl")


@pytest.fixture(scope="session")
def make_llama():
    """``make_llama(path, **config_overrides)``: :func:`save_llama`."""
    return save_llama


@pytest.fixture(scope="session")
def make_text():
    """``make_text(path, documents=60, seed=0)``: :func:`write_text`."""
    return write_text
