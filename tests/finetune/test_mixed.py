"""Mixed-window fine-tuning: the packing, the document mask and loss against separate forwards, and a run."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.hf_models import random_hf_model
from helpers.mixed_text import write_mixed_text
from ropekit.finetune.mixed import next_token_mask, pack_mixed
from ropekit.finetune.pose import PoseSettings
from ropekit.scaling.longrope import LongRopeScaling

transformers = pytest.importorskip("transformers")

L0 = 16
LONG = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)  # head_dim 16: 8 pairs


def _documents(lengths: list[int], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 250, (n,), generator=generator) for n in lengths]


def test_rows_have_exact_lengths_reset_positions_and_keep_every_token_in_order():
    docs = _documents([5, 30, 9, 16, 40, 3, 12, 20, 7, 33, 2, 11])
    rows = pack_mixed(docs, original=L0, target_length=24)
    assert rows.ids.shape == rows.positions.shape == rows.documents.shape == (len(rows), 24)
    short = [d for d in docs if len(d) <= L0]
    long = [d for d in docs if len(d) > L0]
    for flag, pool in ((False, short), (True, long)):
        ids = rows.ids[rows.long == flag].reshape(-1)
        assert torch.equal(ids, torch.cat(pool)[: len(ids)])  # the pool end to end; only its incomplete tail is left
        assert torch.cat(pool).numel() - ids.numel() < 24
    assert rows.left_out == sum(map(len, docs)) - rows.ids.numel()
    for positions, numbers in zip(rows.positions, rows.documents, strict=True):
        starts = torch.cat([torch.tensor([True]), numbers[1:] != numbers[:-1]])
        assert torch.equal(positions == 0, starts)  # a document (piece) starts exactly where its position is 0
        steps = positions[1:] - positions[:-1]
        assert bool(((steps == 1) | starts[1:]).all())
    assert int(rows.positions[~rows.long].max()) < L0  # short rows never reach L0: the short list
    assert bool((rows.positions[rows.long].amax(-1) + 1 > L0).all())  # here every long row passes L0


def test_the_summary_counts_rows_by_the_list_the_model_rotates_them_with():
    """Long documents of 20 tokens in rows of 24: the second row holds a 16-token tail and an 8-token head, both
    below L0 = 16, and the model rotates it with the short list; the oracle is the rotary module's own tables."""
    from ropekit.config import RopeConfig
    from ropekit.mixed_window import MixedWindowRotary

    spec = LongRopeScaling(short_factor=(1.0,) * 8, long_factor=LONG, original_max_position_embeddings=L0, factor=4.0)
    rows = pack_mixed(_documents([5, 9, 10, 20, 20, 20]), original=L0, target_length=24)
    rotary = MixedWindowRotary(RopeConfig(head_dim=16, base=10000.0, scaling=spec))
    cos, _ = rotary.cos_sin(rows.positions)
    short, _ = rotary.short.cos_sin(rows.positions)
    on_short = sum(torch.equal(cos[i], short[i]) for i in range(len(rows)))
    assert (len(rows), on_short, int(rows.long.sum())) == (3, 2, 2)
    assert rows.summary(spec).startswith(
        "mixed windows: 2 rows on the short list (positions below L0 16; 1 of them pieces of longer documents), "
        "1 rows on the long list"
    )
    pose = pack_mixed(_documents([5, 9, 10, 20, 20, 20]), original=L0, target_length=64, window=8)
    drawn = "0 rows on the long list, 6 rows of longer documents on the list their PoSE positions pick"
    assert drawn in pose.summary(spec, pose=True)  # 20 // 8 windows of each of the three long documents


def test_documents_do_not_cross_rows_labels_or_each_other():
    docs = _documents([10, 10, 10, 30, 30])
    rows = pack_mixed(docs, original=L0, target_length=20)
    inside = next_token_mask(rows.documents)
    for b in range(len(rows)):
        for t in range(19):
            assert bool(inside[b, t]) == (rows.documents[b, t] == rows.documents[b, t + 1])
    short = rows.documents[~rows.long]
    assert set(short.unique().tolist()).isdisjoint(rows.documents[rows.long].unique().tolist())


def test_pose_long_rows_are_one_document_each_and_take_pose_positions():
    docs = _documents([6, 8, 7, 5, 9, 40, 50])
    rows = pack_mixed(docs, original=L0, target_length=64, window=10)
    long = rows.documents[rows.long]
    assert bool((long == long[:, :1]).all())  # one document per long row
    assert int(rows.long.sum()) == 40 // 10 + 50 // 10
    pose = PoseSettings(window=10, target_length=64, chunks=2, seed=0)
    order = torch.arange(len(rows))
    _, positions, _ = rows.samples(order, pose)
    for i in range(len(rows)):
        want = pose.position_ids(i) if rows.long[i] else rows.positions[i]
        assert torch.equal(positions[i], want)


def test_a_text_without_short_or_long_documents_is_refused():
    with pytest.raises(ValueError, match=r"mixed windows need documents of at most 16 tokens and longer ones.*0 short"):
        pack_mixed(_documents([30, 40]), original=L0, target_length=24)


def _mixed_llama():
    from ropekit.integrations.hf.mixed_window import use_mixed_window
    from ropekit.integrations.hf.patch_rope import apply_scaling

    spec = LongRopeScaling(short_factor=(1.0,) * 8, long_factor=LONG, original_max_position_embeddings=L0, factor=4.0)
    model = random_hf_model("llama", vocab=260, heads=4, kv_heads=2, hidden=64, positions=L0, scale=4.0)
    model.config._attn_implementation = "sdpa"
    return use_mixed_window(apply_scaling(model, spec)).eval()


def test_packed_forward_and_loss_equal_separate_forwards_of_each_document():
    """transformers' own forward of each document alone (positions 0…n−1, short list) is the oracle for the packed
    row: the mask keeps documents apart, the positions restart, and the loss is the mean over in-document targets."""
    from ropekit.finetune.loss import ChunkedCausalLM
    from ropekit.integrations.hf.mixed_window import attention_mask_for

    model = _mixed_llama()
    docs = _documents([5, 11, 8])
    ids = torch.cat(docs)[None]  # (1, 24)
    positions = torch.cat([torch.arange(len(d)) for d in docs])[None]
    numbers = torch.cat([torch.full((len(d),), i) for i, d in enumerate(docs)])[None]
    with torch.no_grad():
        packed = model(ids, position_ids=positions, attention_mask=attention_mask_for(model, numbers, torch.float32))
        alone = [model(d[None]).logits[0] for d in docs]
        torch.testing.assert_close(packed.logits[0], torch.cat(alone), atol=1e-5, rtol=1e-5)
        loss = ChunkedCausalLM(model)(ids, positions, numbers)
        per_doc = [model(d[None], labels=d[None]).loss * (len(d) - 1) for d in docs]
    torch.testing.assert_close(loss, sum(per_doc) / sum(len(d) - 1 for d in docs), atol=1e-5, rtol=1e-5)


def test_the_eager_mask_gives_the_same_logits():
    from ropekit.integrations.hf.mixed_window import attention_mask_for

    model = _mixed_llama()
    docs = _documents([7, 9])
    ids, numbers = torch.cat(docs)[None], torch.tensor([[0] * 7 + [1] * 9])
    positions = torch.cat([torch.arange(7), torch.arange(9)])[None]
    with torch.no_grad():
        sdpa = model(ids, position_ids=positions, attention_mask=attention_mask_for(model, numbers, torch.float32))
        model.config._attn_implementation = "eager"
        eager = model(ids, position_ids=positions, attention_mask=attention_mask_for(model, numbers, torch.float32))
    torch.testing.assert_close(sdpa.logits, eager.logits, atol=1e-5, rtol=1e-5)
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match="load the model with attn_implementation='sdpa'"):
        attention_mask_for(model, numbers, torch.float32)


def test_finetune_mixed_window_trains_and_writes_a_native_longrope_checkpoint(llama_dir, tmp_path):
    """A few steps on the byte-level Llama (L0 = 64): the folder loads in plain transformers as longrope with the
    original RoPE as its short list, and gives the logits ropekit's patched model gives with the trained weights."""
    from transformers import AutoModelForCausalLM

    from ropekit.finetune.request import FinetuneRequest
    from ropekit.finetune.run import finetune
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.integrations.hf.patch_rope import apply_scaling

    given = LongRopeScaling(short_factor=LONG, long_factor=LONG, original_max_position_embeddings=64, factor=4.0)
    settings = FinetuneSettings(
        target_length=256, steps=3, lr=3e-3, batch_size=2, checkpoint_every=0, mixed_window=True
    )
    out = tmp_path / "out"
    request = FinetuneRequest(llama_dir, given, write_mixed_text(tmp_path / "t.jsonl"), out, settings, evaluate=False)
    report = finetune(request, progress=False)
    assert report.train.steps_done == 3 and report.train.heldout_after < report.train.heldout_before
    rope = json.loads((out / "config.json").read_text())["rope_parameters"]
    assert rope["rope_type"] == "longrope" and rope["short_factor"] == [1.0] * 8 and rope["long_factor"] == list(LONG)
    native = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    patched = apply_scaling(AutoModelForCausalLM.from_pretrained(out, local_files_only=True), request.scaling).eval()
    ids = torch.randint(0, 256, (1, 200), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for length in (40, 200):  # short list within L0, long list beyond: transformers switches by the length
            torch.testing.assert_close(
                native(ids[:, :length]).logits, patched(ids[:, :length]).logits, atol=1e-4, rtol=1e-4
            )


def test_the_fit_plan_counts_the_document_mask():
    from helpers.hf_models import random_hf_config
    from ropekit.finetune.fit import Shapes, plan_step

    shapes = Shapes.of_config(random_hf_config("llama").to_dict())
    plain = plan_step(shapes, window=512, target_length=512, batch_size=3)
    mixed = plan_step(shapes, window=512, target_length=512, batch_size=3, mixed_window=True)
    assert mixed.peak - plain.peak == mixed.mask == 3 * 512 * 512  # one bool per (row, query, key)
    assert "document mask" in mixed.summary() and "document mask" not in plain.summary()


def test_finetune_mixed_window_with_pose_windows(llama_dir, tmp_path):
    """PoSE and mixed windows together: 64-token rows, long rows' positions skipping across 256."""
    from ropekit.finetune.request import FinetuneRequest, prepare
    from ropekit.finetune.run import run_prepared
    from ropekit.finetune.settings import FinetuneSettings

    given = LongRopeScaling(short_factor=LONG, long_factor=LONG, original_max_position_embeddings=64, factor=4.0)
    settings = FinetuneSettings(
        target_length=256, window=64, steps=2, lr=3e-3, batch_size=2, checkpoint_every=0, mixed_window=True
    )
    text = write_mixed_text(tmp_path / "t.jsonl")
    prepared = prepare(FinetuneRequest(llama_dir, given, text, tmp_path / "out", settings, evaluate=False))
    rows = prepared.mixed
    assert rows.ids.shape[1] == 64 and bool(rows.long.any()) and bool((~rows.long).any())
    report = run_prepared(prepared, progress=False)
    assert report.train.steps_done == 2 and (tmp_path / "out" / "config.json").is_file()
