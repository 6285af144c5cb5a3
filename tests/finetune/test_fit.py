"""The plan of what fits (issue 25 item 2): the predicted peak against the peak torch's profiler measures on a random
Llama, the refusal with the largest window that fits, and ``--dry-run`` that writes and trains nothing."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from helpers.hf_models import random_hf_model
from ropekit.cli.app import app
from ropekit.finetune.fit import Shapes, calibrate, largest_window, plan_step
from ropekit.finetune.loss import ChunkedCausalLM

transformers = pytest.importorskip("transformers")
runner = CliRunner()


def _llama(checkpointing: bool) -> torch.nn.Module:
    sizes = {"vocab": 2048, "hidden": 128, "intermediate": 344, "positions": 1024}
    model = random_hf_model("llama", tie_word_embeddings=False, attn_implementation="sdpa", **sizes)
    model.config.use_cache = False
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


@pytest.mark.parametrize("checkpointing", [pytest.param(False, marks=pytest.mark.slow), True])
def test_predicted_peak_against_the_profiler(checkpointing):
    """Measured: every allocation and free of a training step (weights, AdamW state, activations, loss head, optimizer
    temporaries), by torch's profiler. The prediction from the shapes alone is within 10% at a 512-token window;
    calibrated by a 64-token step it is never below the measured peak by more than 2%, nor above it by more than 10%
    (measured when written: 0.99 / 0.96 uncalibrated and 1.05 / 1.05 calibrated, without / with checkpointing)."""
    model = _llama(checkpointing)
    wrapper, shapes = ChunkedCausalLM(model), Shapes.of_model(model)
    calibration, _ = calibrate(wrapper, shapes, window=64, checkpointing=checkpointing)
    _, measured = calibrate(wrapper, shapes, window=512, checkpointing=checkpointing)
    plain = plan_step(shapes, window=512, target_length=4096, checkpointing=checkpointing)
    calibrated = plan_step(shapes, window=512, target_length=4096, checkpointing=checkpointing, calibration=calibration)
    assert abs(plain.peak / measured - 1) <= 0.10, (plain.peak, measured)
    assert 0.98 <= calibrated.peak / measured <= 1.10, (calibrated.peak, measured)
    assert calibrated.seconds_per_step is not None and calibrated.seconds_per_step > 0


def test_pose_step_costs_its_window_not_its_target():
    shapes = Shapes.of_model(_llama(True))
    short = plan_step(shapes, window=256, target_length=256)
    long = plan_step(shapes, window=256, target_length=32768)
    assert short.peak == long.peak


def test_largest_window_is_the_last_that_fits():
    """Against a scan of every window: the bisection returns the largest window whose plan fits."""
    shapes = Shapes.of_model(_llama(False))
    available = plan_step(shapes, window=300, target_length=1024, checkpointing=False).peak / 0.9 + 1
    plan = plan_step(shapes, window=1024, target_length=1024, checkpointing=False, available=int(available))
    scan = [w for w in range(2, 1025) if plan_step(shapes, window=w, target_length=1024, checkpointing=False,
                                                   available=int(available)).fits]  # fmt: skip
    assert not plan.fits
    assert largest_window(plan, shapes, checkpointing=False) == max(scan) == 300
    tiny = plan_step(shapes, window=1024, target_length=1024, available=1000)
    assert largest_window(tiny, shapes) is None


def _finetune(llama_dir, text_file, out, *extra):
    args = ["finetune", "--model", str(llama_dir), "--text", str(text_file), "--scaling", "yarn", "--factor", "2"]
    return runner.invoke(app, [*args, "--target-length", "128", "--steps", "1", "-o", str(out), *extra])


def test_refuses_what_does_not_fit_naming_the_largest_window(llama_dir, text_file, tmp_path, monkeypatch):
    import ropekit.finetune.fit as fit

    config = fit.Shapes.of_config(__import__("json").loads((llama_dir / "config.json").read_text()))
    free = int(plan_step(config, window=100, target_length=128).peak / 0.9) + 1
    expected = max(w for w in range(2, 129) if plan_step(config, window=w, target_length=128, available=free).fits)
    assert expected < 128
    monkeypatch.setattr(fit, "available_memory", lambda device=None: free)
    out = tmp_path / "out"
    result = _finetune(llama_dir, text_file, out)
    assert result.exit_code == 2, result.output
    assert "--window 128:" in result.output and f"the largest window that fits is --window {expected} " in result.output
    assert not out.exists()
    result = _finetune(llama_dir, text_file, out, "--window", "32", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "plan: window 32 (target 128)" in result.output


def test_dry_run_prints_the_plan_and_trains_nothing(llama_dir, text_file, tmp_path, monkeypatch):
    import ropekit.finetune.run as run

    def no_training(*args, **kwargs):
        raise AssertionError("--dry-run trained")

    monkeypatch.setattr(run, "finetune", no_training)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = _finetune(llama_dir, text_file, tmp_path / "out", "--window", "64", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "plan: window 64 (target 128)" in result.output and "peak" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("steps, calibrated", [(1, False), (10_000, True)])
def test_calibrates_when_the_measured_steps_are_a_small_share_of_the_run(monkeypatch, steps, calibrated):
    """The measured step is cheap next to the run (at most ``CHEAP_SHARE`` of its FLOPs) or absolutely; with the
    absolute allowance at 0, a one-step run plans from the shapes alone and a long one measures its time per step."""
    import ropekit.finetune.fit as fit
    from ropekit.finetune.settings import FinetuneSettings

    monkeypatch.setattr(fit, "CHEAP_FLOPS", {"cpu": 0})
    built = []

    def build():
        built.append(1)
        return _llama(False)

    settings = FinetuneSettings(target_length=512, window=128, steps=steps, gradient_checkpointing=False)
    config = _llama(False).config.to_dict()
    plan, _ = fit.plan_finetune(config, settings, build_model=build, device=torch.device("cpu"))
    assert bool(built) is calibrated and plan.calibrated is calibrated
    assert (plan.seconds_per_step is not None) is calibrated
