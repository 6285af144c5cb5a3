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


@pytest.mark.parametrize(
    ("total", "target", "window"),
    [(5000, 512, 300), (4000, 128, 48), (1000, 64, 64), (777, 128, 5), (200, 128, 32)],
)
def test_pose_windows_cover_the_whole_training_stream(total, target, window):
    """Closed form: of ``train = total − max(target + 1, ⌊0.05 · total⌋)`` tokens, the first ``⌊train / W⌋ · W``
    are trained on, once each and in order, and only ``train mod W`` (fewer than one window) are left out. Cutting
    target-length windows into W-token pieces instead left ``target mod W`` tokens of every window out: 41% of the
    text at W = 300, target 512."""
    stream = torch.arange(total)
    packed = pack(stream, target, window=window)
    train = total - max(target + 1, int(0.05 * total))
    assert packed.windows.shape == (train // window, window)
    assert torch.equal(packed.windows.flatten(), stream[: train // window * window])
    assert packed.left_out == train % window < window
    assert torch.equal(packed.heldout, stream[train:])
    assert len(packed.heldout) >= target + 1  # the held-out loss still scores one full target-length window


def test_a_prepared_pose_run_trains_on_every_token_but_the_last_incomplete_window(llama_dir, text_file, tmp_path):
    """Through the run's own preparation: the windows are the tokenized text's first ⌊train / W⌋ · W tokens."""
    from transformers import AutoTokenizer

    from ropekit.finetune.request import FinetuneRequest, prepare
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.scaling import YarnScaling

    target, window = 128, 48
    settings = FinetuneSettings(target_length=target, window=window, steps=1)
    scaling = YarnScaling(factor=2.0, original_max_position_embeddings=64)
    lines = []
    prepared = prepare(FinetuneRequest(llama_dir, scaling, text_file, tmp_path / "out", settings), log=lines.append)
    stream = tokenize_text(AutoTokenizer.from_pretrained(llama_dir), text_file)
    train = len(stream) - max(target + 1, int(0.05 * len(stream)))
    assert torch.equal(prepared.data.windows.flatten(), stream[: train // window * window])
    assert prepared.data.left_out == train % window
    assert prepared.heldout_windows.shape[1] == target
    assert f"{train // window:,} training windows of {window}" in lines[-1]
    assert f"{train % window:,} left out" in lines[-1] or train % window == 0
    assert not (tmp_path / "out").exists()
