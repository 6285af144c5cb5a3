"""FSDP2 on CPU: ``ropekit finetune`` sharded over two gloo processes with ``configs/fsdp.yaml``'s FSDP settings gives
the one-process run's step losses, held-out losses and final weights, also when stopped by Ctrl-C and resumed from
its sharded checkpoint.

Oracle: the same command in one process, unsharded, on the same global batch (the data order depends on the seed
alone). accelerate 1.15 shards only on GPUs, so ``fsdp_worker.py`` initialises accelerate's state as it would there
(its docstring says how); torch's FSDP2 ``fully_shard`` itself runs on CPU over gloo.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ropekit.cli.app import app

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("fsdp_worker.py")


def _losses(out: Path) -> list[float]:
    with (out / "finetune" / "loss.csv").open() as handle:
        return [float(row["loss"]) for row in csv.DictReader(handle) if row["step"] != "0"]


def _args(model: Path, text: Path, out: Path, batch_size: int, lora_rank: int) -> list[str]:
    return [
        "finetune", "--model", str(model), "--scaling", "yarn", "--factor", "2", "--target-length", "128",
        "--text", str(text), "--steps", "3", "--batch-size", str(batch_size), "--lr", "1e-3",
        "--lora-rank", str(lora_rank), "--checkpoint-every", "0", "--no-evaluate", "--out", str(out),
    ]  # fmt: skip


# LoRA (frozen base weights beside trainable adapters, norms and embeddings in one shard group) is the slow case
@pytest.mark.parametrize("lora_rank", [0, pytest.param(4, marks=pytest.mark.slow)], ids=["full", "lora"])
def test_fsdp2_on_two_cpu_processes_matches_one_process(llama_dir, text_file, tmp_path, lora_rank):
    sharded = subprocess.run(
        [sys.executable, str(WORKER), "--processes", "2", "--config", str(ROOT / "configs" / "fsdp.yaml"), "--",
         *_args(llama_dir, text_file, tmp_path / "sharded", 1, lora_rank)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "accelerate chose MULTI_CPU" in sharded.stdout  # what accelerate itself does with this config on CPU
    one = CliRunner().invoke(app, _args(llama_dir, text_file, tmp_path / "one", 2, lora_rank))
    assert one.exit_code == 0, one.output

    reports = {
        name: json.loads((tmp_path / name / "finetune" / "report.json").read_text()) for name in ("sharded", "one")
    }
    assert (reports["sharded"]["processes"], reports["sharded"]["distributed"]) == (2, "FSDP")
    assert (reports["one"]["processes"], reports["one"]["distributed"]) == (1, "NO")
    shards = sorted(p.name for p in (tmp_path / "sharded" / "finetune" / "checkpoint").rglob("*.distcp"))
    assert shards == ["__0_0.distcp", "__0_0.distcp", "__1_0.distcp", "__1_0.distcp"]  # model and optimizer, 2 ranks

    assert len(_losses(tmp_path / "sharded")) == 3
    # loss.csv has 6 decimals: 1e-6 of rounding on each side, plus float32 reduction order
    assert _losses(tmp_path / "sharded") == pytest.approx(_losses(tmp_path / "one"), abs=4e-6)
    for key in ("heldout_loss_before", "heldout_loss_after"):
        assert reports["sharded"][key] == pytest.approx(reports["one"][key], rel=1e-6), key
    from safetensors.torch import load_file

    sharded_weights = load_file(tmp_path / "sharded" / "model.safetensors")
    one_weights = load_file(tmp_path / "one" / "model.safetensors")
    assert sharded_weights.keys() == one_weights.keys()
    for name, weight in one_weights.items():
        _assert_same_training(sharded_weights[name], weight, name, steps=3, lr=1e-3)


#: AdamW's betas in ropekit's training loop (``finetune/train.py``)
BETAS = (0.9, 0.95)


def _adam_step_bound(step: int) -> float:
    """The largest ``|m̂ / sqrt(v̂)|`` Adam can take at 1-based ``step``, whatever the gradients: by Cauchy-Schwarz,
    ``m̂ = Σ a_i g_i`` and ``v̂ = Σ b_i g_i²`` give ``|m̂| / sqrt(v̂) <= sqrt(Σ a_i² / b_i)`` (1 at the first step)."""
    b1, b2 = BETAS
    a = [(1 - b1) * b1 ** (step - i) / (1 - b1**step) for i in range(1, step + 1)]
    b = [(1 - b2) * b2 ** (step - i) / (1 - b2**step) for i in range(1, step + 1)]
    return sum(x * x / y for x, y in zip(a, b, strict=True)) ** 0.5


def _assert_same_training(sharded: torch.Tensor, one: torch.Tensor, name: str, *, steps: int, lr: float) -> None:
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
    rounding = steps * torch.finfo(torch.float32).eps * one.abs().max().item()
    assert difference.max().item() <= envelope, (name, difference.max().item(), envelope)
    outside = int((difference > rounding).sum())
    assert outside <= max(1, one.numel() // 1000), (name, outside, one.numel(), difference.max().item(), rounding)


@pytest.mark.slow
def test_fsdp2_run_stopped_by_ctrl_c_resumes_from_its_sharded_checkpoint(llama_dir, text_file, tmp_path):
    """Ctrl-C to both sharded workers stops them after a step with a sharded checkpoint (exit 130); ``--resume``
    loads it and continues the loss curve of an uninterrupted one-process run."""
    (tmp_path / "run").mkdir()
    out = tmp_path / "run" / "sharded"
    args = _args(llama_dir, text_file, out, 1, 0)
    args[args.index("--steps") + 1] = "8"
    worker = [sys.executable, str(WORKER), "--processes", "2", "--config", str(ROOT / "configs" / "fsdp.yaml"), "--"]
    process = subprocess.Popen(
        [*worker, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and process.poll() is None:
        logs = list((tmp_path / "run").rglob("loss.csv"))  # the run may write beside --out until it finishes
        if logs and len(logs[0].read_text().splitlines()) >= 3:  # header, step 0 (held-out), step 1
            break
        time.sleep(0.2)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr[-3000:]

    resumed = subprocess.run([*worker, *args, "--resume"], capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    one_args = _args(llama_dir, text_file, tmp_path / "one", 2, 0)
    one_args[one_args.index("--steps") + 1] = "8"
    one = CliRunner().invoke(app, one_args)
    assert one.exit_code == 0, one.output
    assert len(_losses(out)) == 8
    assert _losses(out) == pytest.approx(_losses(tmp_path / "one"), abs=4e-6)
