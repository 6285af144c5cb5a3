"""`finetune`: the loss it optimises, that it learns, resumes exactly, merges LoRA exactly and exports natively."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from helpers.hf_models import ORIGINAL  # the byte-level Llama's length
from ropekit.finetune.lora import lora_model
from ropekit.finetune.request import FinetuneRequest
from ropekit.finetune.run import finetune
from ropekit.finetune.settings import FinetuneSettings
from ropekit.finetune.train import StopTraining
from ropekit.scaling import YarnScaling
from ropekit.scaling.dynamic import DynamicScaling

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

YARN = YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL)
PAPER_YARN = YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL, beta_fast=8.0, ramp="paper")


def _settings(**changes) -> FinetuneSettings:
    base = dict(target_length=128, steps=6, lr=3e-3, batch_size=2, checkpoint_every=0, seed=0)
    base.update(changes)
    return FinetuneSettings(**base)


def _losses(out) -> dict[int, float]:
    with (out / "finetune" / "loss.csv").open() as handle:
        return {int(r["step"]): float(r["loss"]) for r in csv.DictReader(handle) if int(r["step"]) > 0}


def _run(llama_dir, text_file, out, settings, **options):
    options.setdefault("evaluate", False)
    on_step = options.pop("on_step", None)
    request = FinetuneRequest(llama_dir, options.pop("scaling", YARN), text_file, out, settings, **options)
    return finetune(request, progress=False, on_step=on_step)


def test_twenty_steps_lower_the_heldout_loss(llama_dir, text_file, tmp_path):
    report = _run(llama_dir, text_file, tmp_path / "out", _settings(steps=20))
    assert report.train.heldout_after < 0.8 * report.train.heldout_before
    assert (tmp_path / "out" / "finetune" / "loss.png").stat().st_size > 0
    assert sorted(_losses(tmp_path / "out")) == list(range(1, 21))


def test_output_loads_natively_with_the_trained_patched_models_logits(llama_dir, text_file, tmp_path):
    """The exported folder (YaRN with the paper ramp, written as longrope) equals ropekit's patched model holding
    the trained weights."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.patch_rope import apply_scaling

    out = tmp_path / "out"
    _run(llama_dir, text_file, out, _settings(steps=3), scaling=PAPER_YARN)
    assert json.loads((out / "config.json").read_text())["rope_parameters"]["rope_type"] == "longrope"
    native = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    patched = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32)
    patched.load_state_dict(load_file(out / "model.safetensors"))
    patched = apply_scaling(patched, PAPER_YARN).eval()
    source = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32)
    assert not torch.equal(
        source.model.layers[0].self_attn.q_proj.weight, native.model.layers[0].self_attn.q_proj.weight
    )
    ids = torch.arange(200)[None] * 5 % 257
    with torch.no_grad():
        ours, theirs = patched(input_ids=ids).logits, native(input_ids=ids).logits
    assert float((ours - theirs).abs().max() / theirs.abs().max()) <= 1e-5


def test_resume_continues_the_same_loss_curve(llama_dir, text_file, tmp_path):
    whole = _run(llama_dir, text_file, tmp_path / "whole", _settings())
    assert not whole.train.interrupted

    def stop_at_three(record):
        if record.step == 3:
            raise StopTraining

    first = _run(llama_dir, text_file, tmp_path / "split", _settings(), on_step=stop_at_three)
    assert first.train.interrupted and first.train.steps_done == 3
    assert not (tmp_path / "split" / "config.json").exists()  # no model written for an unfinished run
    with pytest.raises(FileExistsError, match="resume=True"):
        _run(llama_dir, text_file, tmp_path / "split", _settings())
    with pytest.raises(ValueError, match=r"settings\.lr"):
        _run(llama_dir, text_file, tmp_path / "split", _settings(lr=1e-3), resume=True)
    second = _run(llama_dir, text_file, tmp_path / "split", _settings(), resume=True)
    assert second.train.steps_done == 6
    expected, got = _losses(tmp_path / "whole"), _losses(tmp_path / "split")
    assert sorted(got) == sorted(expected) == list(range(1, 7))
    for step in expected:
        assert got[step] == pytest.approx(expected[step], rel=1e-5), step
    a = (tmp_path / "whole" / "model.safetensors").read_bytes()
    from safetensors.torch import load_file

    whole_weights, split_weights = (
        load_file(tmp_path / "whole" / "model.safetensors"),
        load_file(tmp_path / "split" / "model.safetensors"),
    )
    assert a and whole_weights.keys() == split_weights.keys()
    for key in whole_weights:
        torch.testing.assert_close(split_weights[key], whole_weights[key], rtol=1e-4, atol=1e-6)


def test_lora_merges_exactly(llama_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32)
    peft_model = lora_model(model, rank=4)
    trainable = {name for name, p in peft_model.named_parameters() if p.requires_grad}
    assert any("lora_A" in name for name in trainable)
    assert any("embed_tokens" in name for name in trainable) and any("norm" in name for name in trainable)
    assert not any(name.endswith("q_proj.base_layer.weight") for name in trainable)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:  # B starts at zero; make the adapters do something
                parameter.normal_(0, 0.5)
    ids = torch.arange(100)[None] * 3 % 257
    with torch.no_grad():
        unmerged = peft_model(input_ids=ids).logits
        merged_model = peft_model.merge_and_unload()
        merged = merged_model(input_ids=ids).logits
    assert type(merged_model).__name__ == "LlamaForCausalLM"
    assert float((merged - unmerged).abs().max() / unmerged.abs().max()) <= 1e-5


def test_lora_finetune_exports_a_plain_model(llama_dir, text_file, tmp_path):
    from safetensors.torch import load_file

    out = tmp_path / "out"
    report = _run(llama_dir, text_file, out, _settings(steps=3, lora_rank=4))
    weights = load_file(out / "model.safetensors")
    source = load_file(llama_dir / "model.safetensors")
    assert weights.keys() == source.keys()  # merged: no lora_A/lora_B/base_layer keys
    assert not torch.equal(
        weights["model.layers.0.self_attn.q_proj.weight"], source["model.layers.0.self_attn.q_proj.weight"]
    )
    assert report.train.heldout_after < report.train.heldout_before


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"target_length": 64}, ValueError, "above the model's original length 64"),
        ({"target_length": 100_000}, ValueError, "needs at least"),
    ],
)
def test_bad_input_fails_before_training(llama_dir, text_file, tmp_path, change, error, match):
    with pytest.raises(error, match=match):
        _run(llama_dir, text_file, tmp_path / "out", _settings(**change))
    assert not (tmp_path / "out").exists()


def test_existing_out_and_non_rope_model_are_refused(llama_dir, text_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    (out / "config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="force=True"):
        _run(llama_dir, text_file, out, _settings())
    assert (out / "mine.txt").read_text() == "keep" and (out / "config.json").read_text() == "{}"
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 1024}))
    with pytest.raises(ValueError, match="not a RoPE model"):
        _run(gpt2, text_file, tmp_path / "out2", _settings())


def test_learning_rate_schedule():
    settings = _settings(steps=100, warmup_steps=10, min_lr_ratio=0.1)
    assert settings.lr_factor(0) == pytest.approx(0.1)
    assert settings.lr_factor(9) == pytest.approx(1.0)
    assert settings.lr_factor(10) == pytest.approx(1.0)
    assert settings.lr_factor(55) == pytest.approx(0.1 + 0.9 * 0.5)
    assert settings.lr_factor(100) == pytest.approx(0.1)


def test_table_has_the_shipped_model_as_baseline(llama_dir, text_file, tmp_path):
    """The before/after table starts with the source as shipped. Dynamic NTK leaves RoPE unchanged up to the
    original length, so there its training-free row must equal the shipped model's perplexity (to fp32 rounding:
    the shipped model rotates with transformers' float32 tables, the patched one with ropekit's float64 angles);
    beyond it (the target length) the two must differ."""
    dynamic = DynamicScaling(factor=2.0, original_max_position_embeddings=ORIGINAL)
    report = _run(
        llama_dir, text_file, tmp_path / "out", _settings(steps=1), scaling=dynamic, evaluate=True, passkey_trials=1
    )
    shipped, before, after = report.rows
    assert [row["model"] for row in report.rows] == ["source (as shipped)", "before (training-free)", "after fine-tune"]
    assert before["ppl_original"] == pytest.approx(shipped["ppl_original"], rel=1e-6)
    assert before["ppl_target"] != pytest.approx(shipped["ppl_target"], rel=1e-3)
    assert after["ppl_original"] > 1


def test_pose_with_the_whole_target_as_window_trains_like_full_length(llama_dir, text_file, tmp_path):
    """Issue 25: with W = target there is nothing to skip, and PoSE training (explicit position ids 0 … W − 1)
    equals today's full-length training step for step."""
    _run(llama_dir, text_file, tmp_path / "full", _settings())
    _run(llama_dir, text_file, tmp_path / "pose", _settings(window=128))
    full, pose = _losses(tmp_path / "full"), _losses(tmp_path / "pose")
    assert sorted(pose) == sorted(full) == list(range(1, 7))
    for step in full:
        assert pose[step] == pytest.approx(full[step], rel=1e-6, abs=1e-6), step


def test_pose_trains_on_short_windows_whose_positions_span_the_target(llama_dir, text_file, tmp_path, monkeypatch):
    from ropekit.finetune.loss import ChunkedCausalLM

    seen = []
    forward = ChunkedCausalLM.forward

    def recording(self, input_ids, position_ids=None):
        if self.training:
            seen.append((input_ids.shape[1], None if position_ids is None else int(position_ids.max())))
        return forward(self, input_ids, position_ids)

    monkeypatch.setattr(ChunkedCausalLM, "forward", recording)
    report = _run(llama_dir, text_file, tmp_path / "out", _settings(steps=4, window=32, chunks=2))
    assert report.train.steps_done == 4 and report.train.heldout_after is not None  # held out at the target
    assert all(length == 32 and top is not None and top < 128 for length, top in seen)
    assert max(top for _, top in seen) > 32  # the positions skip beyond the window
    with (tmp_path / "out" / "finetune" / "loss.csv").open() as handle:
        assert [int(r["tokens"]) for r in csv.DictReader(handle)][-1] == 4 * 2 * 32
    saved = json.loads((tmp_path / "out" / "finetune" / "settings.json").read_text())["settings"]
    assert saved["window"] == 32 and saved["chunks"] == 2


def test_pose_options_are_checked(llama_dir, text_file, tmp_path):
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    base = ["finetune", "--model", str(llama_dir), "--scaling", "yarn", "--target-length", "128"]
    for extra, message in ((["--window", "256"], "--window"), (["--window", "32", "--chunks", "40"], "--chunks")):
        result = CliRunner().invoke(app, [*base, "--text", str(text_file), *extra, "-o", str(tmp_path / "out")])
        assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="window must be at most target_length=128"):
        _settings(window=256)


def test_heldout_losses_show_progress_and_land_in_the_log(llama_dir, text_file, tmp_path, capsys):
    """With bars on and ``eval_every``: the held-out forward before and after training draws a bar of its own (a
    long silent wait otherwise), the one inside training reuses the training bar (rich draws one live bar at a time),
    and the log has the held-out loss at steps 0, 2 and 4; the first and last are the report's before and after."""
    from ropekit.finetune.loss_log import read_loss_log

    out = tmp_path / "out"
    request = FinetuneRequest(llama_dir, YARN, text_file, out, _settings(steps=4, eval_every=2), evaluate=False)
    report = finetune(request, progress=True)
    heldout = {r.step: r.heldout_loss for r in read_loss_log(out / "finetune" / "loss.csv") if r.heldout_loss}
    assert sorted(heldout) == [0, 2, 4]
    assert heldout[0] == pytest.approx(report.train.heldout_before, rel=1e-6)
    assert heldout[4] == pytest.approx(report.train.heldout_after, rel=1e-6)
    err = capsys.readouterr().err
    assert "held-out loss before training" in err and "held-out loss after training" in err
