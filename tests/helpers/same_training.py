"""Two trainings that differ only in float32 reduction order (sharded against one process): the bound
:func:`assert_same_training` checks on one weight tensor, and :func:`assert_same_run` on two whole ``finetune``
outputs (tests/finetune/test_fsdp.py, test_sharded.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

#: AdamW's betas in ropekit's training loop (``finetune/train.py``)
BETAS = (0.9, 0.95)


def _adam_step_bound(step: int) -> float:
    """The largest ``|m̂ / sqrt(v̂)|`` Adam can take at 1-based ``step``, whatever the gradients: by Cauchy-Schwarz,
    ``m̂ = Σ a_i g_i`` and ``v̂ = Σ b_i g_i²`` give ``|m̂| / sqrt(v̂) <= sqrt(Σ a_i² / b_i)`` (1 at the first step)."""
    b1, b2 = BETAS
    a = [(1 - b1) * b1 ** (step - i) / (1 - b1**step) for i in range(1, step + 1)]
    b = [(1 - b2) * b2 ** (step - i) / (1 - b2**step) for i in range(1, step + 1)]
    return sum(x * x / y for x, y in zip(a, b, strict=True)) ** 0.5


def assert_same_training(
    sharded: torch.Tensor, one: torch.Tensor, name: str, *, steps: int, lr: float, rounding: float | None = None
) -> None:
    """Two trainings of one weight tensor from the same start, which differ only in float32 reduction order.

    - Envelope: each AdamW step moves a weight by at most ``lr · _adam_step_bound(t)`` (the schedule's multiplier is
      at most 1, weight decay is 0), so the two runs can never part by more than twice the sum over the steps.
    - Rounding: where a gradient is far from zero, Adam's step ``m̂ / (sqrt(v̂) + ε)`` is a ratio of gradients, and
      reordered float32 sums change it by a relative few float32 epsilons, far below the weight's own precision; each
      step's ``w - step`` then rounds to float32 at the weight's magnitude, so the runs may differ by up to one unit
      in the last place (at most ``eps · max|w|``) per step.
    - Where a gradient is within rounding of zero beside Adam's ``ε`` (1e-8), the step ``g / (|g| + ε)`` turns with
      slope ``1/ε``, and the same rounding moves it by up to ``2·lr``: on this processor or another, under load or
      not, that is a handful of elements (one per tensor here, 1.1e-6 apart). A sharding error (a gradient not
      reduced, a shard updated twice or never) moves nearly every element of a tensor by about ``lr`` instead, so at
      most one element in a thousand may leave the rounding bound, and none the envelope.
    """
    difference = (sharded.double() - one.double()).abs()
    envelope = 2 * lr * sum(_adam_step_bound(t) for t in range(1, steps + 1))
    if rounding is None:  # one float32 unit in the last place per step
        rounding = steps * torch.finfo(torch.float32).eps * one.abs().max().item()
    assert difference.max().item() <= envelope, (name, difference.max().item(), envelope)
    outside = int((difference > rounding).sum())
    assert outside <= max(1, one.numel() // 1000), (name, outside, one.numel(), difference.max().item(), rounding)


def step_losses(out: Path) -> list[float]:
    """The training losses ``finetune`` logged in ``out`` (its ``loss.csv``), step 0's held-out row left out."""
    with (out / "finetune" / "loss.csv").open() as handle:
        return [float(row["loss"]) for row in csv.DictReader(handle) if row["step"] != "0"]


def assert_same_run(sharded: Path, one: Path, *, steps: int, lr: float, rounding: float | None = None) -> None:
    """Two ``finetune`` outputs of the same run: ``steps`` step losses equal to loss.csv's 6 decimals (1e-6 of
    rounding each side, plus float32 reduction order), the held-out losses before and after within 1e-6, and every
    weight within :func:`assert_same_training`'s bound."""
    from safetensors.torch import load_file

    assert len(step_losses(sharded)) == steps
    assert step_losses(sharded) == pytest.approx(step_losses(one), abs=4e-6)
    reports = [json.loads((out / "finetune" / "report.json").read_text()) for out in (sharded, one)]
    for key in ("heldout_loss_before", "heldout_loss_after"):
        assert reports[0][key] == pytest.approx(reports[1][key], rel=1e-6), key
    sharded_weights, one_weights = load_file(sharded / "model.safetensors"), load_file(one / "model.safetensors")
    assert sharded_weights.keys() == one_weights.keys()
    for name, weight in one_weights.items():
        assert_same_training(sharded_weights[name], weight, name, steps=steps, lr=lr, rounding=rounding)
