"""Packing: documents joined with the tokenizer's separator, windows of exactly the target length, a held-out tail."""

from __future__ import annotations

import json

import pytest
import torch

from ropekit.finetune.data import pack, tokenize_text

pytest.importorskip("transformers")


def test_documents_are_joined_with_the_end_of_sequence_token(llama_dir, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(llama_dir)
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "ab"}) + "\n" + json.dumps({"text": "c"}) + "\n")
    stream = tokenize_text(tokenizer, path)
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert len(ids("ab")) == 2 and tokenizer.eos_token_id == 256
    assert stream.tolist() == [*ids("ab"), 256, *ids("c")]  # <|endoftext|> between documents only


def test_pack_windows_and_heldout():
    stream = torch.arange(1000)
    packed = pack(stream, 64)
    assert packed.windows.shape == (14, 64)  # 1000 - 65 held out = 935 -> 14 full windows
    assert torch.equal(packed.windows.flatten(), stream[: 14 * 64])
    assert torch.equal(packed.heldout, stream[-65:])
    with pytest.raises(ValueError, match="needs at least 257"):
        pack(torch.arange(200), 128)
