"""The tokenizer hash the server journal keys on, for a GGUF file: it changes with the tokenizer's metadata and with
nothing else (the oracle: two files written here that differ in one token, or in the RoPE base only)."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")


def write(path, tokens, base=10000.0):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_float32("llama.rope.freq_base", base)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_hash_follows_the_tokenizer_and_nothing_else(tmp_path) -> None:
    from ropekit.eval.backends.openai_vocab import gguf_tokenizer_sha256

    first = gguf_tokenizer_sha256(write(tmp_path / "a.gguf", ["a", "b", "c"]))
    assert gguf_tokenizer_sha256(write(tmp_path / "b.gguf", ["a", "b", "c"], base=500000.0)) == first
    assert gguf_tokenizer_sha256(write(tmp_path / "c.gguf", ["a", "b", "d"])) != first
